"""Shared by the classify-service tests: paths, fake board trees, labels from file names."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import EXAMPLE

ARTIFACT = EXAMPLE / "digits.rpi4.edgekit"
SCRIPT = EXAMPLE / "classify_service.py"
PI4 = "Raspberry Pi 4 Model B Rev 1.4"
PI5 = "Raspberry Pi 5 Model B Rev 1.0"


def put(root: Path, rel: str, data: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def board_root(root: Path, model: str | None = PI4, temp_mc: int = 52000) -> Path:
    """A fake / with the device-tree model string (NUL-terminated, as the firmware writes
    it) and one thermal zone."""
    if model:
        put(root, "proc/device-tree/model", model.encode() + b"\0")
    put(root, "sys/class/thermal/thermal_zone0/type", "cpu-thermal\n")
    put(root, "sys/class/thermal/thermal_zone0/temp", f"{temp_mc}\n")
    return root


def label_of(path: str) -> int:
    return int(Path(path).name.split("_")[0])


def read_results(path: Path) -> list[dict]:
    """The service's --output: one JSON object per line."""
    return [json.loads(line) for line in path.read_text().splitlines()]
