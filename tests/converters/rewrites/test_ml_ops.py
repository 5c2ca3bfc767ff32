"""ai.onnx.ml ops lowered to standard ONNX (converters/graph/ml_ops.py): onnxruntime runs the
original and the lowered graph to the same labels and scores, and a scikit-learn-style
classifier then ships an int8 .tflite whose int64 labels are onnxruntime's."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from edgekit.converters.graph.ml_ops import lower_ml_ops
from onnx import TensorProto, helper, numpy_helper

REALZOO = Path(os.environ.get("EDGEKIT_REALZOO", "/work/realzoo"))
RNG = np.random.default_rng(0)
FEATURES, CLASSES = 6, 4


def _model(nodes: list, outputs: list, inits: list | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "ml", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, [None, FEATURES])], outputs, inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"X": x})


def _linear(labels: list[int], transform: str, norm: str | None) -> onnx.ModelProto:
    coef = RNG.normal(0, 1, (CLASSES, FEATURES)).astype(np.float32)
    nodes = [helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml",
                              coefficients=coef.reshape(-1).tolist(),
                              intercepts=RNG.normal(0, 1, CLASSES).tolist(),
                              classlabels_ints=labels, multi_class=1, post_transform=transform,
                              name="linear")]
    scores = "scores"
    if norm:
        nodes.append(helper.make_node("Normalizer", ["scores"], ["probabilities"], norm=norm,
                                      domain="ai.onnx.ml", name="normalizer"))
        scores = "probabilities"
    return _model(nodes, [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                          helper.make_tensor_value_info(scores, TensorProto.FLOAT,
                                                        [None, CLASSES])])


@pytest.mark.parametrize(("labels", "transform", "norm"), [
    ([0, 1, 2, 3], "SOFTMAX", "L1"), ([0, 1, 2, 3], "NONE", "L2"),
    ([3, 7, 8, 9], "LOGISTIC", "MAX"), ([5, 1, 0, 2], "SOFTMAX", None)])
def test_linear_classifier_and_normalizer_compute_what_onnxruntime_does(labels, transform, norm):
    source = _linear(labels, transform, norm)
    lowered = onnx.ModelProto()
    lowered.CopyFrom(source)
    notes = lower_ml_ops(lowered)
    assert any("LinearClassifier" in n for n in notes)
    onnx.checker.check_model(lowered, full_check=True)
    assert all(n.domain in ("", "ai.onnx") for n in lowered.graph.node)
    x = RNG.normal(0, 2, (64, FEATURES)).astype(np.float32)
    want, got = _run(source, x), _run(lowered, x)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].dtype == np.int64
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)


def _mlp_head() -> onnx.ModelProto:
    """skl2onnx's MLPClassifier tail: Softmax -> ArgMax -> ArrayFeatureExtractor(classes)
    -> Reshape -> Cast -> Cast, plus a Scaler in front."""
    weight = numpy_helper.from_array(RNG.normal(0, 1, (FEATURES, CLASSES)).astype(np.float32), "w")
    classes = numpy_helper.from_array(np.arange(CLASSES, dtype=np.int64), "classes")
    shape = numpy_helper.from_array(np.asarray([-1], np.int64), "shape")
    nodes = [helper.make_node("Cast", ["X"], ["xf"], to=1, name="cast_in"),
             helper.make_node("Scaler", ["xf"], ["scaled"], offset=[0.5], scale=[2.0],
                              domain="ai.onnx.ml", name="scaler"),
             helper.make_node("MatMul", ["scaled", "w"], ["logits"], name="matmul"),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
             helper.make_node("ArgMax", ["probs"], ["best"], axis=1, name="argmax"),
             helper.make_node("ArrayFeatureExtractor", ["classes", "best"], ["picked"],
                              domain="ai.onnx.ml", name="afe"),
             helper.make_node("Reshape", ["picked", "shape"], ["flat"], name="reshape"),
             helper.make_node("Cast", ["flat"], ["label"], to=7, name="cast_label"),
             helper.make_node("Cast", ["label"], ["output_label"], to=7, name="cast_out")]
    outputs = [helper.make_tensor_value_info("output_label", TensorProto.INT64, [None]),
               helper.make_tensor_value_info("probs", TensorProto.FLOAT, [None, CLASSES])]
    return _model(nodes, outputs, [weight, classes, shape])


def test_a_label_chain_becomes_one_argmax_over_the_logits():
    source = _mlp_head()
    lowered = onnx.ModelProto()
    lowered.CopyFrom(source)
    lower_ml_ops(lowered)
    onnx.checker.check_model(lowered, full_check=True)
    ops = [n.op_type for n in lowered.graph.node]
    assert ops.count("ArgMax") == 1 and "Cast" not in ops and "Reshape" not in ops
    argmax = next(n for n in lowered.graph.node if n.op_type == "ArgMax")
    assert argmax.input[0] == "logits" and argmax.output[0] == "output_label"
    x = RNG.normal(0, 1, (64, FEATURES)).astype(np.float32)
    want, got = _run(source, x), _run(lowered, x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_a_classifier_ships_an_int8_tflite_whose_labels_are_onnxruntimes(tmp_path: Path):
    import zipfile

    from edgekit.converters import build

    import edgekit
    from tools.realzoo.tflite_ops import float_compute_ops

    source, head = tmp_path / "head.onnx", _mlp_head()
    onnx.save(head, str(source))
    x = RNG.normal(0, 1, (96, FEATURES)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", X=x[:64])
    out = tmp_path / "head.edgekit"
    build(str(source), target="rpi4", calib=str(tmp_path / "calib.npz"), output=out,
          quiet=True, guard_time=0.0, accept_accuracy_drop=True)
    with zipfile.ZipFile(out) as z:
        import json

        manifest = json.loads(z.read("manifest.json"))
        member = next(m["path"] for m in manifest["models"] if m["format"] == "tflite")
        float_ops, _ = float_compute_ops(z.read(member))
    assert not float_ops
    assert manifest["outputs"][0] == {**manifest["outputs"][0], "dtype": "int64"}
    model = edgekit.load(out)
    labels = np.concatenate([model.predict({"X": x[i:i + 1]})["output_label"]
                             for i in range(64, 96)])
    assert labels.dtype == np.int64
    want = _run(head, x[64:])[0]
    assert (labels == want).mean() >= 0.9  # int8 logits: a near tie may flip


@pytest.mark.parametrize("name", ["sklearn_mlp_digits", "sklearn_logreg_mnist"])
def test_skl2onnx_models_lower_to_the_same_labels(name: str):
    from edgekit.converters.graph.map_outputs import unzip_map_outputs
    from edgekit.converters.graph.opset import merge_opset_imports

    path = REALZOO / name / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"the real-model suite is not materialized at {path.parent}")
    model = onnx.load(str(path))
    merge_opset_imports(model)
    unzip_map_outputs(model)
    assert lower_ml_ops(model)
    onnx.checker.check_model(model, full_check=True)
    assert all(n.domain in ("", "ai.onnx") for n in model.graph.node)
    x = np.load(REALZOO / name / "val.npz")["X"]
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"X": x})
    np.testing.assert_array_equal(_run(model, x)[0], want[0])


def test_a_label_chain_over_per_step_scores_is_left_alone():
    """ArgMax over the classes of [N, T, C] scores, flattened to [N*T]: not a [N] label."""
    shape = numpy_helper.from_array(np.asarray([-1], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["X", "shape3"], ["steps"], name="steps"),
             helper.make_node("ArgMax", ["steps"], ["best"], axis=-1, name="argmax"),
             helper.make_node("Reshape", ["best", "shape"], ["flat"], name="flat"),
             helper.make_node("Cast", ["flat"], ["label"], to=7, name="cast"),
             helper.make_node("Scaler", ["X"], ["scaled"], offset=[0.0], scale=[1.0],
                              domain="ai.onnx.ml", name="scaler")]
    shape3 = numpy_helper.from_array(np.asarray([-1, 3, 2], np.int64), "shape3")
    model = _model(nodes, [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                           helper.make_tensor_value_info("scaled", TensorProto.FLOAT,
                                                         [None, FEATURES])], [shape, shape3])
    lowered = onnx.ModelProto()
    lowered.CopyFrom(model)
    notes = lower_ml_ops(lowered)
    assert notes and not any("label" in n for n in notes)
    x = RNG.normal(0, 1, (8, FEATURES)).astype(np.float32)
    np.testing.assert_array_equal(_run(lowered, x)[0], _run(model, x)[0])
