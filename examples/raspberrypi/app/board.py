"""Which board is this, and was the artifact built for it?

The model string comes from the device tree (``/proc/device-tree/model``, which the
Raspberry Pi firmware fills in, e.g. ``Raspberry Pi 4 Model B Rev 1.4``), else from the
``Model`` line Raspberry Pi OS kernels add to ``/proc/cpuinfo``. Both are read under a
configurable root so that tests can hand in a fake tree.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any

# (substring of the model string, edgekit target), most specific first: "Raspberry Pi 400"
# contains "Raspberry Pi 4" and is a Pi 4 inside, the Zero 2 W is a Pi 3 SoC but has its own
# (smaller RAM, weaker cooling) profile.
BOARD_TARGETS: tuple[tuple[str, str], ...] = (
    ("Raspberry Pi Zero 2", "rpi-zero2w"),
    ("Raspberry Pi Compute Module 5", "rpi5"),
    ("Raspberry Pi 5", "rpi5"),
    ("Raspberry Pi Compute Module 4", "rpi4"),
    ("Raspberry Pi 4", "rpi4"),
    ("Raspberry Pi Compute Module 3", "rpi3"),
    ("Raspberry Pi 3", "rpi3"),
)

MODEL_FILES = ("proc/device-tree/model", "sys/firmware/devicetree/base/model")


@dataclass(frozen=True)
class Board:
    model: str | None  # e.g. "Raspberry Pi 4 Model B Rev 1.4"; None when nothing says
    source: str  # the file the model string came from ("" if none)
    target: str | None  # the edgekit target profile for this board, if there is one
    machine: str  # platform.machine(): aarch64, armv7l, x86_64 ...

    def describe(self) -> str:
        if self.model:
            return f"{self.model!r} (target {self.target or 'none'}, {self.machine})"
        return f"an unidentified {self.machine} machine"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            # the device-tree property is NUL-terminated
            return handle.read().split(b"\0", 1)[0].decode("utf-8", "replace").strip() or None
    except OSError:
        return None


def target_for_model(model: str | None) -> str | None:
    if not model:
        return None
    for needle, target in BOARD_TARGETS:
        if needle in model:
            return target
    return None


def detect_board(root: str = "/") -> Board:
    machine = platform.machine()
    for rel in MODEL_FILES:
        model = _read(os.path.join(root, rel))
        if model:
            return Board(model, "/" + rel, target_for_model(model), machine)
    cpuinfo = _read(os.path.join(root, "proc/cpuinfo")) or ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Model" and value.strip():
            model = value.strip()
            return Board(model, "/proc/cpuinfo", target_for_model(model), machine)
    return Board(None, "", None, machine)


def target_warning(board: Board, manifest: dict[str, Any], artifact: str) -> str | None:
    """A warning naming both targets when the artifact was built for another board."""
    built = manifest["target"]["name"]
    profile = manifest["target"].get("profile") or {}
    description = profile.get("description", built)
    arch = (profile.get("cpu") or {}).get("arch")
    if board.target == built:
        return None
    if board.target is not None:
        return (f"{artifact} was built for target {built!r} ({description}) but this board is "
                f"{board.model!r} (target {board.target!r}): it runs, but its size budgets, "
                f"thermal limits and power figures are the {built} ones; rebuild it on the "
                f"host with: edgekit build --target {board.target} <model> -o "
                f"<name>.{board.target}.edgekit")
    if board.model is not None:
        return (f"{artifact} was built for target {built!r} ({description}) but this board is "
                f"{board.model!r}, which has no edgekit target profile: limits and tuning "
                f"assume a {built}")
    if arch and arch != board.machine:
        return (f"{artifact} was built for target {built!r} ({description}, {arch}) but this "
                f"machine is an unidentified {board.machine} board (no "
                f"/proc/device-tree/model, no Model line in /proc/cpuinfo)")
    return None
