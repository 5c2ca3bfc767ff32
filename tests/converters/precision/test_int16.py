"""int16 activations with int8 weights (a16w8): the QDQ rewrite runs on onnxruntime, wins back
the accuracy int8 loses on a crushed activation, and the .tflite writer turns it into LiteRT's
16x8 kernels with the same outputs (real onnxruntime and LiteRT on the digits CNN)."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
from edgekit.converters.ptq.precision import apply, layer_precisions
from edgekit.converters.tflite import convert
from edgekit.converters.tflite.schema import TType
from onnx import TensorProto

from ..tflite.helpers import litert, ops_of, read_tflite, run_onnx

CONVS = {"node_conv2d", "node_conv2d_1"}


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got.astype(np.float64)) ** 2)))


def _rewritten(outlier_qdq, name: str, nodes: set[str]):
    path = outlier_qdq["folder"] / name
    shutil.copy(outlier_qdq["int8"], path)
    return path, apply(path, nodes, set())


def test_int16_rewrite_is_symmetric_int16_and_wins_back_accuracy(outlier_qdq):
    path, done = _rewritten(outlier_qdq, "a16.onnx", CONVS)
    assert done["int16"] == sorted(CONVS)
    model = onnx.load(str(path))
    assert next(o.version for o in model.opset_import if o.domain == "") >= 21
    inits = {i.name: i for i in model.graph.initializer}
    relu_q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "relu")
    assert inits[relu_q.input[2]].data_type == TensorProto.INT16
    assert not onnx.numpy_helper.to_array(inits[relu_q.input[2]]).any()  # zero point 0: LiteRT's 16x8 spec
    layers = {entry["name"]: entry["precision"] for entry in layer_precisions(model)}
    assert layers["node_conv2d"] == layers["node_conv2d_1"] == "int16"
    assert layers["node_conv2d_2"] == layers["node_linear"] == "int8"
    feeds = {"image": outlier_qdq["x"]}
    ref = run_onnx(outlier_qdq["float"], feeds)[0]
    int8 = _sqnr(ref, run_onnx(outlier_qdq["int8"], feeds)[0])
    a16 = _sqnr(ref, run_onnx(path, feeds)[0])
    # the crushed activation gets ~256x finer steps: the output error falls by far more than 6 dB
    assert a16 > int8 + 6, (int8, a16)
    graph_out = model.graph.output[0].name
    producer = next(n for n in model.graph.node if graph_out in n.output)
    assert inits[producer.input[2]].data_type == TensorProto.UINT8  # the output keeps its int8 grid


def _parity(path, feeds):
    model = convert(onnx.load(str(path)))
    want = run_onnx(path, feeds)[0]
    got = litert(model).run(feeds)[0]
    step = model.outputs[0]["quantization"]["scale"]
    return model, np.abs(want.astype(np.float64) - got) / step


def test_tflite_writes_16x8_kernels_matching_onnxruntime(outlier_qdq, monkeypatch):
    from edgekit.converters.ptq import precision

    monkeypatch.setattr(precision, "INT16_INPUTS", True)
    path, _ = _rewritten(outlier_qdq, "a16-tflite.onnx", CONVS)
    model, steps = _parity(path, {"image": outlier_qdq["x"][:32]})
    assert not model.float_ops
    # onnxruntime computes int16 layers in float between Q/DQ, LiteRT in integers: the int8
    # output may round the other way, never further than one step
    assert steps.max() <= 1.0 + 1e-3 and (steps < 0.5).mean() > 0.9
    tree = read_tflite(model.data)
    tensors = tree.subgraphs[0].tensors
    convs = [op for name, op in ops_of(model.data) if name == "CONV_2D"]
    first, second = convs[0], convs[1]
    for conv in (first, second):
        assert tensors[conv.inputs[0]].type == TType.INT16
        assert tensors[conv.inputs[2]].type == TType.INT64  # 16x8 biases are int64
        assert tensors[conv.inputs[0]].quantization.zeroPoint[0] == 0
    assert tensors[convs[2].inputs[0]].type == TType.INT8  # the rest stays int8
    names = [name for name, _ in ops_of(model.data)]
    # the image only int16 layers read is an int16 input (the runtime quantizes to it): one
    # QUANTIZE, int16 -> int8 where the int8 layers start
    assert tensors[tree.subgraphs[0].inputs[0]].type == TType.INT16
    assert "DEQUANTIZE" not in names and names.count("QUANTIZE") == 1


def test_every_layer_int16_fully_connected_and_pool_match(outlier_qdq):
    every = {n.name for n in onnx.load(str(outlier_qdq["float"])).graph.node}
    path, done = _rewritten(outlier_qdq, "a16-all.onnx", every)
    assert {"node_linear", "node_linear_1", "node_max_pool2d"} <= set(done["int16"])
    model, steps = _parity(path, {"image": outlier_qdq["x"][:32]})
    assert not model.float_ops and steps.max() <= 1.0 + 1e-3
    tensors = read_tflite(model.data).subgraphs[0].tensors
    fcs = [op for name, op in ops_of(model.data) if name == "FULLY_CONNECTED"]
    # 16x8 FULLY_CONNECTED biases: int32 where the accumulator cannot overflow (LiteRT's optimized
    # kernel, tflite/sixteen.bias_fits_int32), else int64
    assert all(tensors[fc.inputs[0]].type == TType.INT16 for fc in fcs)
    assert {tensors[fc.inputs[2]].type for fc in fcs} == {TType.INT32}


def residual_net(path):
    """conv1 -> relu -> conv2 -> add(skip) -> relu: an int8 layer feeding int16 ones, and ADD."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((4, 4, 3, 3)) / 3).astype(np.float32), f"w{i}")
               for i in (1, 2)]
    nodes = [helper.make_node("Conv", ["image", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["out"], name="relu2")]
    graph = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_int8_layer_feeding_int16_add_matches(tmp_path):
    from .conftest import quantize

    x = np.random.default_rng(1).standard_normal((32, 4, 8, 8)).astype(np.float32)
    path = quantize(residual_net(tmp_path / "residual.onnx"), tmp_path / "int8.onnx", x)
    done = apply(path, {"conv2", "add", "relu2"}, set())
    assert done["int16"] == ["add", "conv2"]  # onnxruntime folded relu2 into the uint8 grid
    model, steps = _parity(path, {"image": x})
    assert not model.float_ops and steps.max() <= 1.0 + 1e-3
    names = [name for name, _ in ops_of(model.data)]
    # conv1 stays int8 in and out; its output is requantized once for the int16 conv2 and ADD
    assert names == ["CONV_2D", "QUANTIZE", "CONV_2D", "ADD", "QUANTIZE"]
    tensors = read_tflite(model.data).subgraphs[0].tensors
    add = next(op for name, op in ops_of(model.data) if name == "ADD")
    assert all(tensors[i].type == TType.INT16 for i in (*add.inputs, *add.outputs))
