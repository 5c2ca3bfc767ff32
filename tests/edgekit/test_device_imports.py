"""Loading an artifact imports the device package only: no converter, emulation or host tool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SHIPPED = Path(__file__).resolve().parents[2] / "examples" / "raspberrypi" / "digits.rpi4.edgekit"
HOST_ONLY = ("onnx", "torch", "PIL", "platformdirs", "filelock")


def imported_modules(code: str, cwd: Path) -> list[str]:
    """Every module ``python -X importtime -c code`` imports, in order."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                          text=True, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line and "cumulative" not in line]


@pytest.mark.parametrize("backend", [None, "litert", "onnxruntime"])
def test_load_imports_no_host_module(backend: str | None, tmp_path: Path) -> None:
    code = (f"import edgekit; m = edgekit.load({str(SHIPPED)!r}, backend={backend!r}); "
            "m.predict(m.artifact.test_vectors()['in/image'][:1]); m.close()")
    modules = imported_modules(code, tmp_path)
    assert "edgekit.model" in modules and "numpy" in modules  # the listing is real
    assert (backend or "litert") in " ".join(modules)  # the runtime it ran on was imported
    host = [m for m in modules if m.split(".")[0] in HOST_ONLY
            or m.startswith("edgekit.converters") or "emulation" in m.split(".")]
    assert host == [], host
