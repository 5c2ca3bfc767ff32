"""The power monitor on hostile sysfs trees: FIFOs, devices, huge files, garbage numbers,
8,000 zones, symlink loops. Every call runs under a watchdog thread: 0 hangs, 0 exceptions."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import edgekit
from edgekit.device import sensors, sysfs
from edgekit.device.power import NORMAL, THROTTLED, UNKNOWN, PowerMonitor, Thresholds, read_power

from ..runtime_models import mlp_onnx, write_model_artifact
from .test_power import RPI4, pi4_tree, put

WATCHDOG_S = 20.0  # far above any honest poll; a blocked open() or read() never returns


def bounded(call: Callable[[], Any], timeout: float = WATCHDOG_S) -> Any:
    """``call()`` on a daemon thread; fail the test if it hangs or raises."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as error:  # report it on the test's thread
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"hung for more than {timeout} s"
    if "error" in box:
        raise AssertionError(f"raised {box['error']!r}") from box["error"]
    return box["value"]


def replace(root: Path, rel: str, make: Callable[[Path], None]) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    make(path)


def fifo(path: Path) -> None:
    os.mkfifo(path)


def dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def huge(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: 512 MiB of zeros without using the disk
        handle.truncate(512 << 20)


CPU0 = "sys/devices/system/cpu/cpu0/cpufreq"
THROTTLE = "sys/devices/platform/soc/soc:firmware/get_throttled"


@pytest.mark.parametrize("make", [fifo, dev_zero, huge], ids=["fifo", "dev_zero", "512MiB"])
def test_special_files_are_never_read(tmp_path: Path, make: Callable[[Path], None]) -> None:
    root = pi4_tree(tmp_path)
    put(root, "sys/class/thermal/thermal_zone1/type", "gpu-thermal")
    for rel in ("sys/class/thermal/thermal_zone1/temp", f"{CPU0}/scaling_max_freq", THROTTLE,
                "proc/loadavg", "sys/class/power_supply/BAT0/capacity"):
        replace(root, rel, make)
    put(root, "sys/class/power_supply/BAT0/type", "Battery")
    tracemalloc.start()
    try:
        reading = bounded(lambda: read_power(str(root), RPI4))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # reading /dev/zero or the 512 MiB file whole would blow this
    assert reading.zones == {"cpu-thermal": 52.0}  # the hostile zone is unknown, not fatal
    assert "scaling_max_freq" not in reading.cpus[0] and reading.cpus[1]["scaling_max_freq"]
    assert reading.throttle is None and reading.state == NORMAL and reading.errors == ()
    assert "capacity" not in reading.supplies[0]


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "-1e400", "NaN", "",
                                  "12abc", "0x5dc", "9" * 5000])
def test_non_finite_and_garbage_numbers_are_unknown(tmp_path: Path, text: str) -> None:
    root = pi4_tree(tmp_path)
    for rel in (f"{CPU0}/scaling_max_freq", f"{CPU0}/cpuinfo_max_freq",
                "sys/class/thermal/thermal_zone0/temp", "proc/loadavg"):
        put(root, rel, text)
    put(root, "sys/class/power_supply/BAT0/type", "Battery")
    put(root, "sys/class/power_supply/BAT0/capacity", text)
    monitor = bounded(lambda: PowerMonitor(str(root), RPI4, interval_s=3600))
    reading = bounded(monitor.poll)
    assert reading.cpus[0] == {"scaling_cur_freq": 1500000, "scaling_governor": "ondemand"}
    assert reading.zones == {} and reading.battery_pct is None and reading.errors == ()
    assert reading.state == NORMAL  # cpufreq of cpus 1-3 still reads: not unknown
    assert monitor.info()["errors"] == 0


@pytest.mark.parametrize("text", ["nan", "-5", "ffffffffff", "9" * 5000, "zz", "0x", ""])
def test_throttle_flags_outside_32_bits_or_garbage_are_unknown(tmp_path: Path,
                                                               text: str) -> None:
    root = pi4_tree(tmp_path)
    put(root, THROTTLE, text)
    reading = bounded(lambda: read_power(str(root), RPI4))
    assert reading.throttle is None and reading.state == NORMAL


@pytest.mark.parametrize("text", ["0", "-5", "-1e400"])
def test_zero_or_negative_frequencies_are_unknown(tmp_path: Path, text: str) -> None:
    root = pi4_tree(tmp_path)
    put(root, f"{CPU0}/cpuinfo_max_freq", text)
    put(root, f"{CPU0}/scaling_max_freq", "600000")  # would read as capped against a real max
    reading = bounded(lambda: read_power(str(root), RPI4))
    assert "cpuinfo_max_freq" not in reading.cpus[0] and reading.state == NORMAL


def test_invalid_bytes_directories_and_odd_paths(tmp_path: Path) -> None:
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "folder").mkdir()
    (tmp_path / "page").write_text("1" * sysfs.MAX_ATTRIBUTE_BYTES)
    (tmp_path / "page_and_one").write_text("1" * (sysfs.MAX_ATTRIBUTE_BYTES + 1))
    assert sysfs.read_text(str(tmp_path / "binary")) is None
    assert sysfs.read_text(str(tmp_path / "folder")) is None
    assert sysfs.read_text(str(tmp_path / "page")) == "1" * sysfs.MAX_ATTRIBUTE_BYTES
    assert sysfs.read_text(str(tmp_path / "page_and_one")) is None
    assert sysfs.read_text(str(tmp_path / "with\0nul")) is None
    assert sysfs.finite("1e400") is None and sysfs.finite("nan") is None
    assert sysfs.finite(" 42\n") == 42.0


def test_symlink_loops_and_real_sysfs_symlinks(tmp_path: Path) -> None:
    root = tmp_path
    # real sysfs: class entries are symlinks into /sys/devices; these must still be read
    put(root, "sys/devices/virtual/thermal/thermal_zone0/type", "cpu-thermal")
    put(root, "sys/devices/virtual/thermal/thermal_zone0/temp", "61000")
    thermal = root / "sys/class/thermal"
    thermal.mkdir(parents=True)
    (thermal / "thermal_zone0").symlink_to("../../devices/virtual/thermal/thermal_zone0")
    (thermal / "thermal_zone1").symlink_to("thermal_zone1")  # loop on itself
    (thermal / "thermal_zone2").symlink_to("thermal_zone3")  # two-step loop
    (thermal / "thermal_zone3").symlink_to("thermal_zone2")
    (thermal / "thermal_zone4").mkdir()
    (thermal / "thermal_zone4/temp").symlink_to("temp")  # a file that is a loop
    (thermal / "thermal_zone5").symlink_to(".")  # a folder loop: zone5/zone5/... forever
    (root / "sys/class/power_supply").symlink_to("power_supply")
    cpu = root / "sys/devices/system/cpu/cpu0"
    cpu.mkdir(parents=True)
    (cpu / "cpufreq").symlink_to("../cpu0")
    (root / "sys/devices/platform").mkdir(parents=True)
    (root / "sys/devices/platform/soc").symlink_to(".")  # platform/soc/soc/... is a loop
    (root / "proc").symlink_to("proc")
    reading = bounded(lambda: read_power(str(root), RPI4))
    assert reading.zones == {"cpu-thermal": 61.0}
    assert reading.errors == () and reading.state == NORMAL
    assert reading.cpus == {} and reading.supplies == () and reading.throttle is None


def many_zones(root: Path, count: int, kind: str = "acpitz") -> Path:
    base = root / "sys/class/thermal"
    for i in range(count):
        zone = base / f"thermal_zone{i}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(kind + "\n")
        (zone / "temp").write_text("45000\n")
    return root


def test_8000_zones_cost_a_bounded_number_of_reads(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = many_zones(tmp_path, 8000)
    put(root, "sys/class/thermal/thermal_zone7999/temp", "99000")  # beyond the cap: unseen
    calls = {"n": 0}
    real_read = sensors.read_text

    def counting(path: str) -> str | None:
        calls["n"] += 1
        return real_read(path)

    monkeypatch.setattr(sensors, "read_text", counting)
    reading = bounded(lambda: read_power(str(root), RPI4))
    cap = sysfs.MAX_ENTRIES
    assert len(reading.zones) == cap and reading.skipped == 8000 - cap
    assert calls["n"] <= 2 * cap + 16  # two files per kept zone, whatever the zone count
    assert list(reading.zones)[:3] == ["acpitz", "acpitz#2", "acpitz#3"]  # zone0 first
    assert reading.state == NORMAL  # the time it takes: tools/benchmarks/bench_power.py (no wall-clock bound here)


def test_zone_naming_is_linear_and_unique(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    lookups = {"n": 0}

    class Counting(dict):  # counts every "is this name taken?" test
        def __contains__(self, key: object) -> bool:
            lookups["n"] += 1
            return super().__contains__(key)

    taken: Counting = Counting()
    suffixes: dict[str, int] = {}
    for name in ["acpitz#3", "acpitz#2"] + ["acpitz"] * 8000:  # collide with generated names
        key = sensors.unique_name(name, taken, suffixes)
        assert key not in taken
        taken[key] = 45.0
    assert len(taken) == 8002 and "acpitz#8002" in taken and "acpitz#8003" not in taken
    assert lookups["n"] <= 4 * 8002  # the quadratic naming did ~n²/2 = 32 million
    # and through the reader, with the listing cap lifted: every zone named once
    monkeypatch.setattr(sysfs, "MAX_ENTRIES", 10_000)
    zones, skipped = bounded(lambda: sensors.read_thermal(str(many_zones(tmp_path, 1000))))
    assert skipped == 0 and len(zones) == 1000 and "acpitz#1000" in zones


def test_poller_survives_any_exception_and_records_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = pi4_tree(tmp_path)
    monitor = PowerMonitor(str(root), RPI4, interval_s=0.05)
    failures = {"left": 3}
    real_read_power = read_power

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("transient sensor bug")
        return real_read_power(*args, **kwargs)

    monkeypatch.setattr("edgekit.device.power.read_power", flaky)
    monitor.start()
    try:
        put(root, "sys/class/thermal/thermal_zone0/temp", "nan")  # a transient nan on disk
        deadline = time.monotonic() + WATCHDOG_S
        while failures["left"] and time.monotonic() < deadline:
            time.sleep(0.02)
        put(root, "sys/class/thermal/thermal_zone0/temp", "90000")  # then a real reading
        while monitor.state != THROTTLED and time.monotonic() < deadline:
            time.sleep(0.02)
        info = monitor.info()
        assert monitor.state == THROTTLED and info["running"]
        assert info["errors"] == 3 and "RuntimeError: transient sensor bug" in info["last_error"]
    finally:
        monitor.stop()


def test_a_failing_sensor_group_is_recorded_and_the_others_still_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = pi4_tree(tmp_path, temp_mc=90000)

    def broken(*args: Any) -> Any:
        raise MemoryError("driver returned nonsense")

    monkeypatch.setattr("edgekit.device.power.read_supplies", broken)
    monitor = PowerMonitor(str(root), RPI4, interval_s=3600)
    reading = bounded(monitor.poll)
    assert reading.state == THROTTLED  # thermal still decided it
    assert reading.errors == ("power_supply: MemoryError: driver returned nonsense",)
    assert monitor.info()["errors"] == 2  # the first poll in __init__, and this one
    monitor.subscribe(lambda old, new: 1 / 0)
    put(root, "sys/class/thermal/thermal_zone0/temp", "50000")
    assert bounded(monitor.poll).state == NORMAL  # the listener's ZeroDivisionError is counted
    assert monitor.info()["errors"] == 4 and "ZeroDivisionError" in monitor.info()["last_error"]


def test_garbage_thresholds_and_interval_fall_back_to_defaults(tmp_path: Path) -> None:
    for thermal in ({"soft_limit_c": float("nan"), "hard_limit_c": "hot"},
                    {"soft_limit_c": True, "hard_limit_c": [1]}, "not a table"):
        assert Thresholds.from_profile({"thermal": thermal}) == Thresholds()
    assert Thresholds.from_profile(None) == Thresholds()
    for interval in (float("nan"), float("inf"), -1.0, 0.0):
        monitor = PowerMonitor(str(tmp_path), interval_s=interval)
        assert 0.05 <= monitor.interval_s <= 2.0 and monitor.state == UNKNOWN


def test_submit_and_stats_on_a_hostile_tree_through_a_real_model(tmp_path: Path) -> None:
    """The adversarial run's symptom: a FIFO blocked submit() and stats() forever, and nan in
    scaling_max_freq raised from submit(). A real model, a real batcher, a hostile root."""
    artifact = write_model_artifact(tmp_path / "mlp.edgekit", mlp_onnx(), ["N", 16])
    root = pi4_tree(tmp_path / "root")
    replace(root, "sys/class/thermal/thermal_zone0/temp", fifo)
    replace(root, THROTTLE, dev_zero)
    put(root, f"{CPU0}/scaling_max_freq", "nan")
    put(root, f"{CPU0}/cpuinfo_max_freq", "1e400")
    x = np.random.default_rng(0).normal(0, 1, (3, 16)).astype(np.float32)

    def run() -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        with edgekit.load(artifact, threads=1, power_root=str(root)) as model:
            expected = model.predict(x)
            got = np.concatenate([model.submit(x[i:i + 1]).result(timeout=WATCHDOG_S)
                                  for i in range(len(x))])
            return expected, got, model.stats()

    expected, got, stats = bounded(run)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert stats["power"]["state"] == NORMAL and "thermal" not in stats["power"]["sensors"]
