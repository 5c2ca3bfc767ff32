"""A layer the accuracy guard kept float stays float in the onnxruntime backend.

onnxruntime's WeightBiasQuantization transformer (on at every optimization level unless
disabled) re-quantizes a float Conv weight sitting between QDQ'd activations to int8 per
tensor; the zoo's squeezenet lost 7 dB against float on the board that way while validation
had run those layers float (tools/studies/diagnose_cross_isa.py).

The backend runs an int8 model unfused (BASIC) on an x86 CPU whose fused U8S8 kernels saturate
(no VNNI) unless asked for speed, fused (ALL) on every other CPU (``edgekit.device.cpu``). Both kinds
of session are run here on any machine: the detector's answer is set for the test, the sessions
are onnxruntime's own. The control does not lean on saturation either: the re-quantized weight
alone moves the output by many steps on a CPU with VNNI as on one without.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.backends.base import BackendOptions, TensorSpec
from edgekit.backends.onnxruntime import OnnxRuntimeBackend

SCALE_IN, SCALE_OUT = 0.02, 0.05


def float_conv_between_qdq() -> bytes:
    """Q -> DQ -> Conv(float weight) -> Q -> DQ: the shape of a layer kept float. One weight is
    ~670x the rest, so onnxruntime's per-tensor int8 (step 100 / 255) rounds every other weight
    to zero; ``inputs`` makes those weights carry outputs of many steps."""
    weight = np.full((4, 4, 1, 1), 0.15, np.float32)
    weight[0, 0] = 100.0
    inits = [numpy_helper.from_array(weight, "w"),
             numpy_helper.from_array(np.array(SCALE_IN, np.float32), "s_in"),
             numpy_helper.from_array(np.array(128, np.uint8), "z_in"),
             numpy_helper.from_array(np.array(SCALE_OUT, np.float32), "s_out"),
             numpy_helper.from_array(np.array(128, np.uint8), "z_out")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s_in", "z_in"], ["xd"]),
             helper.make_node("Conv", ["xd", "w"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "s_out", "z_out"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s_out", "z_out"], ["y"])]
    graph = helper.make_graph(
        nodes, "float_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model.SerializeToString()


def inputs() -> np.ndarray:
    """Most of the input grid; zero on the channel the large weight reads, so that no output
    saturates: outputs reach 7 steps, all from the weights a re-quantization zeroes."""
    x = np.random.default_rng(0).uniform(-2.0, 2.0, (1, 4, 4, 4)).astype(np.float32)
    x[:, 0] = 0.0
    return x


@pytest.mark.parametrize("saturates", [True, False], ids=["x86-without-vnni", "vnni-or-arm"])
@pytest.mark.parametrize("exact_int8", [True, False])
def test_float_weight_layer_is_not_requantized(exact_int8: bool, saturates: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    model = float_conv_between_qdq()
    x = inputs()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    reference = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    default = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    # the control: onnxruntime's default session does re-quantize the weight
    assert np.abs(default - reference).max() > 4 * SCALE_OUT

    monkeypatch.setattr("edgekit.device.cpu.u8s8_saturates", lambda: saturates)
    backend = OnnxRuntimeBackend(
        model, [TensorSpec("x", (1, 4, 4, 4))], [TensorSpec("y", (1, 4, 4, 4))],
        BackendOptions(threads=1, extra={"exact_int8": exact_int8}))
    # unfused only where fused kernels saturate and exactness is asked for; fused elsewhere
    assert backend.unfused == (saturates and exact_int8)
    got = np.asarray(backend.run({"x": x})[0])
    assert np.abs(got - reference).max() <= SCALE_OUT * 1.001  # rounding, one step at most
    assert onnx.load_from_string(model).graph.node[2].op_type == "Conv"  # source untouched
