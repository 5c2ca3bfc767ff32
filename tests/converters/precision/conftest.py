"""Shared: the re-parameterized digits CNN whose first activation int8 crushes, quantized once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.stages.quantize import ort_quantization_quiet

from ...conftest import DIGITS_NPZ
from ..sizing import outlier_digits


def quantize(prepared: Path, out: Path, x: np.ndarray, keep_float: list[str] | None = None,
             name: str = "image") -> Path:
    """Per-channel int8 QDQ with uint8 activations, as the build writes it."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    class Reader:
        def __init__(self) -> None:
            self.rows = iter(range(len(x)))

        def get_next(self):
            i = next(self.rows, None)
            return None if i is None else {name: x[i:i + 1]}

    with ort_quantization_quiet():  # the root logger's level stays as it was (tests/converters/stages checks)
        quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=keep_float or [], extra_options={"WeightSymmetric": True})
    return out


@pytest.fixture(scope="session")
def outlier_qdq(tmp_path_factory) -> dict:
    """Float (prepared) model, its int8 QDQ model, the calibration and held-out digits."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folder = tmp_path_factory.mktemp("precision")
    x = np.load(DIGITS_NPZ)["x"].astype(np.float32)
    prepared = folder / "prepared.onnx"
    # the model's shapes are static: symbolic shape inference (seconds of sympy) adds nothing
    quant_pre_process(str(outlier_digits(folder)), str(prepared), skip_symbolic_shape=True)
    return {"float": prepared, "int8": quantize(prepared, folder / "int8.onnx", x[:64]),
            "calib": x[:64], "x": x[64:192], "folder": folder}
