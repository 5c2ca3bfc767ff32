"""The narrow_outputs stage in a real build: with the user's decode (``--postprocess``) a score
head's far-negative logits are clipped and the manifest says so; box offsets spread both ways
are left whole; without a decode nothing is narrowed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

DECODE = '''
import numpy as np

def decode(outputs):
    scores, boxes = outputs
    found = []
    for s, b in zip(scores, boxes):
        keep = 1 / (1 + np.exp(-np.clip(s, -80, 80))) > 0.5
        cells = np.flatnonzero(keep).astype(np.float64)  # an anchor per cell: fixed boxes
        boxes_of = np.stack([cells * 10, 0 * cells, cells * 10 + 8, 0 * cells + 8], axis=1)
        found.append((boxes_of, s[keep], np.zeros(len(cells), np.int64)))
    return found
'''


def _head(path: Path) -> Path:
    """x [N, 4, 2, 2] in [0, 1] -> scores = 3 - 300 x0 (logits in [-297, 3]: rare positives);
    boxes = a 1x1 conv spread both ways (the decode reads no box value)."""
    inits = [numpy_helper.from_array(np.array([-300, 0, 0, 0], np.float32).reshape(1, 4, 1, 1), "ws"),
             numpy_helper.from_array(np.array([3.0], np.float32), "bs"),
             numpy_helper.from_array(np.array([[100, -100, 50, -50], [-80, 80, 0, 40]], np.float32).reshape(2, 4, 1, 1), "wb"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "ws", "bs"], ["s"], name="score_conv"),
             helper.make_node("Reshape", ["s", "flat"], ["scores"], name="score_flat"),
             helper.make_node("Conv", ["x", "wb"], ["b"], name="box_conv"),
             helper.make_node("Reshape", ["b", "flat"], ["boxes"], name="box_flat")]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 4]),
                               helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _calib() -> np.ndarray:
    x = np.random.default_rng(1).uniform(0, 1, (64, 4, 2, 2)).astype(np.float32)
    x[::4, 0, 0, 0] = 0.002  # a face now and then: logit 2.4
    return x


@pytest.mark.parametrize("with_decode", [True, False])
def test_a_score_head_is_narrowed_only_with_the_users_decode(tmp_path, with_decode):
    from edgekit.converters import build

    decode = tmp_path / "decode.py"
    decode.write_text(DECODE)
    lines: list[str] = []
    options = {"metric": "detection", "postprocess": f"{decode}:decode"} if with_decode else {}
    result = build(str(_head(tmp_path / "head.onnx")), target="host", calib={"x": _calib()},
                   output=tmp_path / "head.edgekit", report=lines.append, **options)
    narrowed = result.manifest["quantization"].get("narrowed_outputs")
    if not with_decode:
        assert narrowed is None and not any("clipped to" in line for line in lines)
        return
    assert narrowed == {"scores": [-8.0, None]}  # boxes spread both ways: left whole
    assert any("output 'scores' clipped to [-8, inf]" in line for line in lines)
