"""A Split that undoes a Concat (YOLOv8's head) written so the parts never share a Concat."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tools.studies.split_concat import unshare_split_concats

LEVELS = ((4, 4), (2, 2))  # two feature maps, as a detector's strides


def _head(box: int = 6, cls: int = 3, sizes: tuple[int, int] = (6, 3)) -> onnx.ModelProto:
    """Per level Concat(box_k, cls_k) on channels -> Reshape [1, C, HW] -> Concat levels on
    anchors -> Split channels into boxes and classes -> Sigmoid on the classes."""
    nodes, inputs, inits, flat = [], [], [], []
    for k, (h, w) in enumerate(LEVELS):
        for part, channels in (("box", box), ("cls", cls)):
            inputs.append(helper.make_tensor_value_info(f"{part}{k}", TensorProto.FLOAT, [1, channels, h, w]))
        nodes.append(helper.make_node("Concat", [f"box{k}", f"cls{k}"], [f"cat{k}"], axis=1, name=f"cat{k}"))
        inits.append(numpy_helper.from_array(np.array([1, box + cls, -1], np.int64), f"shape{k}"))
        nodes.append(helper.make_node("Reshape", [f"cat{k}", f"shape{k}"], [f"flat{k}"], name=f"flat{k}"))
        flat.append(f"flat{k}")
    nodes.append(helper.make_node("Concat", flat, ["levels"], axis=2, name="levels"))
    inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    nodes.append(helper.make_node("Split", ["levels", "sizes"], ["boxes", "logits"], axis=1, name="split"))
    nodes.append(helper.make_node("Sigmoid", ["logits"], ["scores"], name="sigmoid"))
    anchors = sum(h * w for h, w in LEVELS)
    graph = helper.make_graph(nodes, "head", inputs, [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, box, anchors]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, cls, anchors])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {i.name: rng.normal(size=[d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def test_the_split_of_the_joined_levels_becomes_one_concat_per_part() -> None:
    model = _head()
    feeds = _feeds(model)
    before = _run(model, feeds)
    assert unshare_split_concats(model) == 1
    onnx.checker.check_model(model, full_check=True)
    assert not [n for n in model.graph.node if n.op_type == "Split"]
    producer = {o: n for n in model.graph.node for o in n.output}
    # the class scores are built from the class pieces alone: no int8 Concat ever sees a box value
    seen, todo = set(), ["scores"]
    while todo:
        node = producer.get(todo.pop())
        if node is not None:
            seen.update(node.input)
            todo.extend(node.input)
    assert {"cls0", "cls1"} <= seen and not {"box0", "box1"} & seen
    for want, got in zip(before, _run(model, feeds), strict=True):
        np.testing.assert_array_equal(want, got)  # the same numbers in the same order


def test_a_split_that_cuts_across_the_pieces_is_left_alone() -> None:
    model = _head(sizes=(4, 5))  # 4 + 5 channels: not the pieces 6 + 3
    assert unshare_split_concats(model) == 0
    assert [n.op_type for n in model.graph.node].count("Split") == 1
