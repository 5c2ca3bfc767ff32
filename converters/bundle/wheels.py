"""The wheels a bundle carries: this project's device wheel and the target's dependencies.

* The device wheel is built by pip from this checkout's ``setup.py`` with
  ``EDGEKIT_DEVICE_ONLY=1`` (packages ``edgekit`` and ``edgekit.targets``, never the
  converters) in a copy of the sources, with ``SOURCE_DATE_EPOCH`` fixed and the build
  backend pinned, so the same source gives the same bytes.
* The target's wheels are resolved by ``pip download --only-binary=:all: --platform ...
  --python-version --implementation --abi`` for the platforms the profile lists under
  ``[emulation] wheel_platforms`` (the emulation sysroot's resolution), with every version
  pinned by the sysroot's lock (``converters/emulation/sysroot-wheels.txt``): a wheel the
  lock names must match its sha256 there, so a bundle and the emulated CI run the same files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from edgekit.converters.emulation.recipe import WHEEL_LOCK, WHEEL_PINS, Recipe

from edgekit.errors import InternalError, UserError

# Fixed wheel timestamps (zip cannot store dates before 1980): same source, same wheel.
SOURCE_DATE_EPOCH = 315532800  # 1980-01-01T00:00:00Z
# The isolated build environment's backend, pinned: a new setuptools may lay a wheel out
# differently. pip applies PIP_CONSTRAINT to the build environment it installs.
BUILD_BACKEND_PINS = ("setuptools==84.2.1", "wheel==0.48.0", "packaging==26.4")
DEVICE_SOURCES = ("setup.py", "pyproject.toml", "README.md", "edgekit", "targets")
# The runtime a models[] entry names -> its pip distribution (pinned in WHEEL_PINS).
RUNTIME_DISTRIBUTIONS = {"litert": "ai-edge-litert", "onnxruntime": "onnxruntime"}
# Not in the sysroot lock: pinned to what this host runs (the installer itself, the CLI's
# click, and cryptography for signed artifacts).
HOST_PINNED = ("pip", "click", "cryptography", "cffi", "pycparser")


@dataclass(frozen=True)
class Wheel:
    path: Path
    name: str  # as in the file name (normalised, underscores)
    version: str
    sha256: str

    @classmethod
    def at(cls, path: Path) -> Wheel:
        name, version = path.name.split("-")[:2]
        return cls(path, name, version, hashlib.sha256(path.read_bytes()).hexdigest())


def normalise(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def lock_entries() -> dict[str, tuple[str, str]]:
    """normalised name -> (version, sha256) from the sysroot's lock file."""
    found: dict[str, tuple[str, str]] = {}
    for line in WHEEL_LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, _, digest = line.partition(" --hash=sha256:")
        name, _, version = spec.partition("==")
        found[normalise(name)] = (version.strip(), digest.strip())
    return found


def constraints() -> list[str]:
    """name==version for every lock entry and for the host-pinned packages installed here."""
    pins = [f"{name}=={version}" for name, (version, _) in sorted(lock_entries().items())]
    for name in HOST_PINNED:
        if normalise(name) in lock_entries():
            continue
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue  # resolved by the index (still hash-pinned in the bundle)
    return pins


def requirements_for(runtime: str, signed: bool) -> list[str]:
    """What the device needs besides this project's wheel: numpy, click, the runtime, pip
    (so the venv can manage itself later), cryptography when the artifact is signed."""
    if runtime not in RUNTIME_DISTRIBUTIONS:
        raise UserError(f"the artifact prefers the runtime {runtime!r}; a bundle can carry "
                        f"{', '.join(sorted(RUNTIME_DISTRIBUTIONS))}")
    dist = RUNTIME_DISTRIBUTIONS[runtime]
    wanted = [WHEEL_PINS["numpy"], WHEEL_PINS[dist], "click", "pip"]
    if signed:
        wanted.append("cryptography")
    return wanted


def download(requirements: list[str], recipe: Recipe, dest: Path) -> list[Wheel]:
    """pip download the target's wheels (and their closure) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="edgekit-bundle-") as tmp:
        pins = Path(tmp) / "constraints.txt"
        pins.write_text("\n".join(constraints()) + "\n")
        platforms = [arg for tag in recipe.wheel_platforms for arg in ("--platform", tag)]
        argv = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", *platforms,
                "--python-version", recipe.python_version, "--implementation", "cp",
                "--abi", recipe.python_abi, "-c", str(pins), "-d", str(dest), "-q",
                *requirements]
        _run(argv, f"pip download for {', '.join(recipe.wheel_platforms)}")
    wheels = [Wheel.at(p) for p in sorted(dest.glob("*.whl"))]
    locked = lock_entries()
    for wheel in wheels:
        expected = locked.get(normalise(wheel.name))
        if expected and expected != (wheel.version, wheel.sha256):
            raise InternalError(
                f"{wheel.path.name}: expected {wheel.name} {expected[0]} with sha256 "
                f"{expected[1][:12]}... as {WHEEL_LOCK.name} pins it, got {wheel.version} "
                f"with {wheel.sha256[:12]}...")
    return wheels


def source_root() -> Path:
    """The checkout this edgekit runs from: the device wheel is built from its setup.py."""
    import edgekit

    root = Path(edgekit.__file__).resolve().parent.parent
    if not (root / "setup.py").is_file():
        raise UserError(f"edgekit bundle builds the device wheel from a source checkout; "
                        f"{root} has no setup.py (run it from a clone: pip install -e .)")
    return root


def build_device_wheel(dest: Path) -> Wheel:
    """``pip wheel`` of the device package from a clean copy of the sources."""
    root = source_root()
    with tempfile.TemporaryDirectory(prefix="edgekit-device-wheel-") as tmp:
        src = Path(tmp) / "src"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
        for name in DEVICE_SOURCES:
            path = root / name
            if path.is_dir():
                shutil.copytree(path, src / name, ignore=ignore)
            else:
                src.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, src / name)
        pins = Path(tmp) / "build-constraints.txt"
        pins.write_text("\n".join(BUILD_BACKEND_PINS) + "\n")
        out = Path(tmp) / "dist"
        env = dict(os.environ, EDGEKIT_DEVICE_ONLY="1", SOURCE_DATE_EPOCH=str(SOURCE_DATE_EPOCH),
                   PIP_CONSTRAINT=str(pins), PIP_DISABLE_PIP_VERSION_CHECK="1")
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
             "building the device wheel", env=env)
        built = sorted(out.glob("*.whl"))
        if len(built) != 1:
            raise InternalError(f"pip wheel left {[p.name for p in built]}; expected one wheel")
        dest.mkdir(parents=True, exist_ok=True)
        final = dest / built[0].name
        shutil.copyfile(built[0], final)
    return Wheel.at(final)


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise UserError(f"{what} failed (exit {proc.returncode}): {' '.join(argv[2:6])} ...\n"
                        f"{proc.stderr.strip()[-3000:]}")
