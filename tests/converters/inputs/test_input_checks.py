"""Newcomer mistakes that used to build wrong artifacts with exit 0 (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import build

from edgekit.errors import CalibrationError, ExportError
from tests.conftest import DIGITS_NPZ, DIGITS_ONNX
from tests.converters.torch_nets import forget, write_project

PACKAGE = "edgekit_input_check_nets"
FAST = {"target": "host", "formats": ["onnx"], "quiet": True}


def test_pixel_arrays_for_a_float_model_name_the_scaling(tmp_path, digits_data):
    x, y = digits_data
    pixels = tmp_path / "pixels.npz"
    np.savez(pixels, x=np.round(x * 255), y=y)  # 0..255 whole numbers: a model trained on 0..1
    with pytest.raises(CalibrationError) as err:
        build(str(DIGITS_ONNX), calib=str(pixels), output=tmp_path / "out.edgekit", **FAST)
    message = str(err.value)
    assert "0..255" in message and "--preprocess" in message and "divide the arrays by 255" in message
    assert not (tmp_path / "out.edgekit").exists()
    # declared: the model takes 0..255 on purpose (here it does not, so accept the drop)
    result = build(str(DIGITS_ONNX), calib=str(pixels), output=tmp_path / "out.edgekit",
                   preprocess={"scale": 1.0}, accept_accuracy_drop=True, guard_time=0, **FAST)
    assert result.path.exists()


def test_tiny_calibration_warns_with_the_count(tmp_path, digits_data):
    x, y = digits_data
    np.savez(tmp_path / "few.npz", x=x[:20], y=y[:20])
    np.savez(tmp_path / "val.npz", x=x[100:300], y=y[100:300])
    result = build(str(DIGITS_ONNX), calib=str(tmp_path / "few.npz"), val=str(tmp_path / "val.npz"),
                   output=tmp_path / "out.edgekit", accept_accuracy_drop=True, **FAST)
    warning = next(w for w in result.warnings if "calibration sample" in w)
    assert "only 20 calibration sample(s)" in warning and "fewer than 32" in warning
    roomy = build(str(DIGITS_ONNX), calib=str(DIGITS_NPZ), output=tmp_path / "roomy.edgekit", **FAST)
    assert not any("calibration sample" in w for w in roomy.warnings)


@pytest.fixture
def project(tmp_path, monkeypatch):
    write_project(tmp_path, PACKAGE)
    monkeypatch.chdir(tmp_path)
    forget(PACKAGE)
    yield
    forget(PACKAGE)


def test_module_without_weights_is_an_error_unless_random_weights(project, tmp_path):
    options = {**FAST, "input_shape": (1, 1, 8, 8), "calib": "synthetic"}
    with pytest.raises(ExportError) as err:
        build(f"{PACKAGE}.models:TinyNet", output=tmp_path / "out.edgekit", **options)
    assert "no weights were loaded" in str(err.value) and "--random-weights" in str(err.value)
    assert "--weights" in str(err.value)
    assert not (tmp_path / "out.edgekit").exists()
    result = build(f"{PACKAGE}.models:TinyNet", output=tmp_path / "out.edgekit", random_weights=True, **options)
    assert result.path.exists()
    # a factory giving the same values each time loaded (or seeded) its weights: no error
    build(f"{PACKAGE}.models:make_tiny", output=tmp_path / "seeded.edgekit", **options)
