"""A build for this machine measures int8 against float as the backend runs it, and the
summary says when the runtime is slower at int8."""

from __future__ import annotations

from pathlib import Path

from edgekit.converters.estimate.host_speed import summary_line

from edgekit.artifact.archive import read_artifact


def test_host_build_records_int8_and_float_speed(digits_onnx_artifact: Path) -> None:
    speed = read_artifact(digits_onnx_artifact).manifest["validation"]["host_speed"]
    assert speed["float_ms"] > 0 and speed["int8_ms"] > 0
    assert speed["int8_speedup"] == round(speed["float_ms"] / speed["int8_ms"], 3) or \
        abs(speed["int8_speedup"] - speed["float_ms"] / speed["int8_ms"]) < 0.01
    assert speed["int8_kernels"] in ("fused", "unfused")


def test_summary_says_when_int8_is_slower() -> None:
    slow = {"float_ms": 0.05, "int8_ms": 0.09, "int8_speedup": 0.556, "int8_kernels": "unfused"}
    fast = {"float_ms": 0.08, "int8_ms": 0.06, "int8_speedup": 1.333, "int8_kernels": "fused"}
    assert "slower at int8" in summary_line(slow)
    assert "slower" not in summary_line(fast) and "1.33x" in summary_line(fast)
