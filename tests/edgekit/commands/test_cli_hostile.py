"""Hostile CLI values (issue 36, defect 8): thread counts capped at the machine's CPUs (LiteRT
segfaulted at 100,000; a 21-digit count dumped the model in a 457 KB error), PIL's
decompression bomb and special files typed and refused up front, NaN/inf durations and an
absurd batch refused, an empty calibration file a typed error."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from ...conftest import DIGITS_ONNX, EXAMPLE

DIGITS = EXAMPLE / "digits.rpi4.edgekit"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def digit_png(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PIL import Image

    path = tmp_path_factory.mktemp("img") / "digit.png"
    Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8) * 4).save(path)
    return path


def png_claiming(path: Path, width: int, height: int) -> Path:
    """A PNG whose IHDR claims ``width`` x ``height`` (its CRC fixed): a few dozen bytes."""
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    idat = b"IDAT" + zlib.compress(b"\0" * 64)
    data = (b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", len(idat) - 4) + idat
            + struct.pack(">I", zlib.crc32(idat)) + struct.pack(">I", 0) + b"IEND"
            + struct.pack(">I", zlib.crc32(b"IEND")))
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("backend", ["litert", "onnxruntime"])
def test_run_caps_a_huge_thread_count(digit_png: Path, backend: str) -> None:
    proc = cli("run", str(DIGITS), str(digit_png), "--threads", "100000", "--backend", backend)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usable CPU" in proc.stderr and "using" in proc.stderr


@pytest.mark.parametrize("value", ["100000000000000000000", "1e20", "\u00b2", "-1", "two"])
def test_run_refuses_a_bad_thread_count_briefly(digit_png: Path, value: str) -> None:
    proc = cli("run", str(DIGITS), str(digit_png), "--threads", value)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--threads" in proc.stderr and len(proc.stderr) < 2000


def test_the_library_refuses_an_absurd_thread_count() -> None:
    import edgekit
    from edgekit.errors import UserError

    with pytest.raises(UserError, match="threads must be"):
        edgekit.load(DIGITS, threads=100000)
    with pytest.raises(UserError, match="threads must be"):
        edgekit.load(DIGITS, threads=10 ** 20)


@pytest.mark.parametrize("side", [100000, 12000])  # PIL raises past 179 MP, only warns below
def test_run_on_a_decompression_bomb_is_typed(tmp_path: Path, side: int) -> None:
    bomb = png_claiming(tmp_path / "bomb.png", side, side)
    proc = cli("run", str(DIGITS), str(bomb))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "decompression bomb" in proc.stderr.lower() and "internal" not in proc.stderr


def test_run_refuses_a_fifo_up_front(tmp_path: Path) -> None:
    fifo = tmp_path / "camera.png"
    os.mkfifo(fifo)
    proc = cli("run", str(DIGITS), str(fifo), timeout=60)  # hung forever before
    assert proc.returncode == 2 and "special file" in proc.stderr, proc.stderr[-2000:]


def test_predict_image_refuses_a_fifo(tmp_path: Path) -> None:
    import edgekit
    from edgekit.errors import UserError

    fifo = tmp_path / "frame.png"
    os.mkfifo(fifo)
    with edgekit.load(DIGITS, threads=1) as model, pytest.raises(UserError, match="special"):
        model.predict_image(fifo)


@pytest.mark.parametrize("duration", ["nan", "inf", "-1", "1e400"])
def test_bench_refuses_a_non_finite_duration(duration: str) -> None:
    proc = cli("bench", str(DIGITS), "--duration", duration, timeout=60)
    assert proc.returncode == 2 and "--duration" in proc.stderr, proc.stderr[-2000:]


def test_bench_refuses_a_batch_past_the_ram() -> None:
    proc = cli("bench", str(DIGITS), "--batch", "100000000", "--duration", "0", timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--batch 100000000" in proc.stderr and "at most --batch" in proc.stderr


def test_bench_caps_a_huge_thread_count() -> None:
    proc = cli("bench", str(DIGITS), "--threads", "100000", "--duration", "0", "--warmup",
               "0", "--backend", "litert", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usable CPU" in proc.stderr


def test_build_with_an_empty_calibration_file_is_typed(tmp_path: Path) -> None:
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    proc = cli("build", "--target", "rpi4", str(DIGITS_ONNX), "--calib", str(empty), "-o",
               str(tmp_path / "out.edgekit"), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "not a readable .npz" in proc.stderr
