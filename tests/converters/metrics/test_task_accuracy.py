"""Issue 14 on the models trained here: a packed YOLO-style detector keeps its detections in
both formats (its packed output split), a CTC recognizer keeps its character error rate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters import build
from edgekit.converters.metrics import ctc, detection

ROOT = Path(__file__).resolve().parents[3]
TRAINED = ROOT / "tools" / "fixtures" / "trained"
BACKENDS = {"tflite": "litert", "onnx": "onnxruntime"}


def run_float(path: Path, images: np.ndarray) -> np.ndarray:
    import onnx
    from edgekit.converters.context import Dataset
    from edgekit.converters.core.runner import run_dataset

    name = onnx.load(str(path)).graph.input[0].name
    return run_dataset(path, Dataset({name: images}))[0]


def run_artifact(path: Path, backend: str, images: np.ndarray) -> np.ndarray:
    import edgekit

    model = edgekit.load(path, backend=backend)
    try:
        return np.concatenate([np.asarray(model.predict(image[None])) for image in images])
    finally:
        model.close()


@pytest.fixture(scope="module")
def scenes_data(tmp_path_factory):
    from tools.fixtures import digit_scenes

    folder = tmp_path_factory.mktemp("detector")
    held = digit_scenes.scenes(100, "heldout", seed=1234)
    np.savez(folder / "calib.npz", x=digit_scenes.scenes(128, "train", seed=77).images)
    np.savez(folder / "val.npz", x=held.images)
    return folder, held


def test_packed_detector_keeps_95_percent_of_detections_in_both_formats(scenes_data):
    folder, held = scenes_data
    out = folder / "detector.edgekit"
    result = build(str(TRAINED / "detector.onnx"), target="rpi4", calib=str(folder / "calib.npz"),
                   val=str(folder / "val.npz"), output=out, formats=["tflite", "onnx"], quiet=True)
    m = result.manifest
    packed = m["quantization"]["packed_outputs"]
    assert [p["output"] for p in packed] == ["detections"] and packed[0]["split"]
    assert any(b["producer"] == "Sigmoid" for b in packed[0]["branches"])
    assert "packed output 'detections' split" in result.summary()
    assert m["validation"]["metric"]["name"] == "detection"
    assert m["validation"]["worst_slice"]["output"] == "detections"
    reference = run_float(TRAINED / "detector.onnx", held.images)
    assert detection.detection([reference], [reference]).details["float_detections"] > 50
    for fmt, backend in BACKENDS.items():
        kept = detection.detection([reference], [run_artifact(out, backend, held.images)])
        assert kept.score >= 0.95, (fmt, kept.summary())


def test_ctc_recognizer_cer_within_two_points_of_float(tmp_path):
    from tools.fixtures import digit_scenes

    held = digit_scenes.lines(150, "heldout", seed=4321)
    truths = [[d + 1 for d in t] for t in held.texts]  # symbol d + 1, blank 0 (tools/fixtures/train_ctc.py)
    np.savez(tmp_path / "calib.npz", x=digit_scenes.lines(128, "train", seed=77).images)
    np.savez(tmp_path / "val.npz", x=held.images)
    out = tmp_path / "ctc.edgekit"
    result = build(str(TRAINED / "ctc.onnx"), target="rpi4", calib=str(tmp_path / "calib.npz"),
                   val=str(tmp_path / "val.npz"), output=out, formats=["tflite", "onnx"], quiet=True)
    assert result.manifest["validation"]["metric"]["name"] == "ctc"
    float_cer = ctc.against_labels(run_float(TRAINED / "ctc.onnx", held.images), truths).cer
    assert float_cer < 0.05
    for fmt, backend in BACKENDS.items():
        int8_cer = ctc.against_labels(run_artifact(out, backend, held.images), truths).cer
        assert int8_cer - float_cer <= 0.02, (fmt, float_cer, int8_cer)
