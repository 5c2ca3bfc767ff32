"""The estimator reads a .tflite: same parameters and MACs as the ONNX model it was written
from, a tflite-only artifact estimated through its .tflite, and bad files refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from edgekit.converters.estimate import estimate
from edgekit.converters.tflite import convert
from onnx import helper

from edgekit.errors import ModelFormatError, UnsupportedModelError

from .test_estimate import make, w


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A QDQ ONNX model (RGB stem conv, depthwise conv, 1x1 conv, pool, flatten, FC) and the
    .tflite edgekit writes from it."""
    work = tmp_path_factory.mktemp("est_tflite")
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["a1"]),
        helper.make_node("Conv", ["a1", "W2", "B2"], ["b"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["b"], ["b1"]),
        helper.make_node("Conv", ["b1", "W3", "B3"], ["c"]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "W4", "B4"], ["y"], transB=1),
    ]
    model = make(nodes, {"x": [1, 3, 8, 8]}, {"y": [1, 5]},
                 {"W1": w(8, 3, 3, 3), "B1": w(8), "W2": w(8, 1, 3, 3), "B2": w(8),
                  "W3": w(16, 8, 1, 1), "B3": w(16), "W4": w(5, 16 * 4 * 4), "B4": w(5)})
    qdq = _quantize(model, work)
    tfl = work / "m.tflite"
    tfl.write_bytes(convert(onnx.load(str(qdq))).data)
    return qdq, tfl


def _quantize(model: onnx.ModelProto, work: Path) -> Path:
    """quantize_static as the build runs it (per-channel int8 weights), without the
    pre-processing: the hand-made graph has nothing to fold."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rows = iter(np.random.default_rng(1).standard_normal((8, 1, 3, 8, 8)).astype(np.float32))

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            row = next(rows, None)
            return None if row is None else {"x": row}

    src, out = work / "float.onnx", work / "qdq.onnx"
    onnx.save(model, str(src))
    quantize_static(str(src), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, weight_type=QuantType.QInt8,
                    activation_type=QuantType.QUInt8, extra_options={"WeightSymmetric": True})
    return out


def test_tflite_counts_equal_the_onnx_model_it_was_written_from(pair: tuple[Path, Path]) -> None:
    qdq, tfl = pair
    from_onnx = estimate(str(qdq), "rpi4").variants
    from_tflite = estimate(str(tfl), "rpi4").variants
    for precision in ("float32", "int8"):
        a, b = from_onnx[precision], from_tflite[precision]
        assert b.params == a.params == 8 * 27 + 8 + 8 * 9 + 8 + 16 * 8 + 16 + 5 * 256 + 5
        for kind in ("conv", "stem", "depthwise", "gemm"):  # element ops differ by design:
            assert b.macs_by_kind[kind] == a.macs_by_kind[kind]  # tflite fuses more
        assert b.macs_by_kind["stem"] == 8 * 64 * 27 and b.macs_by_kind["depthwise"] == 8 * 64 * 9
        assert b.macs_by_kind["gemm"] == 5 * 256
    # int8: 8-bit weights, activations and fewer bytes than the float variant
    assert from_tflite["int8"].weight_bytes < from_tflite["float32"].weight_bytes / 3
    assert from_tflite["int8"].latency_s[1] < from_tflite["float32"].latency_s[1]
    est = estimate(str(tfl), "rpi4")
    assert est.stored == "int8" and est.stored_params_by_dtype["int8"] > 0


def test_a_tflite_has_fixed_shapes(pair: tuple[Path, Path]) -> None:
    _, tfl = pair
    assert estimate(str(tfl), "rpi4", input_shapes={"x": (1, 8, 8, 3)}).variants
    with pytest.raises(UnsupportedModelError, match=r"fixed input shapes .*x=1x3x16x16"):
        estimate(str(tfl), "rpi4", input_shapes={"x": (1, 3, 16, 16)})


def test_a_broken_tflite_is_a_model_format_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelFormatError, match=r"expected the file identifier b'TFL3'"):
        estimate(str(bad), "rpi4")
    with pytest.raises(ModelFormatError, match="no such model file"):
        estimate(str(tmp_path / "missing.tflite"), "rpi4")
