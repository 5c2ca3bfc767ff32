"""`edgekit bench`, `edgekit run` and `edgekit doctor` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.cli import main

from ..fake_sysfs import pi4_tree
from ..runtime_models import conv_onnx, write_model_artifact

SAMPLES = Path(__file__).resolve().parents[3] / "examples" / "raspberrypi" / "samples"


@pytest.fixture(scope="module")
def conv_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bconv") / "conv.edgekit"
    x = np.random.default_rng(0).random((3, 1, 16, 16), dtype=np.float32)
    return write_model_artifact(out, conv_onnx(size=16, channels=8), ["N", 1, 16, 16],
                                vectors=x)


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bench_rows_per_thread_and_batch(conv_artifact: Path, capsys) -> None:  # noqa: ANN001
    code, out, _ = run_cli(capsys, "bench", str(conv_artifact), "--threads", "1,auto",
                           "--batch", "1,3", "--duration", "0.05", "--runs", "5",
                           "--warmup", "2", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["threads"].split("->")[0], r["batch"]) for r in rows] == [
        ("1", 1), ("1", 3), ("auto", 1), ("auto", 3)]
    for row in rows:
        lat = row["latency_ms"]
        assert row["runs"] >= 5 and row["samples_per_s"] > 0 and row["peak_rss_mb"] > 0
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"]
        assert row["mj_per_sample"] > 0
    assert rows[2]["threads_used"] == int(rows[2]["threads"].split("->")[1])


def test_bench_table_and_bad_arguments(conv_artifact: Path, capsys) -> None:  # noqa: ANN001
    code, out, _ = run_cli(capsys, "bench", str(conv_artifact), "--threads", "1",
                           "--duration", "0", "--runs", "3")
    assert code == 0
    assert "p95 ms" in out and "samples/s" in out and "target rpi4" in out
    code, _, err = run_cli(capsys, "bench", str(conv_artifact), "--threads", "1,many")
    assert code == 2 and "--threads expects" in err and "'many'" in err
    code, _, err = run_cli(capsys, "bench", str(conv_artifact), "--batch", "0")
    assert code == 2 and "--batch expects" in err


def test_run_classifies_real_digit_images(digits_onnx_artifact: Path,
                                          capsys) -> None:  # noqa: ANN001
    images = sorted(SAMPLES.glob("*.png"))
    assert len(images) >= 10
    code, out, _ = run_cli(capsys, "run", str(digits_onnx_artifact), *map(str, images),
                           "--top-k", "3", "--json")
    assert code == 0
    results = json.loads(out)
    correct = sum(Path(r["image"]).name[0] == r["top"][0]["label"] for r in results)
    assert correct >= 0.9 * len(images)  # the trained digits CNN, int8, on real digits
    for r in results:
        probs = [t["probability"] for t in r["top"]]
        assert len(probs) == 3 and probs == sorted(probs, reverse=True)
    # same numbers as the Python API
    with edgekit.load(digits_onnx_artifact) as model:
        scores = model.predict_image(str(images[0]))
    assert results[0]["top"][0]["score"] == pytest.approx(float(scores.max()), rel=1e-5)
    code, out, _ = run_cli(capsys, "run", str(digits_onnx_artifact), str(images[0]))
    assert code == 0 and "1. " + Path(images[0]).name[0] in out


def test_run_missing_image_is_a_user_error(digits_onnx_artifact: Path, tmp_path: Path,
                                           capsys) -> None:  # noqa: ANN001
    (tmp_path / "note.png").write_text("not an image")
    code, _, err = run_cli(capsys, "run", str(digits_onnx_artifact), str(tmp_path / "note.png"))
    assert code == 2 and "not a readable image" in err


def test_doctor_on_a_throttled_pi4_tree(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    root = pi4_tree(tmp_path, throttled="50005")
    code, out, _ = run_cli(capsys, "doctor", "--target", "rpi4", "--root", str(root))
    assert code == 0
    assert "cpu-thermal 52.0 C" in out and "governor ondemand" in out
    assert "0x50005 (under_voltage, throttled" in out
    assert "power state: throttled" in out and "hint: under-voltage" in out
    assert "onnxruntime" in out
    code, out, _ = run_cli(capsys, "doctor", "--target", "rpi4", "--root", str(root), "--json")
    data = json.loads(out)
    assert data["power"]["state"] == "throttled" and data["cpus"]["profile_cores"] == 4
    assert any(r["name"] == "onnxruntime" and r["available"] for r in data["runtimes"])


def test_doctor_without_sensors(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    code, out, _ = run_cli(capsys, "doctor", "--root", str(tmp_path))
    assert code == 0 and "power state: unknown" in out and "thermal       none found" in out


def test_bench_scales_threads_for_every_format(digits_artifact: Path, capsys) -> None:  # noqa: ANN001
    code, out, _ = run_cli(capsys, "bench", str(digits_artifact), "--threads", "1,2",
                           "--duration", "0.05", "--runs", "5", "--warmup", "1", "--json")
    assert code == 0
    rows = json.loads(out)
    assert sorted((r["format"], r["threads"]) for r in rows) == [
        ("onnx", "1"), ("onnx", "2"), ("tflite", "1"), ("tflite", "2")]
    for r in rows:  # 1 thread is the baseline of its format; 2 threads: a measured ratio
        assert r["speedup"] == 1.0 if r["threads"] == "1" else r["speedup"] > 0
