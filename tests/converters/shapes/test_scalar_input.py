"""A rank-0 model input (a sample rate, as Silero-style VADs take) fed from calibration data:
it has no sample axis, so the build names the --const that freezes it (it used to crash with
an IndexError in the data stage)."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import build
from onnx import TensorProto, helper, save

from edgekit.errors import CalibrationError


def test_a_scalar_input_in_the_calibration_data_names_the_const_to_pass(tmp_path):
    nodes = [helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "srf"], ["out"])]
    graph = helper.make_graph(
        nodes, "scalar_sr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
                             helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
         str(tmp_path / "m.onnx"))
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "calib.npz", x=rng.standard_normal((16, 4)).astype(np.float32),
             sr=np.full(16, 16000, np.int64))
    with pytest.raises(CalibrationError, match=r"'sr' is a scalar .* --const sr=16000"):
        build(str(tmp_path / "m.onnx"), target="rpi4", calib=str(tmp_path / "calib.npz"),
              output=tmp_path / "m.edgekit", quiet=True)
