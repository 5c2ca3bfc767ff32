"""The estimator costs a 16x8 layer (int16 activations, the guard's int16 rung) as LiteRT runs
it: the reference kernel, one thread. Costed as int8, YOLOv8n's backbone at int16 was estimated
at 46 ms on a Pi 4 and shipped; LiteRT on this host ran that .tflite 30x slower than its int8."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from edgekit.converters.estimate import estimate
from edgekit.converters.estimate.cost import REFERENCE_16X8
from edgekit.converters.estimate.graph import read_graph
from edgekit.converters.estimate.ops import build_ops
from onnx import TensorProto, helper
from onnx import numpy_helper as nh


def qdq_conv(zero_dtype: type, channels: int = 64, size: int = 28) -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv(DQ(int8 W)) -> Q -> DQ -> y with activations of ``zero_dtype``."""
    rng = np.random.default_rng(0)
    params = {"s": np.array(0.01, np.float32), "z": np.array(0, zero_dtype),
              "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8),
              "Wq": rng.integers(-127, 127, (channels, channels, 3, 3)).astype(np.int8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["Wq", "ws", "wz"], ["W"]),
             helper.make_node("Conv", ["xd", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [nh.from_array(v, n) for n, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def test_an_int16_conv_is_costed_as_the_reference_kernel_on_one_thread() -> None:
    int8, int16 = qdq_conv(np.uint8), qdq_conv(np.int16)
    ops8, ops16 = (build_ops(read_graph(m, "int8")) for m in (int8, int16))
    conv8, conv16 = (next(o for o in ops if o.op_type.startswith("Conv")) for ops in (ops8, ops16))
    assert conv8.int8 and not conv8.int16
    assert conv16.int8 and conv16.int16 and conv16.macs == conv8.macs
    fast, slow = (estimate(m, "rpi4", threads=[1, 4]).variants["int8"].latency_s for m in (int8, int16))
    # one thread: REFERENCE_16X8 times the int8 kernel's compute; four threads do not help it
    assert slow[1] == pytest.approx(REFERENCE_16X8 * fast[1], rel=0.1)
    assert slow[4] >= slow[1] * 0.99 and slow[4] > 50 * fast[4]


def qdq_gemm(zero_dtype: type, inputs: int, outputs: int = 256) -> onnx.ModelProto:
    """x -> Q -> DQ -> Gemm(DQ(int8 W), DQ(int32 B), transB) -> Q -> DQ -> y."""
    rng = np.random.default_rng(1)
    params = {"s": np.array(0.01, np.float32), "z": np.array(0, zero_dtype),
              "ws": np.full(outputs, 0.01, np.float32), "wz": np.zeros(outputs, np.int8),
              "Wq": rng.integers(-127, 127, (outputs, inputs)).astype(np.int8),
              "bs": np.full(outputs, 1e-4, np.float32), "bz": np.zeros(outputs, np.int32),
              "Bq": rng.integers(-1000, 1000, outputs).astype(np.int32)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["Wq", "ws", "wz"], ["W"], axis=0),
             helper.make_node("DequantizeLinear", ["Bq", "bs", "bz"], ["B"], axis=0),
             helper.make_node("Gemm", ["xd", "W", "B"], ["c"], transB=1),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, inputs])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, outputs])],
                              [nh.from_array(v, n) for n, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def test_a_16x8_fully_connected_with_an_int32_bias_costs_as_int8() -> None:
    """The writer gives a 16x8 FULLY_CONNECTED an int32 bias where its accumulator cannot overflow
    (LiteRT's optimized kernel): costed as int8. 512 inputs x |w| <= 127 x 32768 fits; 4096 do not:
    int64, the reference kernel (tflite/sixteen.bias_fits_int32 decides both)."""
    for inputs, int32 in ((512, True), (4096, False)):
        ops16 = build_ops(read_graph(qdq_gemm(np.int16, inputs), "int8"))
        fc = next(o for o in ops16 if o.op_type.startswith("Gemm"))
        assert fc.int16 and fc.int32_bias is int32
        fast, slow = (estimate(qdq_gemm(z, inputs), "rpi4", threads=[1]).variants["int8"].latency_s[1]
                      for z in (np.uint8, np.int16))
        assert (slow < 2 * fast) if int32 else (slow > 20 * fast), (inputs, fast, slow)
