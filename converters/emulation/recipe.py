"""What goes into an emulation sysroot, and where the built one is cached.

A recipe is derived from a target profile's ``[emulation]`` section. Everything that
changes the sysroot's content is in ``Recipe.key()``; the CPU model is *not* (one arm64
sysroot serves every aarch64 board: the CPU is chosen per run, see ``runner``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgekit.converters.core.cache import user_cache_dir

from edgekit.errors import TargetError

# Bump when the builder's output changes for the same inputs (layout, fix-ups, extraction):
# it is part of the cache key, so old sysroots are simply not reused.
# 2: wheels installed by pip from the hash-pinned lock file (was: unzipped by hand).
BUILDER_VERSION = 2

DEBIAN_SUITE = "bookworm"  # Debian 12: python3.11, glibc 2.36
DEBIAN_PYTHON = "3.11"
GLIBC = (2, 36)  # wheels tagged manylinux_2_X with X <= 36 run on bookworm

# Debian architecture -> (GNU multiarch triplet, python platform.machine())
ARCHES: dict[str, tuple[str, str]] = {
    "arm64": ("aarch64-linux-gnu", "aarch64"),
}

# Debian packages for the userland: the interpreter and the C/C++ runtime the wheels link to.
# apt resolves their dependency closure (libc6, libssl3, zlib1g, ...).
DEBIAN_PACKAGES = ("python3.11", "libstdc++6", "libgcc-s1")

# Wheels, pinned so that the cache key names exact versions (mirrors this project's host
# set-up: numpy 2.4, onnxruntime 1.32, ai-edge-litert 2.3). Keyed by the pip name a
# profile lists under [emulation] runtimes. WHEEL_LOCK holds these with their dependency
# closure and sha256 hashes: what pip really installs (a test keeps the two in step).
WHEEL_LOCK = Path(__file__).with_name("sysroot-wheels.txt")
WHEEL_PINS: dict[str, str] = {
    "numpy": "numpy==2.4.6",
    "onnxruntime": "onnxruntime==1.32.0",
    "ai-edge-litert": "ai-edge-litert==2.3.0",
}

# Where wheels and the project go inside the sysroot (Debian's site dir for local installs;
# Debian's site.py adds it when it exists, also under ``python -I``).
SITE_PACKAGES = f"usr/local/lib/python{DEBIAN_PYTHON}/dist-packages"


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a sysroot's content."""

    debian_arch: str
    suite: str
    python_version: str
    python_abi: str
    debian_packages: tuple[str, ...]
    wheels: tuple[str, ...]
    wheel_platforms: tuple[str, ...]
    wheel_lock_sha256: str = ""  # the lock file's content is part of the key
    builder_version: int = BUILDER_VERSION
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def triplet(self) -> str:
        return ARCHES[self.debian_arch][0]

    @property
    def machine(self) -> str:
        return ARCHES[self.debian_arch][1]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("extra")
        return data

    def key(self) -> str:
        """Short hash naming the cache folder: same recipe, same sysroot."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def recipe_for(profile: Any) -> Recipe:
    """The recipe for a target profile (an ``edgekit.targets.Profile``)."""
    emu = profile.emulation
    name = profile.name
    if not emu.qemu:
        raise TargetError(
            f"target {name!r} has no emulation (its [emulation] qemu is empty: it runs natively); "
            "expected an emulated board such as rpi4 or rpi-zero2w"
        )
    arch = emu.debian_arch
    if arch not in ARCHES:
        raise TargetError(
            f"target {name!r}: [emulation] debian_arch = {arch!r}; this sysroot builder "
            f"supports {', '.join(ARCHES)}"
        )
    abi = emu.python_abi
    expected_abi = "cp" + DEBIAN_PYTHON.replace(".", "")
    if abi != expected_abi:
        raise TargetError(
            f"target {name!r}: [emulation] python_abi = {abi!r}; Debian {DEBIAN_SUITE} ships "
            f"Python {DEBIAN_PYTHON} ({expected_abi})"
        )
    platforms = tuple(emu.wheel_platforms)
    if not platforms:
        raise TargetError(f"target {name!r}: [emulation] wheel_platforms is empty")
    unknown = [r for r in emu.runtimes if r not in WHEEL_PINS]
    if unknown:
        raise TargetError(
            f"target {name!r}: [emulation] runtimes {unknown} have no pinned wheel; "
            f"known: {', '.join(k for k in WHEEL_PINS if k != 'numpy')}"
        )
    wheels = (WHEEL_PINS["numpy"], *sorted(WHEEL_PINS[r] for r in emu.runtimes))
    return Recipe(
        debian_arch=arch,
        suite=DEBIAN_SUITE,
        python_version=DEBIAN_PYTHON,
        python_abi=abi,
        debian_packages=DEBIAN_PACKAGES,
        wheels=wheels,
        wheel_platforms=platforms,
        wheel_lock_sha256=hashlib.sha256(WHEEL_LOCK.read_bytes()).hexdigest(),
    )


def cache_root() -> Path:
    """``$EDGEKIT_SYSROOT_CACHE``, else the user cache folder's ``sysroot`` (on Linux
    ``$XDG_CACHE_HOME/edgekit/sysroot``, default ``~/.cache/edgekit/sysroot``)."""
    explicit = os.environ.get("EDGEKIT_SYSROOT_CACHE")
    if explicit:
        return Path(explicit).expanduser().resolve()
    return user_cache_dir() / "sysroot"
