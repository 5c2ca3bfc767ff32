"""``edgekit bundle``: everything a board needs to run artifacts offline, in one folder or
tarball (issue 18).

A bundle holds the artifact(s), this project's device wheel, the target's wheels for its
Python and platform pinned by sha256 in ``requirements.txt``, ``install.sh`` (a venv, then
``pip install --no-index --find-links wheels --require-hashes``, then ``edgekit install``
per artifact: verify on the device, switch the ``current`` link, restart the service), a
systemd unit per artifact, a README, and ``BUNDLE.sha256`` over every other file.
``wheels`` resolves and builds the wheels, ``layout`` writes the bundle.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.converters.bundle.layout import (
    artifact_name,
    requirements_text,
    template,
    unit_text,
    write_bundle,
)
from edgekit.converters.bundle.wheels import (
    build_device_wheel,
    download,
    requirements_for,
    source_root,
)
from edgekit.converters.emulation.recipe import recipe_for

from edgekit.artifact.archive import read_artifact
from edgekit.errors import UserError
from edgekit.trust.signing import read_signature

Progress = Callable[[str], None]
EXAMPLE = Path("examples") / "raspberrypi"


@dataclass(frozen=True)
class BundleResult:
    path: Path
    size_bytes: int
    seconds: float
    wheels: tuple[str, ...]
    artifacts: tuple[str, ...]


def _quiet(_: str) -> None:
    pass


def build_bundle(artifacts: list[Path], profile: Any, out: Path, force: bool = False,
                 progress: Progress = _quiet) -> BundleResult:
    """Bundle ``artifacts`` for ``profile`` (an ``edgekit.targets.Profile``) into ``out``."""
    started = time.monotonic()
    recipe = recipe_for(profile)  # the target's Python, ABI and wheel platforms
    files: dict[str, bytes] = {}
    names: list[str] = []
    runtimes: list[str] = []
    signed = False
    for path in artifacts:
        artifact = read_artifact(path)  # hashes and schema checked before anything ships
        built_for = artifact.spec.target.name
        if built_for != profile.name:
            raise UserError(f"{path}: built for {built_for!r}; expected an artifact built for "
                            f"{profile.name!r} (the bundle's --target)")
        name = artifact_name(path)
        if name in names:
            raise UserError(f"{path}: two artifacts named {name!r}; expected distinct file names")
        names.append(name)
        runtimes.append(artifact.spec.models[0].runtime)  # models[] is in preference order
        signed = signed or read_signature(artifact.manifest) is not None
        files[f"artifacts/{path.name}"] = Path(path).read_bytes()
    requirements = sorted({r for rt in runtimes for r in requirements_for(rt, signed)})
    with tempfile.TemporaryDirectory(prefix="edgekit-bundle-wheels-") as tmp:
        progress(f"building the device wheel (edgekit, edgekit.targets) from {source_root()}")
        device = build_device_wheel(Path(tmp) / "device")
        progress(f"resolving {', '.join(requirements)} for CPython {recipe.python_version} "
                 f"{recipe.machine} ({recipe.wheel_platforms[-2]} and older)")
        wheels = [device, *download(requirements, recipe, Path(tmp) / "target")]
        for wheel in wheels:
            files[f"wheels/{wheel.path.name}"] = wheel.path.read_bytes()
    pip_wheel = next(w.path.name for w in wheels if w.name == "pip")
    files["requirements.txt"] = requirements_text(wheels).encode()
    example = source_root() / EXAMPLE
    for name in names:
        files[f"edgekit-{name}.service"] = unit_text(example / "edgekit-classify.service",
                                                     name).encode()
    for src in sorted([example / "classify_service.py", example / "README.md",
                       *(example / "app").glob("*.py")]):
        files[f"service/{src.relative_to(example).as_posix()}"] = src.read_bytes()
    values = {"TARGET": profile.name, "PYTHON_VERSION": recipe.python_version,
              "MACHINE": recipe.machine, "PIP_WHEEL": pip_wheel, "NAMES": " ".join(names),
              "ARTIFACTS": "\n".join(f"| `artifacts/{p.name}` | `{n}` |"
                                     for p, n in zip(artifacts, names, strict=True)),
              "WHEELS": ", ".join(f"{w.name} {w.version}" for w in wheels)}
    files["install.sh"] = template("install.sh", **values).encode()
    files["README.md"] = template("README.md", **values).encode()
    written = write_bundle(files, out, force)
    size = (written.stat().st_size if written.is_file()
            else sum(p.stat().st_size for p in written.rglob("*") if p.is_file()))
    return BundleResult(written, size, time.monotonic() - started,
                        tuple(sorted(w.path.name for w in wheels)), tuple(names))


__all__ = ["BundleResult", "build_bundle"]
