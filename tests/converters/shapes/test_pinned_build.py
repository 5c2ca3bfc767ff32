"""Symbolic dims pinned by the build: a detector exported with dynamic H/W and a
Shape/Range/Expand head ships an int8 .tflite with the grid folded to a constant."""

from __future__ import annotations

import os

import numpy as np
import pytest
from edgekit.converters import build
from edgekit.converters.estimate import estimate

import edgekit
from edgekit.errors import CalibrationError, InputError, UserError
from edgekit.ops.verify import verify_artifact

from .nets import export_detector, export_static_detector, images


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    folder = tmp_path_factory.mktemp("det")
    return export_detector(folder / "det.onnx"), images(folder / "img.npz", 12, 32, 48)


@pytest.fixture(scope="module")
def built(detector, tmp_path_factory):
    model, calib = detector
    out = tmp_path_factory.mktemp("out") / "det.edgekit"
    return build(str(model), target="rpi4", calib=str(calib), output=out, quiet=True)


def test_dims_are_pinned_from_the_data_and_the_shape_head_folds_away(built):
    manifest = built.manifest
    assert manifest["inputs"][0]["shape"] == [1, 3, 32, 48]
    tflite = next(m for m in manifest["models"] if m["format"] == "tflite")
    assert tflite["float_ops"] == []  # Shape/Range/Expand/Where became one constant
    assert set(tflite["ops"]) <= {"CONV_2D", "PAD", "ADD"}
    pin = next(s for s in manifest["stages"] if s["name"] == "pin")
    assert pin["params"]["pinned"] == {"images": [1, 3, 32, 48]}
    assert pin["params"]["from"] == "calibration data"
    assert verify_artifact(built.path).passed


def test_predict_with_another_shape_names_the_pinned_one(built):
    model = edgekit.load(str(built.path))
    try:
        assert model.predict(np.zeros((1, 3, 32, 48), np.float32)).shape == (1, 4, 16, 24)
        with pytest.raises(InputError, match=r"expected shape \[1, 3, 32, 48\].*got \[1, 3, 40, 48\]"):
            model.predict(np.zeros((1, 3, 40, 48), np.float32))
    finally:
        model.close()


def test_calibration_and_validation_data_of_two_sizes_is_named(detector, tmp_path):
    model, calib = detector
    val = images(tmp_path / "val.npz", 4, 32, 64)
    with pytest.raises(CalibrationError, match=r"disagrees.*img\.npz gives \[1, 3, 32, 48\].*"
                                               r"val\.npz gives \[1, 3, 32, 64\]"):
        build(str(model), target="rpi4", calib=str(calib), val=str(val),
              output=tmp_path / "o.edgekit", quiet=True)
    assert not list(tmp_path.glob("*.edgekit"))


def test_input_shape_names_an_onnx_input(detector, tmp_path):
    model, _ = detector
    calib = images(tmp_path / "small.npz", 8, 24, 24)
    result = build(str(model), target="rpi4", calib=str(calib), output=tmp_path / "o.edgekit",
                   input_shape={"images": (1, 3, 24, 24)}, formats=["onnx"], quiet=True)
    assert result.manifest["inputs"][0]["shape"] == [1, 3, 24, 24]
    with pytest.raises(UserError, match=r"--input-shape names 'image'; the model's inputs are "
                                        r"\['images'\]"):
        build(str(model), target="rpi4", calib=str(calib), output=tmp_path / "p.edgekit",
              input_shape={"image": (1, 3, 24, 24)}, quiet=True)
    with pytest.raises(CalibrationError, match=r"small\.npz: array for input 'images' has shape "
                                               r"\[8, 3, 24, 24\]; expected \[N, 3, 32, 32\] "
                                               r"for the model input \[1, 3, 32, 32\] "
                                               r"\(axis 2: expected 32, got 24\)"):
        build(str(model), target="rpi4", calib=str(calib), output=tmp_path / "p.edgekit",
              input_shape={"images": (1, 3, 32, 32)}, quiet=True)


def test_a_build_from_a_read_only_directory_writes_nothing_there(detector, tmp_path,
                                                                 monkeypatch):
    # root ignores the mode bits, so the check is that the folder stays empty: onnxruntime's
    # tools (symbolic shape inference) write next to the working directory unless told
    model, calib = detector
    here = tmp_path / "readonly"
    here.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(here)
    os.chmod(here, 0o555)
    try:
        build(str(model), target="rpi4", calib=str(calib), output=out / "d.edgekit", quiet=True)
        assert list(here.iterdir()) == []
    finally:
        os.chmod(here, 0o755)


def test_estimate_on_symbolic_dims_matches_the_model_exported_at_that_size(detector, tmp_path):
    model, _ = detector
    twin = export_static_detector(tmp_path / "static.onnx", 32, 48)
    pinned = estimate(str(model), "rpi4", input_shapes={"images": (1, 3, 32, 48)})
    static = estimate(str(twin), "rpi4")
    for precision in ("float32", "int8"):
        assert pinned.variants[precision].macs == static.variants[precision].macs > 100_000
    assert not pinned.warnings
    open_dims = estimate(str(model), "rpi4")
    assert any("symbolic dim(s) ['height', 'width']" in w for w in open_dims.warnings)


def test_an_image_folder_for_dynamic_hw_takes_its_size_from_size():
    from edgekit.converters.inputs.datasets import image_spec

    inputs = [{"name": "images", "shape": ["batch", 3, "height", "width"]}]
    with pytest.raises(CalibrationError, match=r"leaves its height and width symbolic: pass "
                                               r"--size HxW"):
        image_spec(inputs, {})
    assert image_spec(inputs, {"size": [32, 40]})["size"] == [32, 40]


def test_a_symbolic_batch_keeps_the_onnx_open_and_ships_a_batch_1_tflite(detector, tmp_path):
    model, calib = detector
    result = build(str(model), target="rpi4", calib=str(calib), dynamic_batch=True,
                   output=tmp_path / "dyn.edgekit", quiet=True)
    assert result.manifest["inputs"][0]["shape"] == ["batch", 3, 32, 48]
    tflite = next(m for m in result.manifest["models"] if m["format"] == "tflite")
    assert tflite["inputs"][0]["shape"] == [1, 32, 48, 3]
    assert result.manifest["validation"]["tflite"]["boxes"]["within_1_step"] > 0.99
    assert verify_artifact(result.path).passed
