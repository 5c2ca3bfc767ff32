"""Every read of the system bounded and non-blocking (issue 36, defect 4): ``proc/stat``
under a hostile fake tree (a FIFO, /dev/zero, a 512 MiB file, garbage) never hangs
``edgekit.load(threads="auto")`` nor costs memory; the auto probe never allocates what an
untrusted manifest shape asks for."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import edgekit
from edgekit.device import sysfs
from edgekit.errors import UserError
from edgekit.runtime.stats import BusyMeter, busy_seconds

from ..fake_sysfs import pi4_tree, put
from ..runtime_models import mlp_onnx, write_model_artifact
from .test_power_hostile import bounded

PROC_STAT = "cpu  2255 34 2290 22625563 6290 127 456 0 0 0\ncpu0 1132 34 1441 11311718 3675 127 438 0 0 0\n"


def fifo(path: Path) -> None:
    os.mkfifo(path)


def dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def huge(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: 512 MiB that costs no disk
        handle.write(PROC_STAT.encode())
        handle.truncate(512 << 20)


def garbage(path: Path) -> None:
    path.write_bytes(b"\xff\xfe cpu nan inf -1\n")


HOSTILE: dict[str, Callable[[Path], None]] = {"fifo": fifo, "dev_zero": dev_zero,
                                              "huge": huge, "garbage": garbage}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_proc_stat_is_read_bounded(tmp_path: Path, kind: str) -> None:
    root = pi4_tree(tmp_path)
    (root / "proc").mkdir(exist_ok=True)
    HOSTILE[kind](root / "proc/stat")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    assert bounded(lambda: busy_seconds(str(root / "proc/stat")), timeout=10) is None
    assert bounded(lambda: BusyMeter(str(root)).read(), timeout=10) is None
    assert time.perf_counter() - t0 < 2.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 << 10  # kB


def test_a_well_formed_proc_stat_still_reads(tmp_path: Path) -> None:
    put(tmp_path, "proc/stat", PROC_STAT.strip())
    assert busy_seconds(str(tmp_path / "proc/stat")) == pytest.approx(
        (2255 + 34 + 2290 + 127 + 456 + 0) / os.sysconf("SC_CLK_TCK"))


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "huge"])
def test_auto_threads_load_under_a_hostile_proc_stat(tmp_path: Path, kind: str) -> None:
    root = pi4_tree(tmp_path / "root")
    HOSTILE[kind](root / "proc/stat")
    path = write_model_artifact(tmp_path / "m.edgekit", mlp_onnx(), ["N", 16])

    def load_and_predict() -> int:
        with edgekit.load(path, threads="auto", power_root=str(root),
                          tuner={"budget_s": 0.2}) as model:
            return model.threads

    assert bounded(load_and_predict, timeout=30) >= 1


def test_a_read_that_stalls_gives_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A regular file whose read blocks (a hung network mount) cannot stall the caller."""
    put(tmp_path, "proc/stat", PROC_STAT.strip())
    release = __import__("threading").Event()

    def stalled(path: str, limit: int = 0) -> str:
        release.wait(10)
        return PROC_STAT

    monkeypatch.setattr(sysfs, "read_text", stalled)
    t0 = time.perf_counter()
    assert sysfs.read_text_within(str(tmp_path / "proc/stat"), timeout_s=0.2) is None
    assert time.perf_counter() - t0 < 1.0
    release.set()


def test_the_auto_probe_never_allocates_an_untrusted_shape(tmp_path: Path) -> None:
    """1x1x46341x46341 float32 is 8 GiB: the probe refuses it by name, allocating nothing."""
    path = write_model_artifact(tmp_path / "big.edgekit", mlp_onnx(),
                                [1, 1, 46341, 46341])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(UserError, match="'x'"):
        edgekit.load(path, threads="auto", power_root=str(pi4_tree(tmp_path / "root")),
                     tuner={"budget_s": 0.2})
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 << 10
