"""Emulated targets: run artifacts on a board's own CPU model under QEMU user-mode emulation.

Host side, stdlib only (the guest side, ``guest.py``, runs inside the emulator)::

    from edgekit.targets import load_profile
    from edgekit.emulation import emulate
    result = emulate("net.edgekit", load_profile("rpi4"))
    print("\\n".join(result.lines())); assert result.passed

``recipe`` says what the sysroot holds, ``apt`` fetches Debian packages with a private APT,
``builder`` builds and caches the sysroot, ``runner`` runs its Python under QEMU with a
target's CPU, ``session`` ties them together for ``edgekit emulate``.
"""

from __future__ import annotations

from edgekit.emulation.builder import Sysroot, ensure_sysroot
from edgekit.emulation.recipe import Recipe, cache_root, recipe_for
from edgekit.emulation.runner import CpuSpec, run_guest, run_python
from edgekit.emulation.session import TIMING_LABEL, EmulationResult, emulate, prepare, probe

__all__ = [
    "TIMING_LABEL",
    "CpuSpec",
    "EmulationResult",
    "Recipe",
    "Sysroot",
    "cache_root",
    "emulate",
    "ensure_sysroot",
    "prepare",
    "probe",
    "recipe_for",
    "run_guest",
    "run_python",
]
