"""Issue 19, device side: ``edgekit run`` and ``predict_image`` advice that can be followed,
``inspect`` with labels and on a tampered file, and ``stats()`` counters that add up."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import edgekit
from edgekit.errors import CalibrationError, UserError

from ..conftest import SAMPLES


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True)


@pytest.fixture(scope="module")
def big_rgb_photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3 as a 32x32 RGB photo: another size and colour than the 8x8 gray model input."""
    path = tmp_path_factory.mktemp("photo") / "three.png"
    Image.open(SAMPLES / "3_0021.png").convert("RGB").resize((32, 32)).save(path)
    return path


def test_run_advice_can_be_followed(digits_artifact: Path, big_rgb_photo: Path) -> None:
    proc = run("run", str(digits_artifact), str(big_rgb_photo))
    assert proc.returncode == 2 and "--resize stretch|center-crop" in proc.stderr
    proc = run("run", str(digits_artifact), str(big_rgb_photo), "--resize", "stretch",
               "--top-k", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["top"][0]["class"] == 3
    assert "XNNPACK" not in proc.stderr


def test_run_takes_a_folder(digits_artifact: Path) -> None:
    proc = run("run", str(digits_artifact), str(SAMPLES), "--top-k", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert len(results) == 20
    right = sum(r["top"][0]["class"] == int(Path(r["image"]).name[0]) for r in results)
    assert right >= 18


def test_predict_image_takes_resize_and_color(digits_artifact: Path, big_rgb_photo: Path) -> None:
    with edgekit.load(digits_artifact) as model:
        with pytest.raises(CalibrationError, match=r"predict_image\(\.\.\., resize="):
            model.predict_image(big_rgb_photo)
        out = model.predict_image(big_rgb_photo, resize="center-crop", color="gray")
        assert int(np.argmax(out[0])) == 3
        with pytest.raises(UserError, match="takes 1; use --color gray"):
            model.predict_image(big_rgb_photo, resize="stretch", color="rgb")


def test_stats_counters_add_up(digits_artifact: Path) -> None:
    with edgekit.load(digits_artifact, threads=1) as model:
        x = np.zeros((1, 1, 8, 8), np.float32)
        for _ in range(5):
            model.predict(x)
        stats = model.stats()
    assert stats["executions"] == 5 and stats["total_executions"] == 5
    assert stats["samples"] == 5 and stats["total_samples"] == 5
    assert 1 <= stats["timed_executions"] <= 5
    from edgekit.runtime.stats import COUNTERS

    assert set(COUNTERS) <= set(stats)


def _tampered(src: Path, dst: Path) -> Path:
    with zipfile.ZipFile(src) as zin:
        members = {n: zin.read(n) for n in zin.namelist()}
    name = next(n for n in members if n.endswith(".tflite"))
    members[name] = members[name][:-8] + b"tampered"
    with zipfile.ZipFile(dst, "w") as zout:
        for member, data in members.items():
            zout.writestr(member, data)
    return dst


def test_inspect_shows_labels(tmp_path: Path, digits_artifact: Path) -> None:
    from edgekit.ops.inspect import manifest_table

    manifest = edgekit.artifact.archive.read_artifact(digits_artifact).manifest
    manifest["labels"] = ["zero", "one"]
    assert "labels                 2 classes: 0=zero, 1=one" in manifest_table(manifest)


def test_inspect_shows_a_tampered_file_under_a_banner(tmp_path: Path,
                                                     digits_artifact: Path) -> None:
    bad = _tampered(digits_artifact, tmp_path / "bad.edgekit")
    proc = run("inspect", str(bad))
    assert proc.returncode == 2
    assert proc.stdout.startswith("!!! HASH MISMATCH") and "UNVERIFIED" in proc.stdout
    assert "quantization" in proc.stdout and "fails its hash check" in proc.stderr
    with pytest.raises(edgekit.errors.ArtifactError):
        edgekit.load(bad)  # loading still refuses it


@pytest.fixture(scope="module")
def digits_minus1_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits CNN calibrated on arrays normalized to [-1, 1] (as (x - 0.5) / 0.5): a build
    from arrays records no image preprocessing."""
    from edgekit.converters import build

    from ..conftest import DIGITS_NPZ, DIGITS_ONNX

    with np.load(DIGITS_NPZ) as data:
        arrays = {"x": data["x"] * 2.0 - 1.0, "y": data["y"]}
    out = tmp_path_factory.mktemp("digits-pm1") / "digits.pm1.edgekit"
    build(str(DIGITS_ONNX), target="rpi4", calib=arrays, output=out, quiet=True,
          accept_accuracy_drop=True)
    return out


def test_predict_image_says_when_the_default_scaling_cannot_be_the_builds(
        digits_minus1_artifact: Path, digits_artifact: Path, big_rgb_photo: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="edgekit"), edgekit.load(digits_minus1_artifact) as model:
        assert model.spec.inputs[0].preprocess is None
        model.predict_image(big_rgb_photo, resize="stretch", color="gray")
        model.predict_image(big_rgb_photo, resize="stretch", color="gray")
    notes = [r.getMessage() for r in caplog.records if "records no image preprocessing" in r.getMessage()]
    assert len(notes) == 1  # once per model, not per image
    assert "scaled to [0, 1]" in notes[0] and "calibrated on values in [-1" in notes[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="edgekit"), edgekit.load(digits_artifact) as model:
        model.predict_image(big_rgb_photo, resize="stretch", color="gray")  # built on [0, 1]
    assert not [r for r in caplog.records if "records no image preprocessing" in r.getMessage()]


def test_a_symmetric_int8_input_grid_does_not_read_as_negative_data(
        tmp_path: Path, big_rgb_photo: Path, caplog: pytest.LogCaptureFixture) -> None:
    """int8 activations: the input grid of [0, 1] data is [-1.008, 1], its low end no data's."""
    from edgekit.converters import build

    from ..conftest import DIGITS_NPZ, DIGITS_ONNX

    out = tmp_path / "digits.int8.edgekit"
    build(str(DIGITS_ONNX), target="rpi4", calib=str(DIGITS_NPZ), output=out, quiet=True,
          activation_type="int8")
    with caplog.at_level("WARNING", logger="edgekit"), edgekit.load(out) as model:
        assert model.spec.inputs[0].calibration.low < -1.0  # the grid, not the data
        model.predict_image(big_rgb_photo, resize="stretch", color="gray")
    assert not [r for r in caplog.records if "records no image preprocessing" in r.getMessage()]


def test_inspect_marks_a_cut_stage_line(digits_artifact: Path) -> None:
    proc = run("inspect", str(digits_artifact))
    assert proc.returncode == 0, proc.stderr
    stages = proc.stdout.split("\nstages\n")[1].split("\nsignature")[0].splitlines()
    quantize = next(line for line in stages if line.strip().startswith("quantize"))
    assert quantize.endswith("..."), quantize  # its parameters run past one line
    assert not [line for line in stages if line.endswith(", ")], stages  # cut between values
