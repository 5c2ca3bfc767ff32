"""Inputs beyond one float image: an int64 sample rate passed through or frozen with
--const, and a recurrent state [layers, N, hidden] whose samples are on axis 1."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import build

import edgekit
from edgekit.errors import CalibrationError, UserError
from edgekit.ops.verify import verify_artifact

from .nets import export_vad, if_on_sample_rate

SAMPLES = 12


@pytest.fixture(scope="module")
def vad(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vad")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((SAMPLES, 64)).astype(np.float32)
    state = (rng.standard_normal((2, SAMPLES, 16)) * 0.1).astype(np.float32)  # model layout
    np.savez(folder / "with_sr.npz", x=x, sr=np.full(SAMPLES, 16000, np.int64), state=state)
    np.savez(folder / "stacked.npz", x=x, state=np.moveaxis(state, 1, 0)[:, :, None])
    return export_vad(folder / "vad.onnx"), folder


def test_an_int64_input_passes_through_and_the_state_keeps_axis_1(vad, tmp_path):
    model, folder = vad
    result = build(str(model), target="rpi4", calib=str(folder / "with_sr.npz"),
                   batch_axes={"state": 1}, output=tmp_path / "vad.edgekit", quiet=True)
    inputs = {i["name"]: i for i in result.manifest["inputs"]}
    assert inputs["sr"]["dtype"] == "int64" and "quantization" not in inputs["sr"]
    assert inputs["state"]["shape"] == [2, 1, 16] and inputs["state"]["batch_axis"] == 1
    outputs = {o["name"]: o for o in result.manifest["outputs"]}
    assert outputs["state_out"]["shape"] == [2, 1, 16] and outputs["state_out"]["batch_axis"] == 1
    assert result.manifest["validation"]["cosine"] > 0.99
    # as many test vectors as any model gets, each cut on its input's batch axis (was 1)
    assert result.manifest["test_vectors"]["count"] > 1
    assert verify_artifact(result.path).passed
    loaded = edgekit.load(str(result.path))
    try:
        out = loaded.predict({"x": np.zeros((1, 64), np.float32),
                              "sr": np.array([16000], np.int64),
                              "state": np.zeros((2, 1, 16), np.float32)})
        assert out["prob"].shape == (1, 1) and out["state_out"].shape == (2, 1, 16)
        # three samples at once: their states side by side on axis 1, the rate shared
        rng = np.random.default_rng(1)
        xs = rng.standard_normal((3, 64)).astype(np.float32)
        states = (rng.standard_normal((2, 3, 16)) * 0.1).astype(np.float32)
        rate = np.array([16000], np.int64)
        many = loaded.predict({"x": xs, "sr": rate, "state": states})
        ones = [loaded.predict({"x": xs[i:i + 1], "sr": rate, "state": states[:, i:i + 1]})
                for i in range(3)]
        assert many["state_out"].shape == (2, 3, 16)
        np.testing.assert_array_equal(many["state_out"],
                                      np.concatenate([o["state_out"] for o in ones], axis=1))
        np.testing.assert_array_equal(many["prob"], np.concatenate([o["prob"] for o in ones]))
        # the batcher joins requests on each input's batch axis and splits them back
        futures = [loaded.submit({"x": xs[i:i + 1], "sr": rate, "state": states[:, i:i + 1]})
                   for i in range(3)]
        for future, one in zip(futures, ones, strict=True):
            got = future.result(timeout=30)
            np.testing.assert_array_equal(got["state_out"], one["state_out"])
            np.testing.assert_array_equal(got["prob"], one["prob"])
    finally:
        loaded.close()


def test_const_freezes_the_sample_rate_and_the_int8_tflite_ships(vad, tmp_path):
    model, folder = vad
    result = build(str(model), target="rpi4", calib=str(folder / "stacked.npz"),
                   consts={"sr": 16000}, batch_axes={"state": 1},
                   output=tmp_path / "vad.edgekit", quiet=True)
    assert [i["name"] for i in result.manifest["inputs"]] == ["x", "state"]
    formats = [m["format"] for m in result.manifest["models"]]
    assert formats == ["tflite"]  # the Cast of sr folded away with it
    assert verify_artifact(result.path).passed


def test_a_state_without_batch_axis_says_how_to_name_it(vad, tmp_path):
    model, folder = vad
    with pytest.raises(CalibrationError, match=r"'state' has shape \[12, 2, 1, 16\].*"
                                               r"--batch-axis state=K"):
        build(str(model), target="rpi4", calib=str(folder / "stacked.npz"),
              consts={"sr": 16000}, output=tmp_path / "vad.edgekit", quiet=True)


def test_const_on_an_unknown_input_names_the_inputs(vad, tmp_path):
    model, folder = vad
    with pytest.raises(UserError, match=r"--const names \['rate'\]; the model's inputs are "
                                        r"\['x', 'sr', 'state'\]"):
        build(str(model), target="rpi4", calib=str(folder / "stacked.npz"),
              consts={"rate": 16000}, batch_axes={"state": 1},
              output=tmp_path / "vad.edgekit", quiet=True)


def test_const_folds_an_if_on_the_frozen_input(tmp_path):
    model = if_on_sample_rate(tmp_path / "if.onnx")
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((16, 4)).astype(np.float32))
    result = build(str(model), target="rpi4", calib=str(tmp_path / "x.npy"),
                   consts={"sr": 16000}, output=tmp_path / "if.edgekit", quiet=True)
    tflite = next(m for m in result.manifest["models"] if m["format"] == "tflite")
    assert tflite["float_ops"] == [] and "IF" not in tflite["ops"]
    loaded = edgekit.load(str(result.path))
    try:
        x = np.array([[1.0, -1.0, 0.5, 1.5]], np.float32)  # inside the calibrated range
        np.testing.assert_allclose(loaded.predict(x), np.maximum(2 * x, 0), atol=0.05)
    finally:
        loaded.close()
