"""The drift watch (edgekit/numerics/drift.py): the build records each input's calibrated range and
each output's; the runtime counts what int8 clips per input channel and what sits at the
output's limits, on LiteRT (the input write's own min/max) and onnxruntime (sampled runs);
``stats()``, ``edgekit run`` and the example service report it.

The artifact: a 3-channel conv net calibrated on real images (scikit-learn digits, one
per channel) at half brightness, so that full-brightness images are outside its range."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import edgekit
from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.artifact.manifest import Manifest
from edgekit.backends import by_name
from edgekit.commands.run import command as run_command
from edgekit.errors import ArtifactError
from tests.conftest import DIGITS_NPZ, EXAMPLE, SAMPLES

from ..runtime_models import conv_onnx

BACKENDS = [name for name in ("litert", "onnxruntime") if by_name(name).available()]


def dim_images() -> tuple[np.ndarray, np.ndarray]:
    """Digits at half brightness on three channels: what the model is calibrated on."""
    with np.load(DIGITS_NPZ) as npz:
        x, y = npz["x"].astype(np.float32), npz["y"]
    return np.repeat(0.5 * x, 3, axis=1), y


@pytest.fixture(scope="module")
def dim_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from edgekit.converters import build

    folder = tmp_path_factory.mktemp("drift")
    source = folder / "conv3.onnx"
    source.write_bytes(conv_onnx(size=8, channels=8, in_channels=3, batch=1))
    x, y = dim_images()
    np.savez(folder / "dim.npz", x=x[:400], y=y[:400])
    out = folder / "conv3.rpi4.edgekit"
    # random weights: a top-1 guard would keep them float; the watch needs the int8 grid
    build(str(source), target="rpi4", calib=str(folder / "dim.npz"), output=out, quiet=True,
          formats=["tflite", "onnx"], metric="sqnr", accept_accuracy_drop=True)
    return out


def test_the_build_records_each_range_and_its_baseline(dim_artifact: Path) -> None:
    spec = read_artifact(dim_artifact).spec
    record = spec.inputs[0].calibration
    assert record is not None and record.channel_axis == 1
    assert record.low == pytest.approx(0.0, abs=1e-6) and 0.45 < record.high < 0.55
    assert len(record.baseline) == 3 and max(record.baseline) < 0.01 and record.samples > 0
    out = spec.outputs[0].calibration
    assert out is not None and out.low < out.high and len(out.baseline) == 1
    from edgekit.ops.inspect import manifest_table

    table = manifest_table(read_artifact(dim_artifact).manifest)
    assert "calibrated [0, 0.5], 0.00/0.00/0.00% outside per channel at build" in table


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_range_inputs_stay_quiet_and_a_bright_channel_warns(dim_artifact: Path,
                                                               backend: str) -> None:
    x, _ = dim_images()
    with edgekit.load(dim_artifact, backend=backend) as model:
        for i in range(400):
            model.predict(x[i:i + 1])
        drift = model.stats()["drift"]["inputs"]["x"]
        assert drift["channels"] == [0.0, 0.0, 0.0] and drift["values"] > 0
        assert model.drift_warnings() == []
        bright = x.copy()
        bright[:, 2] *= 3.0  # one channel's gain moved: its values pass the calibrated top
        for i in range(400):
            model.predict(bright[i:i + 1])
        stats = model.stats()["drift"]
    shares = stats["inputs"]["x"]["channels"]
    assert shares[0] == 0.0 and shares[1] == 0.0
    expected = float(np.mean(bright[:, 2] > stats["inputs"]["x"]["range"][1])) / 2  # half the runs
    assert shares[2] == pytest.approx(expected, rel=0.25)
    assert stats["inputs"]["x"]["counted_by"] == ("input write" if backend == "litert"
                                                  else "sampled runs")
    [warning] = stats["warnings"]
    assert warning.startswith("input 'x' channel 2: ") and "outside the calibrated range" in warning


def test_the_threshold_is_the_callers(dim_artifact: Path) -> None:
    x, _ = dim_images()
    with edgekit.load(dim_artifact, backend=BACKENDS[0], drift_threshold=0.9) as model:
        for i in range(100):
            model.predict(x[i:i + 1] * 3.0)
        assert model.stats()["drift"]["inputs"]["x"]["share"] > 0.05
        assert model.drift_warnings() == []  # far below 90%
    with pytest.raises(edgekit.UserError, match="drift_threshold must be a share"):
        edgekit.load(dim_artifact, drift_threshold=1.5)


def test_edgekit_run_warns_naming_input_and_channel(dim_artifact: Path) -> None:
    # the committed sample PNGs at full brightness: twice the range the model saw
    result = CliRunner().invoke(run_command, [str(dim_artifact), str(SAMPLES)])
    assert result.exit_code == 0, result.output
    assert "warning: drift: input 'x' channel 0:" in result.stderr
    quiet = CliRunner().invoke(run_command, [str(dim_artifact), str(SAMPLES),
                                             "--drift-threshold", "1"])
    assert quiet.exit_code == 0 and "drift" not in quiet.stderr


def test_the_example_service_logs_the_warning(dim_artifact: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import classify_service

    logger = logging.getLogger("classify")
    try:
        code = classify_service.main(["--model", str(dim_artifact), "--images", str(SAMPLES),
                                      "--once", "--stats-interval", "0", "--threads", "1",
                                      "--log-results", "none"])
    finally:  # main() pointed the logger at this test's stderr
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    assert code == 0
    assert "WARNING drift: input 'x' channel 0:" in capsys.readouterr().err


def test_an_artifact_without_the_record_is_watched_from_its_quantization(
        dim_artifact: Path, tmp_path: Path) -> None:
    artifact = read_artifact(dim_artifact)
    manifest = copy.deepcopy(artifact.manifest)
    for entry in manifest["inputs"] + manifest["outputs"]:
        entry.pop("calibration")
    old = tmp_path / "old.edgekit"
    write_artifact(old, manifest, {m: artifact.read(m) for m in artifact.members
                                   if m in manifest["files"]})
    x, _ = dim_images()
    with edgekit.load(old, backend=BACKENDS[-1]) as model:
        for i in range(200):
            model.predict(x[i:i + 1] * 3.0)
        drift = model.stats()["drift"]["inputs"]["x"]
    assert drift["baseline"] == [0.0, 0.0, 0.0] and min(drift["channels"]) > 0.05


@pytest.mark.parametrize(("record", "message"), [
    ({"range": [1.0, 0.0]}, "calibration.range must be [low, high]"),
    ({"range": [0.0, 1.0], "channel_axis": 7}, "calibration.channel_axis must be an int in"),
    ({"range": [0.0, 1.0], "baseline": [2.0]}, "calibration.baseline must be a list of shares"),
    ({"range": [0.0, "x"]}, "calibration.range must be [low, high]"),
])
def test_a_bad_record_names_the_field(dim_artifact: Path, record: dict, message: str) -> None:
    data = json.loads(json.dumps(read_artifact(dim_artifact).manifest))
    data["inputs"][0]["calibration"] = record
    with pytest.raises(ArtifactError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Manifest.from_dict(data)


def test_outputs_at_the_int8_limits_warn_beyond_their_baseline() -> None:
    from edgekit.numerics.drift import DriftWatch, Watched

    # logits on a grid of step 0.1 over [-12.8, 12.7]; the build saw 2% of them at a limit
    logits = Watched("logits", -12.8, 12.7, 0.1, baseline=(0.02,))
    watch = DriftWatch([], [logits], threshold=0.01)
    rng = np.random.default_rng(0)
    for _ in range(10):
        watch.observe(None, [rng.normal(0, 2, (1, 100)).astype(np.float32)])
    assert watch.warnings() == []
    for _ in range(10):  # a new sensor's gain: half the logits pinned at the top code
        out = rng.normal(0, 2, (1, 100)).astype(np.float32)
        out[0, :50] = 12.7
        watch.observe(None, [out])
    [warning] = watch.warnings()
    assert warning.startswith("output 'logits': 25.00% of values at the int8 limits")
    assert watch.info()["outputs"]["logits"]["at_limits"] == pytest.approx(0.25)


def test_a_channel_is_found_in_either_layout() -> None:
    from edgekit.numerics.drift import InputCounter, Watched

    counter = InputCounter(Watched("x", 0.0, 1.0, 1 / 255, channel_axis=1, channels=3))
    nchw = np.zeros((1, 3, 64, 64), np.float32)
    nchw[:, 1, :16] = 2.0  # a quarter of channel 1
    counter.observe(nchw)
    counter.observe(np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)))  # the NHWC form
    assert counter.shares() == pytest.approx([0.0, 0.25, 0.0], abs=0.02)


def test_camera_frames_through_the_pixel_table_are_counted(dim_artifact: Path) -> None:
    """predict(uint8 frame) on LiteRT skips the float write (one table lookup): the watch
    counts the pixel values the table clips."""
    if "litert" not in BACKENDS:
        pytest.skip("LiteRT is not installed")
    x, _ = dim_images()
    frames = np.clip(np.rint(x.transpose(0, 2, 3, 1) * 255 * 2), 0, 255).astype(np.uint8)
    with edgekit.load(dim_artifact, backend="litert") as model:
        for frame in frames[:200] // 2:  # the brightness it was calibrated on
            model.predict(frame)
        assert model.stats()["drift"]["inputs"]["x"]["share"] == 0.0
        for frame in frames[:200]:  # twice as bright: the top half of the range clips
            model.predict(frame)
        stats = model.stats()["drift"]
    expected = float(np.mean(frames[:200] > 128)) / 2  # over all 400 frames
    assert stats["inputs"]["x"]["share"] == pytest.approx(expected, rel=0.15)
    assert len(stats["warnings"]) == 3 and "channel 1" in stats["warnings"][1]


def test_sampled_counts_stay_unbiased_when_the_inputs_change() -> None:
    """After the first 64 runs only some are counted; each stands for the runs it samples,
    so a change late in a long run weighs as much as it lasted."""
    from edgekit.numerics.drift import INPUT_EVERY, InputCounter, Watched, sample_weight

    tensor = Watched("x", 0.0, 1.0, 1 / 255, channel_axis=1, channels=1)
    half = np.zeros((1, 1, 64, 64), np.float32)
    half[:, :, :32] = 2.0  # half the values out of range
    write, sampled = InputCounter(tensor), InputCounter(tensor)
    for run in range(800):
        drifted = run >= 400
        write.values += half.size  # the LiteRT write: every run's values ...
        if drifted:
            write.clipped_codes(half, 0.0, 1.0)  # ... and each run that clipped
    for run in range(800):  # the sampled path: 1 in 16 after the first 64, weighted
        weight = sample_weight(run + 1, INPUT_EVERY)
        if weight:
            sampled.observe(half if run >= 400 else np.zeros_like(half), weight)
    assert write.shares() == pytest.approx([0.25], abs=0.01)
    assert sampled.shares() == pytest.approx([0.25], abs=0.02)
