"""The reference PTQ reuses the quantize stage's own min-max model when that stage made the very
same quantize_static call (per-channel U8S8, nothing kept float, the same ranges): the bytes
are what quantizing again gives, and the build saves onnxruntime's per-channel Python.
Real digits CNN, real onnxruntime quantizer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters import build
from edgekit.converters.stages import reference_ptq as module

from ...conftest import DIGITS_NPZ, DIGITS_ONNX


def test_the_reused_reference_is_byte_for_byte_a_fresh_one(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with np.load(DIGITS_NPZ) as npz:
        np.savez(tmp_path / "calib.npz", x=npz["x"][:64])
    original = module.reference_ptq
    seen: list[tuple[bool, bytes, bytes]] = []

    def both(prepared, calib, out, batched=False, ranges=None, quantized=None):  # noqa: ANN001, ANN202
        reused = original(prepared, calib, out.with_name("reused.onnx"), batched, ranges, quantized)
        fresh = original(prepared, calib, out, batched, ranges, None)
        seen.append((quantized is not None and quantized.is_file(), reused.read_bytes(), fresh.read_bytes()))
        return fresh

    monkeypatch.setattr(module, "reference_ptq", both)
    build(str(DIGITS_ONNX), target="rpi4", calib=str(tmp_path / "calib.npz"),
          output=tmp_path / "digits.edgekit", quiet=True, guard_time=0, formats=["onnx"])
    assert len(seen) == 1
    offered, reused, fresh = seen[0]
    assert offered, "the quantize stage's plain min-max model was not offered to the reference"
    assert reused == fresh
