"""examples/raspberrypi: the classification service a Pi owner copies, run for real.

Host: the main loop over the 20 committed sample digits on LiteRT and onnxruntime, the
predictions checked against the labels in the file names. Emulated: the same script under
qemu-aarch64-static -cpu cortex-a72 in the arm64 sysroot (no Pillow there: the stdlib PNG
reader). Plus the two messages a newcomer meets first: no frame source, and an artifact
built for another board. (Reader, preprocessing and board detection: test_classify_frames.py.)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

import classify_service
import numpy as np
import pytest
from app.frames import Preprocessor, array_to_input, input_spec, read_image
from app.service import Service
from app.sources import Frame, ImageSource

import edgekit
from edgekit.backends import by_name
from edgekit.device.power import NORMAL, THROTTLED
from tests.conftest import DIGITS_ONNX, SAMPLES

from .classify_env import (
    ARTIFACT,
    EXAMPLE,
    PI4,
    PI5,
    SCRIPT,
    board_root,
    label_of,
    put,
    read_results,
)


@pytest.fixture(autouse=True)
def reset_app_logger():  # noqa: ANN201
    """main() points the app's logger at the stderr of its moment (a test's capture);
    put it back so that the next test (and caplog) start clean."""
    yield
    logger = logging.getLogger("classify")
    logger.handlers.clear()
    logger.propagate = True
    logger.setLevel(logging.NOTSET)

def available_backends() -> list[str]:
    return [name for name in ("litert", "onnxruntime") if by_name(name).available()]


# -- the committed default artifact -------------------------------------------------------

def test_committed_artifact_is_current() -> None:
    """Built from the committed model for rpi4, with every format the profile prefers, so
    both `pip install edgekit-sdk[litert]` and `[onnx]` can run it on the Pi."""
    from edgekit.artifact.archive import read_artifact

    artifact = read_artifact(ARTIFACT)
    manifest = artifact.manifest
    assert manifest["target"]["name"] == "rpi4"
    assert manifest["source"]["sha256"] == hashlib.sha256(DIGITS_ONNX.read_bytes()).hexdigest()
    formats = {m["format"] for m in manifest["models"]}
    assert formats == set(artifact.spec.target.profile.runtime.formats) == {"tflite", "onnx"}
    assert manifest["validation"]["accuracy_int8"] >= 0.98


# -- host: the main loop on the sample images ---------------------------------------------

@pytest.mark.parametrize("backend", available_backends())
def test_main_loop_classifies_the_samples(backend: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    code = classify_service.main([
        "--source", "images", "--images", str(SAMPLES), "--once", "--fps", "0",
        "--backend", backend, "--output", str(out), "--root", str(board_root(tmp_path / "r")),
    ])
    log = capsys.readouterr().err
    assert code == 0, log
    results = read_results(out)
    files = sorted(p for p in os.listdir(SAMPLES) if p.endswith(".png"))
    assert [Path(r["source"]).name for r in results] == files
    wrong = [(r["source"], r["class"]) for r in results if r["class"] != label_of(r["source"])]
    assert not wrong, f"misclassified: {wrong}"
    assert all(r["probability"] > 0.5 and r["latency_ms"] > 0 for r in results)
    assert f"runtime {backend}" in log and "final " in log and "frames=20 " in log
    assert "power=normal temp=52.0C" in log  # from the fake board's thermal zone
    assert "WARNING" not in log  # the fake board is a Pi 4 and the artifact is for rpi4


def test_max_frames_loops_over_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    code = classify_service.main([
        "--source", "images", "--images", str(SAMPLES), "--max-frames", "23", "--fps", "0",
        "--threads", "1", "--output", str(out), "--root", str(board_root(tmp_path / "r")),
    ])
    assert code == 0
    results = read_results(out)
    assert [r["frame"] for r in results] == list(range(23))
    assert results[20]["source"] == results[0]["source"]  # second pass starts over
    assert all(r["class"] == label_of(r["source"]) for r in results)


def test_stats_lines_at_the_configured_interval(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # 20 frames paced at 50/s take at least 0.38 s: at least two 0.05 s windows close
    code = classify_service.main([
        "--source", "images", "--images", str(SAMPLES), "--once", "--fps", "50",
        "--threads", "1", "--stats-interval", "0.05", "--log-results", "none",
        "--root", str(board_root(tmp_path / "r")),
    ])
    log = capsys.readouterr().err
    assert code == 0
    stats = [line for line in log.splitlines() if " INFO stats " in line]
    assert len(stats) >= 2, log
    for line in stats:
        for key in ("frames=", "throughput=", "latency_ms p50=", "p95=", "p99=", "threads=",
                    "power=normal", "temp=52.0C", "fps_target=50.00"):
            assert key in line, line
    final = next(line for line in log.splitlines() if " INFO final " in line)
    counted = sum(int(line.split("frames=")[1].split()[0]) for line in stats + [final])
    assert counted == 20  # every result lands in exactly one window


def test_throttling_lowers_the_frame_rate(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """A real power monitor on a fake sysfs tree: the board passes 85 C after 5 frames."""
    root = board_root(tmp_path / "r")
    model = edgekit.load(ARTIFACT, threads=1, power_root=str(root), monitor_interval_s=60)

    class HeatingImages(ImageSource):
        def frames(self):  # noqa: ANN202
            for frame in super().frames():
                if frame.index == 5:
                    put(root, "sys/class/thermal/thermal_zone0/temp", "86000\n")
                    model.power_monitor().poll()  # as its thread would, without waiting
                yield frame

    try:
        service = Service(model, HeatingImages([str(SAMPLES)]),
                          Preprocessor(input_spec(model)), fps=400, stats_interval=0,
                          keep_results=True)
        assert service.target_fps() == 400
        with caplog.at_level(logging.INFO, logger="classify"):
            summary = service.run()
        assert summary.power_changes == [(NORMAL, THROTTLED)]
        assert service.target_fps() == 100  # a quarter of the configured rate
        assert model.stats()["batcher"]["state"] == THROTTLED  # edgekit's batcher followed
        warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
        assert "power normal -> throttled" in warning and "temp_hard_limit" in warning
        assert "86.0 C" in warning and "frame rate 100.00/s (25% of 400)" in warning
        assert "power=throttled temp=86.0C fps_target=100.00" in caplog.records[-1].getMessage()
        assert [r.cls for r in summary.results] == [label_of(r.source) for r in summary.results]
    finally:
        model.close()


def test_camera_frames_are_cropped_converted_and_classified(tmp_path: Path) -> None:
    """The camera path: BGR frames wider than the model input (coloured noise in the margins
    that the center crop must remove), through the same loop."""
    rng = np.random.default_rng(0)
    files = sorted(p for p in os.listdir(SAMPLES) if p.endswith(".png"))

    class Camera:
        kind, name = "camera", "test frames"

        def frames(self):  # noqa: ANN202
            for index, name in enumerate(files):
                frame = rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)
                frame[:, 2:10] = read_image(str(SAMPLES / name))[:, :, None]
                yield Frame(index, name, time.perf_counter(), pixels=frame, order="bgr")

        def close(self) -> None:
            pass

    with edgekit.load(ARTIFACT, threads=1, power_root=str(board_root(tmp_path))) as model:
        pre = Preprocessor(input_spec(model))
        frame = next(Camera().frames())
        np.testing.assert_array_equal(  # what the model sees: the digit, exactly
            pre.from_array(frame.pixels, "bgr"),
            array_to_input(read_image(str(SAMPLES / files[0])), pre.spec))
        summary = Service(model, Camera(), pre, fps=0, keep_results=True).run()
    assert [r.cls for r in summary.results] == [label_of(name) for name in files]


def test_systemd_unit_runs_this_script() -> None:
    unit = (EXAMPLE / "edgekit-classify.service").read_text()
    command = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    argv = command.split("=", 1)[1].split()
    assert argv[1] == "classify_service.py"
    args = classify_service.parse_args(argv[2:])  # every option in the unit exists
    assert (EXAMPLE / args.model).is_file() and args.source == "auto"
    assert "RestartPreventExitStatus=2" in unit  # no restart loop without a camera


# -- messages: no source, different target ------------------------------------------------

def test_no_camera_and_no_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = board_root(tmp_path / "r")  # no dev/video*: no V4L2 camera even with OpenCV
    code = classify_service.main(["--root", str(root)])
    err = capsys.readouterr().err
    assert code == 2
    assert "nothing to classify: no camera and no images" in err
    assert "picamera2:" in err and "v4l2:" in err and "--images FILE_OR_FOLDER" in err
    assert "model " not in err  # it stops before loading (and tuning) the model


@pytest.mark.parametrize("args, message", [
    (["--source", "images"], "--source images is unavailable"),
    (["--images", "/nonexistent/digits"], "--images /nonexistent/digits: no such file"),
])
def test_bad_image_source(args: list[str], message: str, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    code = classify_service.main([*args, "--root", str(board_root(tmp_path / "r"))])
    assert code == 2 and message in capsys.readouterr().err


def test_unreadable_images_are_skipped(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "incoming"
    folder.mkdir()
    for name in ("3_0021.png", "7_0010.png"):
        shutil.copy(SAMPLES / name, folder / name)
    (folder / "5_broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    out = tmp_path / "results.jsonl"
    root = str(board_root(tmp_path / "r"))
    code = classify_service.main(["--images", str(folder), "--max-frames", "6", "--fps", "0",
                                  "--threads", "1", "--output", str(out), "--root", root])
    err = capsys.readouterr().err
    assert code == 0
    assert [label_of(r["source"]) for r in read_results(out)] == [3, 7] * 3
    assert err.count("skipping") == 1 and "5_broken.png" in err  # not retried every pass
    assert "done: 6 frames, 1 skipped" in err
    (folder / "3_0021.png").write_bytes(b"not an image")
    (folder / "7_0010.png").write_bytes(b"not an image")
    code = classify_service.main(["--images", str(folder), "--fps", "0", "--threads", "1",
                                  "--root", root])
    assert code == 2 and "none of the images is readable (3 skipped)" in capsys.readouterr().err


def test_warns_when_built_for_another_board(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    root = board_root(tmp_path / "r", model=PI5)
    code = classify_service.main(["--images", str(SAMPLES / "3_0021.png"), "--once",
                                  "--threads", "1", "--root", str(root)])
    err = capsys.readouterr().err
    assert code == 0  # a warning, not a refusal
    warning = next(line for line in err.splitlines() if " WARNING " in line)
    assert "built for target 'rpi4'" in warning and f"this board is '{PI5}'" in warning
    assert "target 'rpi5'" in warning and "edgekit build --target rpi5" in warning

# -- emulated: the same script on the Pi 4's Cortex-A72 -----------------------------------

@pytest.fixture(scope="module")
def rpi4_sysroot():  # noqa: ANN201
    """The cached arm64 sysroot (shared with tests/converters/emulation)."""
    if shutil.which("qemu-aarch64-static") is None:
        message = "qemu-aarch64-static is not installed (apt-get install qemu-user-static)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}: CI must run the emulated suite, not skip it")
        pytest.skip(message)
    from edgekit.converters.emulation import CpuSpec, ensure_sysroot, recipe_for
    from edgekit.targets import load_profile

    profile = load_profile("rpi4")
    return ensure_sysroot(recipe_for(profile)), CpuSpec.from_profile(profile)


@pytest.mark.emulated
@pytest.mark.parametrize("backend", ["litert", "onnxruntime"])
def test_main_loop_under_the_rpi4_emulation(backend: str, rpi4_sysroot, tmp_path: Path
                                            ) -> None:  # noqa: ANN001
    from edgekit.converters.emulation import run_python

    sysroot, cpu = rpi4_sysroot
    images = [str(SAMPLES / "3_0021.png"), str(SAMPLES / "7_0010.png")]
    proc = run_python(sysroot, cpu, [
        str(SCRIPT), "--source", "images", "--images", *images, "--once", "--fps", "0",
        "--backend", backend, "--output", "-", "--root", str(board_root(tmp_path / "r")),
    ], timeout=900)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [(r["source"], r["class"]) for r in results] == [(p, label_of(p)) for p in images]
    log = proc.stderr
    assert f"runtime {backend}" in log and f"model {ARTIFACT}" in log  # the default model
    assert f"'{PI4}' (target rpi4, aarch64)" in log  # the guest is an aarch64 machine
    assert "WARNING" not in log and "frames=2 " in log


def test_once_with_no_frame_classified_exits_1(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("a.png", "b.png"):  # another size than the model's 8x8 and no --resize
        from PIL import Image

        Image.new("RGB", (64, 48), (200, 10, 10)).save(folder / name)
    code = classify_service.main(["--images", str(folder), "--once", "--fps", "0",
                                  "--threads", "1", "--root", str(board_root(tmp_path / "r"))])
    err = capsys.readouterr().err
    assert code == 1
    assert "done: 0 frames, 2 skipped" in err and "no frame was classified" in err
