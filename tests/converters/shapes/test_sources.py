"""Sources the build used to refuse for the wrong reason: a PyTorch model whose forward
reshapes its input (no rank guessing), and a .tflite file (refused by name)."""

from __future__ import annotations

import numpy as np
from edgekit.converters import build

from edgekit.cli import main as cli_main

from .nets import AudioCnn


def test_a_1d_audio_cnn_builds_from_its_own_forward(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "clips.npy", rng.standard_normal((16, 1024)).astype(np.float32))
    result = build(AudioCnn().eval(), target="rpi4", input_shape=(1, 1024),
                   calib=str(tmp_path / "clips.npy"), output=tmp_path / "a.edgekit", quiet=True)
    assert result.manifest["inputs"][0]["shape"] == [1, 1024]
    assert result.manifest["outputs"][0]["shape"] == [1, 3]


def test_cli_takes_named_shapes_consts_and_batch_axes(tmp_path, capsys):
    code = cli_main(["build", str(tmp_path / "none.onnx"), "--target", "rpi4",
                     "--input-shape", "images=1x3x32", "--const", "sr=16000",
                     "--batch-axis", "state=1", "--calib", "synthetic", "-q"])
    assert code != 0 and "no such model file" in capsys.readouterr().err
    for bad, why in ((["--input-shape", "images=1xax3"], "--input-shape"),
                     (["--const", "sr"], "--const expects NAME=VALUE"),
                     (["--batch-axis", "state=-1"], "--batch-axis expects NAME=VALUE")):
        assert cli_main(["build", "m.onnx", "--target", "rpi4", *bad]) == 2
        assert why in capsys.readouterr().err


def test_a_comma_separated_shape_says_how_dims_are_joined(capsys):
    from tests.conftest import DIGITS_NPZ, DIGITS_ONNX

    code = cli_main(["build", str(DIGITS_ONNX), "--target", "rpi4", "--calib", str(DIGITS_NPZ),
                     "--input-shape", "8,8", "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert "gave 2 shape(s) (8, 8)" in err and "dims are joined by x" in err, err
