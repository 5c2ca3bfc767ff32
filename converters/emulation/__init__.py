"""Emulated targets: run artifacts on a board's own CPU model under QEMU user-mode emulation.

Host side: stdlib plus filelock and platformdirs (the guest side, ``guest.py``, runs inside
the emulator as a script, importing only the device package)::

    from edgekit.targets import load_profile
    from edgekit.converters.emulation import emulate
    result = emulate("net.edgekit", load_profile("rpi4"))
    print("\\n".join(result.lines())); assert result.passed

``recipe`` says what the sysroot holds, ``apt`` fetches Debian packages with a private APT,
``builder`` builds and caches the sysroot, ``runner`` runs its Python under QEMU with a
target's CPU, ``session`` ties them together for ``edgekit emulate``, ``batch`` runs many artifacts in one
emulated interpreter (sweeps).
"""

from __future__ import annotations

from edgekit.converters.emulation.batch import BatchResult, OutputsJob, emulate_batch
from edgekit.converters.emulation.builder import Sysroot, ensure_sysroot
from edgekit.converters.emulation.golden import golden_on
from edgekit.converters.emulation.recipe import Recipe, cache_root, recipe_for
from edgekit.converters.emulation.runner import CpuSpec, run_guest, run_python
from edgekit.converters.emulation.session import (
    TIMING_LABEL,
    EmulationResult,
    emulate,
    emulated_outputs,
    prepare,
    probe,
)

__all__ = [
    "golden_on",
    "TIMING_LABEL",
    "BatchResult",
    "CpuSpec",
    "EmulationResult",
    "Recipe",
    "Sysroot",
    "cache_root",
    "emulate",
    "emulate_batch",
    "emulated_outputs",
    "ensure_sysroot",
    "OutputsJob",
    "prepare",
    "probe",
    "recipe_for",
    "run_guest",
    "run_python",
]
