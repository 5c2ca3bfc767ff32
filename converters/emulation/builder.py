"""Build (once) and cache the emulation sysroot; keep the project layer in it current.

Layout under ``cache_root()``::

    <recipe-key>/root/          the arm64 userland (Debian debs + wheels), read-only after build
    <recipe-key>/sysroot.json   recipe, resolved package and wheel versions, build time
    <recipe-key>/views/<cpu>/   per-CPU QEMU prefixes (see runner)
    apt-<arch>/                 private APT home (lists and .debs reused across builds)
    .lock-<recipe-key>          serialises builders of the same recipe

The base is built in a temp folder beside its final place and renamed in one step, so a
half-built sysroot is never seen. The project's own pure-Python code (``edgekit``,
``edgekit.targets``; not the converters) lives in ``root/opt/edgekit/<source-hash>/``,
named in a ``.pth`` file: a source change adds a new layer and switches the ``.pth``
atomically, so a run already going keeps the layer it started with.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgekit.converters.emulation.apt import PrivateApt, extract
from edgekit.converters.emulation.recipe import SITE_PACKAGES, WHEEL_LOCK, Recipe, cache_root
from filelock import FileLock

from edgekit.errors import InternalError, UserError

Progress = Callable[[str], None]
PTH_NAME = "edgekit-project.pth"
LAYERS = "opt/edgekit"


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Sysroot:
    """A built sysroot: ``root`` is what QEMU's ``-L`` and the guest's ``/`` refer to."""

    path: Path  # <cache>/<recipe-key>
    recipe: Recipe

    @property
    def root(self) -> Path:
        return self.path / "root"

    @property
    def python(self) -> Path:
        return self.root / "usr" / "bin" / f"python{self.recipe.python_version}"

    @property
    def info(self) -> dict:
        return json.loads((self.path / "sysroot.json").read_text())


def ensure_sysroot(recipe: Recipe, progress: Progress = _quiet, rebuild: bool = False) -> Sysroot:
    """The cached sysroot for ``recipe``, built first if missing, with the project layer
    matching the edgekit source this process imports."""
    cache = cache_root()
    final = cache / recipe.key()
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(cache / f".lock-{recipe.key()}"):
        if rebuild and final.exists():
            progress(f"removing cached sysroot {final}")
            shutil.rmtree(final)
        if not (final / "sysroot.json").is_file():
            for stale in cache.glob(f".build-{recipe.key()}-*"):  # a killed build's leftovers
                shutil.rmtree(stale, ignore_errors=True)
            if final.exists():  # no sysroot.json: not something this builder finished
                shutil.rmtree(final)
            _build(recipe, cache, final, progress)
        sysroot = Sysroot(final, recipe)
        install_project(sysroot, progress)
    return sysroot


def _build(recipe: Recipe, cache: Path, final: Path, progress: Progress) -> None:
    started = time.monotonic()
    progress(f"building the {recipe.debian_arch} sysroot (Debian {recipe.suite}, "
             f"Python {recipe.python_version}) into {final}")
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{recipe.key()}-", dir=cache))
    try:
        root = tmp / "root"
        apt = PrivateApt(cache / f"apt-{recipe.debian_arch}", recipe.debian_arch, recipe.suite)
        step = _stepper(progress, started)
        step(f"1/4 apt-get update ({recipe.debian_arch}, {apt.mirrors[0]})")
        apt.update()
        step(f"2/4 downloading {' '.join(recipe.debian_packages)} and their dependencies")
        debs = apt.download(recipe.debian_packages)
        step(f"3/4 unpacking {len(debs)} .debs with dpkg-deb -x")
        extract(debs, root)
        _fix_absolute_symlinks(root)
        if not (root / "usr" / "bin" / f"python{recipe.python_version}").is_file():
            raise InternalError(f"the unpacked sysroot has no usr/bin/python{recipe.python_version}")
        step(f"4/4 pip install --target of {WHEEL_LOCK.name}: {' '.join(recipe.wheels)} "
             "and their dependencies")
        wheels = _install_wheels(recipe, root)
        info = {
            "recipe": recipe.to_dict(),
            "key": recipe.key(),
            "debs": [p.name for p in debs],
            "wheels": wheels,
            "mirrors": list(apt.mirrors),
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(time.monotonic() - started, 1),
        }
        (tmp / "sysroot.json").write_text(json.dumps(info, indent=2))
        os.replace(tmp, final)  # atomic: the sysroot appears whole or not at all
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    progress(f"sysroot ready in {time.monotonic() - started:.1f} s: {final}")


def _stepper(progress: Progress, started: float) -> Progress:
    def step(message: str) -> None:
        progress(f"  [{time.monotonic() - started:5.1f} s] {message}")

    return step


def _fix_absolute_symlinks(root: Path) -> None:
    """Make absolute symlinks relative: the host kernel resolves them against the host's /,
    not the sysroot (QEMU only redirects the path a program asks for)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            link = Path(dirpath) / name
            if link.is_symlink():
                target = os.readlink(link)
                if target.startswith("/"):
                    relative = os.path.relpath(root / target.lstrip("/"), link.parent)
                    link.unlink()
                    link.symlink_to(relative)


def _install_wheels(recipe: Recipe, root: Path) -> list[str]:
    """pip-install the hash-pinned lock into the sysroot's site-packages for the target's
    platform (every accepted tag listed: pip does not infer older manylinux tags for a
    foreign platform). Nothing runs under emulation: pip only unpacks wheels."""
    site = root / SITE_PACKAGES
    platforms = [arg for tag in recipe.wheel_platforms for arg in ("--platform", tag)]
    argv = [sys.executable, "-m", "pip", "install", "--require-hashes", "--only-binary=:all:",
            *platforms, "--python-version", recipe.python_version, "--implementation", "cp",
            "--abi", recipe.python_abi, "--target", str(site), "--no-compile",
            "--report", str(root.parent / "pip-report.json"), "-r", str(WHEEL_LOCK)]
    proc = subprocess.run(argv, capture_output=True, text=True,
                          env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    if proc.returncode != 0:
        raise UserError(
            f"pip install of {WHEEL_LOCK.name} for {', '.join(recipe.wheel_platforms)} "
            f"failed (exit {proc.returncode}):\n{proc.stderr.strip()[-3000:]}"
        )
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: nothing runs them
    report = json.loads((root.parent / "pip-report.json").read_text())
    return sorted(Path(item["download_info"]["url"]).name for item in report["install"])


# -- the project layer ------------------------------------------------------------------

def project_sources() -> list[tuple[str, Path]]:
    """(path inside the layer, host file) for edgekit and edgekit.targets, as imported here
    (an editable checkout or an installed package alike); never the converters."""
    import edgekit.targets

    import edgekit

    pkg = Path(edgekit.__file__).resolve().parent
    targets = Path(edgekit.targets.__file__).resolve().parent
    files: list[tuple[str, Path]] = []
    for base, prefix in ((pkg, "edgekit"), (targets, "edgekit/targets")):
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(base)
            if not path.is_file() or "__pycache__" in rel.parts or path.suffix == ".pyc":
                continue
            if base == pkg and rel.parts[0] in ("converters", "targets"):
                continue  # converters are host-only; targets come from their own folder
            files.append((f"{prefix}/{rel.as_posix()}", path))
    return files


def source_hash(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for rel, path in files:
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def install_project(sysroot: Sysroot, progress: Progress = _quiet) -> str:
    """Copy this edgekit into the sysroot unless that exact source is already there."""
    files = project_sources()
    digest = source_hash(files)
    layers = sysroot.root / LAYERS
    layer = layers / digest
    pth = sysroot.root / SITE_PACKAGES / PTH_NAME
    guest_path = f"/{LAYERS}/{digest}"
    if layer.is_dir() and pth.is_file() and pth.read_text().strip() == guest_path:
        return digest
    progress(f"installing edgekit source {digest} into the sysroot")
    layers.mkdir(parents=True, exist_ok=True)
    if not layer.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=layers))
        for rel, path in files:
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        os.replace(tmp, layer)
    # The guest sees the sysroot as /, so the .pth names the layer by its guest path.
    tmp_pth = pth.with_suffix(".tmp")
    tmp_pth.write_text(guest_path + "\n")
    os.replace(tmp_pth, pth)
    for old in layers.iterdir():  # drop layers unused for an hour (a run may still use one)
        if old.name != digest and time.time() - old.stat().st_mtime > 3600:
            shutil.rmtree(old, ignore_errors=True)
    return digest
