"""Packed outputs: boxes beside probabilities are detected, an unpacked tensor is not,
and the Concat feeding a packed output is found in the graph."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from edgekit.converters.metrics import packed
from onnx import TensorProto, helper

from ...conftest import ROOT

TRAINED = ROOT / "tools" / "fixtures" / "trained"


def yolo_like(samples: int = 16, anchors: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    boxes = rng.uniform(0, 320, (samples, 4, anchors))
    scores = rng.uniform(0, 1, (samples, 10, anchors))
    return np.concatenate([boxes, scores], 1).astype(np.float32)


def test_boxes_beside_probabilities_are_packed() -> None:
    report = packed.find_packed(yolo_like(), "output0")
    assert report.packed
    assert report.separate == ((0, 4), (4, 14))
    assert report.step > 1.2  # 0..320 over 255 steps: 1.25
    scores = report.slices[1]
    assert scores.starved and scores.levels < 1
    assert "channels 4..13" in report.reason


def test_unpacked_outputs_are_not() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, (32, 40, 11)).astype(np.float32)  # CTC-like, one range
    assert not packed.find_packed(logits).packed
    boxes_only = yolo_like()[:, :4]
    boxes_only = np.concatenate([boxes_only, boxes_only], 1)  # 8 rows of one range: [N, 8, 64]
    assert not packed.find_packed(boxes_only).packed
    # two ranges, but the small one keeps plenty of steps (1..8 beside 0..40): not packed
    mild = np.concatenate([rng.uniform(0, 40, (8, 4, 64)), rng.uniform(0, 8, (8, 4, 64))], 1)
    assert not packed.find_packed(mild).packed


def concat_graph() -> onnx.ModelProto:
    """x [1, 14, 64] -> boxes x*320 (4 rows) and Sigmoid(scores) (10 rows) -> Concat -> Identity."""
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["raw_boxes", "raw_scores"], axis=1, name="split"),
        helper.make_node("Mul", ["raw_boxes", "scale"], ["boxes"], name="scale_boxes"),
        helper.make_node("Sigmoid", ["raw_scores"], ["scores"], name="sigmoid"),
        helper.make_node("Concat", ["boxes", "scores"], ["packed"], axis=1, name="pack"),
        helper.make_node("Identity", ["packed"], ["output0"], name="out"),
    ]
    graph = helper.make_graph(
        nodes, "yolo_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 14, 64])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 14, 64])],
        [helper.make_tensor("sizes", TensorProto.INT64, [2], [4, 10]),
         helper.make_tensor("scale", TensorProto.FLOAT, [], [320.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def test_the_concat_feeding_a_packed_output_is_found() -> None:
    model = concat_graph()
    split = packed.concat_branches(model, "output0")
    assert split is not None and split.concat_node == "pack" and split.axis == 1
    assert [(b.input_name, b.producer, b.start, b.stop) for b in split.branches] == [
        ("boxes", "Mul", 0, 4), ("scores", "Sigmoid", 4, 14)]
    assert packed.concat_branches(model, "nonexistent") is None


def test_plan_splits_on_real_outputs_of_the_graph() -> None:
    model = concat_graph()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    outputs = np.concatenate([sess.run(None, {"x": rng.uniform(-3, 3, (1, 14, 64)).astype(np.float32)})[0]
                              for _ in range(8)])
    (plan,) = packed.plan_splits([outputs], ["output0"], model)
    assert plan.report.packed and plan.concat is not None
    assert [b.producer for b in plan.concat.branches] == ["Mul", "Sigmoid"]
    assert packed.plan_splits([outputs[:, 4:]], ["scores_only"]) == ()


def run_trained(name: str, images: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(TRAINED / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    feed = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {feed: image[None]})[0] for image in images])


def test_trained_detector_output_is_packed_and_recognizer_output_is_not() -> None:
    """The models of tools/fixtures/train_detector.py and tools/fixtures/train_ctc.py on real digit scenes/lines."""
    from tools.fixtures import digit_scenes

    scenes = digit_scenes.scenes(16, "train", seed=5)
    boxes_and_scores = run_trained("detector", scenes.images)
    plans = packed.plan_splits([boxes_and_scores], ["detections"], onnx.load(TRAINED / "detector.onnx"))
    assert len(plans) == 1 and plans[0].concat is not None
    assert plans[0].concat.branches[-1].producer == "Sigmoid"
    assert plans[0].concat.branches[-1].stop == 14  # 4 box rows + 10 class probabilities
    lines = digit_scenes.lines(16, "train", seed=5)
    assert not packed.find_packed(run_trained("ctc", lines.images)).packed
