"""Bad inputs: each gives a typed error with a clear message and leaves no partial file."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import build
from PIL import Image

from edgekit.errors import CalibrationError, ModelFormatError, TargetError, UserError

from ..conftest import DIGITS_NPZ, DIGITS_ONNX


def _no_files(folder):
    return [p.name for p in folder.iterdir() if p.suffix in (".edgekit", ".tmp")]


def test_file_that_is_not_onnx(tmp_path):
    bogus = tmp_path / "model.onnx"
    bogus.write_text("this is not a protobuf at all " * 20)
    with pytest.raises(ModelFormatError, match="not a readable ONNX model|invalid ONNX"):
        build(str(bogus), target="host", calib=str(DIGITS_NPZ), output=tmp_path / "o.edgekit")
    assert not _no_files(tmp_path)


def test_truncated_onnx(tmp_path):
    data = DIGITS_ONNX.read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError) as err:
        build(str(cut), target="host", calib=str(DIGITS_NPZ), output=tmp_path / "o.edgekit")
    assert "cut.onnx" in str(err.value)
    assert not _no_files(tmp_path)


def test_unknown_target_names_the_allowed_ones(tmp_path):
    with pytest.raises(TargetError, match="unknown target 'rpi9'.*rpi4"):
        build(str(DIGITS_ONNX), target="rpi9", calib=str(DIGITS_NPZ), output=tmp_path / "o.edgekit")


def test_missing_calibration_says_what_to_pass(tmp_path):
    with pytest.raises(CalibrationError, match="--calib.*synthetic"):
        build(str(DIGITS_ONNX), target="host", output=tmp_path / "o.edgekit")
    assert not _no_files(tmp_path)


def test_calibration_path_that_does_not_exist(tmp_path):
    with pytest.raises(CalibrationError, match="no such calibration data"):
        build(str(DIGITS_ONNX), target="host", calib=str(tmp_path / "nope"),
              output=tmp_path / "o.edgekit")


def test_calibration_images_of_the_wrong_size(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(4):
        Image.fromarray(np.zeros((32, 32), np.uint8), "L").save(folder / f"{i}.png")
    with pytest.raises(CalibrationError, match=r"32x32.*8x8.*--resize"):
        build(str(DIGITS_ONNX), target="host", calib=str(folder), output=tmp_path / "o.edgekit")
    assert not _no_files(tmp_path)


def test_calibration_images_of_the_wrong_mode(tmp_path):
    """RGB photos for a gray model are converted (issue 19); 16-bit images are not guessed at."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(4):
        Image.new("I;16", (8, 8)).save(folder / f"{i}.png")
    with pytest.raises(CalibrationError, match="is not an 8-bit image"):
        build(str(DIGITS_ONNX), target="host", calib=str(folder), output=tmp_path / "o.edgekit")


def test_calibration_array_of_the_wrong_shape(tmp_path):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((10, 1, 28, 28), np.float32))
    with pytest.raises(CalibrationError, match=r"axis 2: expected 8, got 28"):
        build(str(DIGITS_ONNX), target="host", calib=str(bad), output=tmp_path / "o.edgekit")


def test_output_in_a_missing_folder(tmp_path):
    """A missing folder is created, as ``mkdir -p`` (and said); a failed build removes it."""
    said = []
    with pytest.raises(CalibrationError):
        build(str(DIGITS_ONNX), target="host", calib=str(tmp_path / "none.npz"),
              output=tmp_path / "missing" / "deeper" / "o.edgekit", report=said.append)
    assert not (tmp_path / "missing").exists()
    assert said[0] == f"created the output folder {tmp_path / 'missing' / 'deeper'}"
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="is a file, not a folder"):
        build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ),
              output=tmp_path / "file" / "o.edgekit")


def test_unknown_build_option_names_the_allowed():
    with pytest.raises(UserError, match="unknown build option.*calib_samples"):
        build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ), colour="blue")


@pytest.mark.parametrize("typo", ["finetune_step", "extra", "keepfloat"])
def test_a_mistyped_knob_is_an_error_naming_the_typed_ones(typo):
    with pytest.raises(UserError, match="unknown build option.*finetune_steps.*guard_steps.*"
                                        "keep_float.*prune_ratios.*search_margin.*"
                                        "sensitivity_samples"):
        build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ), **{typo: 3})


def test_list_knobs_refuse_a_string():
    with pytest.raises(UserError, match="keep_float expects a list"):
        build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ), keep_float="Conv_0")
