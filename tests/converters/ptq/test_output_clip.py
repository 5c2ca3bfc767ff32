"""A raw output narrowed where the user's decode cannot see past the bound (ptq/output_clip.py):
BlazeFace's score logits span [-465, 3.5] and the int8 step of 1.84 logits dropped every face
float scored 0.5-0.71 (docs/measurements/blazeface-int8.md)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from edgekit.converters.ptq.output_clip import free_bounds, insert_clips, output_layers
from onnx import TensorProto, helper, numpy_helper


def _head(opset: int = 13) -> onnx.ModelProto:
    """x [N, 4, 2, 2] -> score Conv -> Reshape -> 'scores'; box Conv -> Reshape -> Concat -> 'boxes'."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(0, 1, (1, 4, 1, 1)).astype(np.float32), "ws"),
             numpy_helper.from_array(rng.normal(0, 1, (2, 4, 1, 1)).astype(np.float32), "wb"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "ws"], ["s"], name="score_conv"),
             helper.make_node("Reshape", ["s", "flat"], ["scores"], name="score_flat"),
             helper.make_node("Conv", ["x", "wb"], ["b"], name="box_conv"),
             helper.make_node("Reshape", ["b", "flat"], ["bf"], name="box_flat"),
             helper.make_node("Concat", ["bf", "bf"], ["boxes"], axis=1, name="box_join")]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 2, 2])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 4]),
                               helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["n", 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def decode(outputs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Cells whose sigmoid score passes 0.5, with the box values at those cells."""
    scores, boxes = outputs
    found = []
    for s, b in zip(scores, boxes, strict=True):
        keep = 1 / (1 + np.exp(-np.clip(s, -80, 80))) > 0.5
        found.append((np.repeat(b[:4][keep][:, None], 4, axis=1), s[keep], np.zeros(int(keep.sum()), np.int64)))
    return found


def _logits() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    scores = rng.uniform(-400, 3, (16, 4)).astype(np.float32)  # rare positives, very sure negatives
    boxes = rng.uniform(-100, 200, (16, 8)).astype(np.float32)  # spread both ways
    return [scores, boxes]


def test_a_score_output_is_narrowed_and_box_offsets_are_not():
    outputs = _logits()
    assert free_bounds(outputs, 0, decode) == (-8.0, None)
    assert free_bounds(outputs, 1, decode) == (None, None)  # spread both ways: never clipped


def test_a_bound_that_changes_a_detection_is_not_free():
    scores, boxes = _logits()
    scores[:, 0] = 0.5  # a face at score 0.62: clipping at -8 keeps it, and a bound at 0.3 would not
    assert free_bounds([scores, boxes], 0, lambda outs: decode([np.clip(outs[0], None, 0.3), outs[1]]))[0] == -8.0

    def thresholds_at_minus_10(outs: list[np.ndarray]) -> list:  # a decode that reads logits down to -10
        return decode([outs[0] + 10.5, outs[1]])
    assert free_bounds([scores, boxes], 0, thresholds_at_minus_10)[0] == -12.0


@pytest.mark.parametrize("opset", [10, 13])
def test_the_clip_sits_after_the_layer_and_the_outputs_keep_their_names(opset):
    model = _head(opset)
    heads = output_layers(model)
    assert heads == {"scores": ["s"], "boxes": ["b"]}
    x = np.random.default_rng(2).normal(0, 40, (3, 4, 2, 2)).astype(np.float32)
    before = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert insert_clips(model, {"s": (-8.0, None)}) == 1
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["scores", "boxes"]
    after = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(after[0], np.maximum(before[0], -8.0))
    np.testing.assert_array_equal(after[1], before[1])
    assert before[0].min() < -8.0  # the clip had something to do


def test_a_graph_output_written_by_the_layer_itself_keeps_its_name():
    model = _head()
    model.graph.node[1].op_type = "Identity"  # scores = Identity(s): still a move
    del model.graph.node[1].input[1:]
    model.graph.node[1].output[0] = "scores"
    heads = output_layers(model)
    assert heads["scores"] == ["s"]
    conv = model.graph.node[0]
    conv.output[0] = "scores"  # the Conv writes the output directly
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n", 1, 2, 2]))
    del model.graph.node[1]
    assert output_layers(model)["scores"] == ["scores"]
    insert_clips(model, {"scores": (-8.0, None)})
    onnx.checker.check_model(model, full_check=True)
    clip = next(n for n in model.graph.node if n.op_type == "Clip")
    assert clip.output[0] == "scores" and conv.output[0] == "scores_edgekit_raw"
