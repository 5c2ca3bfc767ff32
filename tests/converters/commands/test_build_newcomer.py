"""Issue 19, host side: what a new user sees from ``edgekit build`` and ``estimate``.

Each test runs the real CLI (a subprocess where the output streams matter: the XNNPACK line
is written by C++ to fd 2, below Python) and asserts the text and the exit code a user gets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgekit.artifact.archive import read_artifact
from edgekit.cli import main
from edgekit.errors import CalibrationError, UserError

from ...conftest import DIGITS_NPZ, DIGITS_ONNX, SAMPLES

XNNPACK = "XNNPACK delegate"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


@pytest.fixture(scope="module")
def rgb_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample digits as RGB photos (tinted: R, G and B differ) in one folder per class."""
    root = tmp_path_factory.mktemp("rgb")
    for path in sorted(SAMPLES.glob("*.png")):
        gray = np.asarray(Image.open(path).convert("L"), dtype=np.float32)
        rgb = np.stack([gray, gray * 0.5, gray * 0.25], axis=-1).astype(np.uint8)
        (root / f"d{path.name[0]}").mkdir(exist_ok=True)
        Image.fromarray(rgb, "RGB").save(root / f"d{path.name[0]}" / path.name)
    return root


def test_quiet_build_prints_only_the_path_and_no_runtime_noise(tmp_path: Path) -> None:
    out = tmp_path / "new" / "folder" / "d.edgekit"
    proc = run("build", "--target", "RPI4", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
               "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{out}\n" and proc.stderr == ""  # -q: the path, nothing else
    assert read_artifact(out).manifest["target"]["name"] == "rpi4"  # RPI4 meant rpi4


def test_piped_build_has_no_bars_no_xnnpack_and_says_its_units(tmp_path: Path) -> None:
    out = tmp_path / "made" / "d.edgekit"
    proc = run("build", "--target", "rpi4", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
               "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert XNNPACK not in text and "0%|" not in text and "sample/s" not in text
    assert f"created the output folder {out.parent}" in proc.stderr
    assert "(output units = " in proc.stdout and "int8 steps of" in proc.stdout
    assert "on disk (a zip: compressed)" in proc.stdout
    assert "models (uncompressed, as loaded on the device): tflite" in proc.stdout


def test_failed_build_leaves_no_new_folder(tmp_path: Path) -> None:
    proc = run("build", "--target", "rpi4", str(DIGITS_ONNX), "--calib", str(tmp_path / "none"),
               "-o", str(tmp_path / "a" / "b" / "d.edgekit"))
    assert proc.returncode == 2 and "no such calibration data" in proc.stderr
    assert not (tmp_path / "a").exists()


def test_rgb_photos_calibrate_a_gray_model_with_color_gray(tmp_path: Path,
                                                         rgb_folder: Path) -> None:
    out = tmp_path / "img.edgekit"
    for color in ([], ["--color", "gray"]):  # the default is the model's: gray
        proc = run("build", "-t", "rpi4", str(DIGITS_ONNX), "--calib", str(rgb_folder),
                   "-o", str(out), "-q", *color)
        assert proc.returncode == 0, proc.stderr
    manifest = read_artifact(out).manifest
    assert manifest["inputs"][0]["preprocess"]["color"] == "gray"
    assert manifest["labels"] == [f"d{i}" for i in range(10)]
    assert manifest["validation"]["accuracy_int8"] >= 0.5  # real digits, converted to gray


def test_converted_images_are_the_luma_of_the_photos(rgb_folder: Path) -> None:
    from edgekit.converters.inputs.datasets import load_dataset

    inputs = [{"name": "image", "shape": ["batch", 1, 8, 8]}]
    data, spec = load_dataset(str(rgb_folder), inputs, {"color": "gray"}, progress=False)
    first = sorted(rgb_folder.glob("*/*.png"))[0]
    luma = np.asarray(Image.open(first).convert("L"), dtype=np.float32) / 255.0
    assert spec["color"] == "gray" and data.arrays["image"].shape == (20, 1, 8, 8)
    np.testing.assert_allclose(data.arrays["image"][0, 0], luma, atol=1e-6)


def test_color_rgb_on_a_one_channel_model_says_what_to_pass(rgb_folder: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "-t", "rpi4", str(DIGITS_ONNX), "--calib", str(rgb_folder),
                 "--color", "rgb", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "converts images to 3 channel(s)" in err and "--color gray" in err


def test_python_build_takes_a_numpy_array(tmp_path: Path, digits_data) -> None:  # noqa: ANN001
    from edgekit.converters import build

    x, _ = digits_data
    result = build(str(DIGITS_ONNX), target="host", calib=x[:128], output=tmp_path / "a.edgekit",
                   formats=["onnx"], quiet=True)
    data_stage = next(s for s in result.manifest["stages"] if s["name"] == "data")
    assert data_stage["params"]["calib"] == "array [128, 1, 8, 8] float32"
    with pytest.raises(CalibrationError) as info:  # a 3-D array: the user's shape, and a fix
        build(str(DIGITS_ONNX), target="host", calib=x[:64, 0], output=tmp_path / "b.edgekit",
              formats=["onnx"], quiet=True)
    message = str(info.value)
    assert "has shape [64, 8, 8] (3-D)" in message and "[1, 64, 8, 8]" not in message
    assert "x[:, None] -> [64, 1, 8, 8]" in message


def test_npz_3d_array_error_describes_the_file_array(tmp_path: Path, digits_data) -> None:  # noqa: ANN001
    x, _ = digits_data
    np.savez(tmp_path / "flat.npz", x=x[:64, 0])
    proc = run("build", "-t", "host", str(DIGITS_ONNX), "--calib", str(tmp_path / "flat.npz"))
    assert proc.returncode == 2 and "has shape [64, 8, 8] (3-D)" in proc.stderr
    assert "got 64" not in proc.stderr


def test_help_groups_every_option_with_a_help_text() -> None:
    from edgekit.converters.commands.build import command

    proc = run("build", "--help")
    for group in ("Input", "Calibration", "Quantization", "Budgets", "Output"):
        assert f"{group} options:" in proc.stdout
    assert "Other options" not in proc.stdout.replace("Other options:\n  --help", "")
    missing = [p.name for p in command.params if getattr(p, "help", "x") in (None, "")
               and p.param_type_name == "option"]
    assert missing == []
    assert "converted TO" in proc.stdout


def test_save_config_then_config_repeats_the_build(tmp_path: Path) -> None:
    saved = tmp_path / "build.toml"
    first = tmp_path / "first.edgekit"
    proc = run("build", "-t", "host", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ), "-o",
               str(first), "--format", "onnx", "--calib-samples", "128", "--mean", "0.1",
               "-q", "--save-config", str(saved))
    assert proc.returncode == 0, proc.stderr
    text = saved.read_text()
    assert "[calibration]" in text and "calib-samples = 128" in text and "quiet" not in text
    second = tmp_path / "second.edgekit"
    proc = run("build", "--config", str(saved), "-o", str(second), "-q")  # flags win
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(second)
    a, b = read_artifact(first).manifest, read_artifact(second).manifest
    assert a["target"] == b["target"] and a["models"][0]["format"] == "onnx"
    assert a["validation"]["samples"] == b["validation"]["samples"]


def test_config_with_an_unknown_key_names_the_allowed_ones(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('target = "rpi4"\ncalibb = "x.npz"\n')
    proc = run("build", "--config", str(bad), str(DIGITS_ONNX))
    assert proc.returncode == 2
    assert "unknown key(s) ['calibb']" in proc.stderr and "calib-samples" in proc.stderr


def test_search_on_onnx_skips_prune_ratios_for_a_latency_budget(tmp_path: Path) -> None:
    proc = run("build", "-t", "rpi4", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
               "-o", str(tmp_path / "x.edgekit"), "--max-latency-ms", "0.01")
    assert proc.returncode == 3
    assert "skipping prune ratios [0.25" in proc.stderr and "saves storage" in proc.stderr
    assert "prune 0.25" not in proc.stderr  # not tried


def test_estimate_reads_a_tflite_only_artifact(tmp_path: Path) -> None:
    out = tmp_path / "d.edgekit"
    assert main(["build", "-t", "rpi4", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
                 "-o", str(out), "-q"]) == 0
    proc = run("estimate", "--target", "rpi4", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "(stored as int8)" in proc.stdout
    # the digits CNN's 121,994 parameters and 1.85 M MACs, read from the .tflite
    assert "121.99 k" in proc.stdout and "1.85 M" in proc.stdout
    assert "peak activations at: float32 CONV_2D#" in proc.stdout


def test_typod_class_in_a_file_names_the_classes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "net.py").write_text(
        "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x\n")
    proc = run("build", "-t", "host", "net.py:Nett", "--input-shape", "1x4",
               "--calib", "synthetic", cwd=tmp_path)
    assert proc.returncode == 2
    assert "net.py has no class or function 'Nett' (did you mean 'Net'?)" in proc.stderr
    assert "available: Net" in proc.stderr and "edgekit_user_" not in proc.stderr


def test_no_arguments_prints_help_and_exits_0() -> None:
    proc = run()
    assert proc.returncode == 0 and "Usage: edgekit" in proc.stdout and "Exit codes" in proc.stdout


def test_click_errors_keep_their_own_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--no-such-flag"]) == 2  # a usage error stays 2
    assert main(["--version"]) == 0
    with pytest.raises(UserError):
        from edgekit.targets import load_profile

        load_profile("RPI-9")


def test_image_options_with_arrays_say_they_are_not_applied(tmp_path: Path) -> None:
    out = tmp_path / "d.edgekit"
    proc = run("build", "--target", "rpi4", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
               "--mean", "0.5", "--std", "0.5", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert ("--mean, --std apply to image folders only and digits.npz is none" in proc.stderr
            and "normalize the arrays yourself" in proc.stderr)
    assert read_artifact(out).spec.inputs[0].preprocess is None  # nothing recorded either
    plain = run("build", "--target", "rpi4", str(DIGITS_ONNX), "--calib", str(DIGITS_NPZ),
                "-o", str(tmp_path / "plain.edgekit"))
    assert plain.returncode == 0 and "apply to image folders only" not in plain.stderr


def test_help_examples_of_mean_and_std_differ() -> None:
    text = run("build", "--help").stdout
    assert "--mean 0.485,0.456,0.406" in text and "--std 0.229,0.224,0.225" in text
