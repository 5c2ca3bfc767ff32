"""``edgekit bench --soak``: the model run for a while on a fake Pi 4 tree that heats as the
load runs (a heater thread turns this process's CPU time into degrees, and past the
profile's 80 C soft limit sets the firmware's throttle bits and drops the CPU clock to
1000 MHz, as a Pi 4 in a case does); the per-interval table, the plot and the summary."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgekit.cli import main

from .fake_sysfs import pi4_tree
from .test_power_sensors import ina_tree

HOT_C = 80.0  # the rpi4 profile's soft limit: the firmware starts stepping the clock down


class Heater:
    """Heats the fake tree by ``c_per_cpu_s`` degrees per CPU second this process uses
    (from 70 C: a full core reaches HOT_C in 0.5 s, a quarter of one in 2 s; the machine
    running the tests is shared), cooling slowly towards 45 C; throttled past HOT_C (get_throttled 0x60006: frequency capped and
    throttled, now and since boot; scaling_cur_freq 1000000 kHz)."""

    def __init__(self, root: Path, start_c: float = 70.0, c_per_cpu_s: float = 20.0) -> None:
        self.root, self.temp, self.rate = root, start_c, c_per_cpu_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.throttled_at: float | None = None
        self._write()

    def _put(self, rel: str, text: str) -> None:
        """Replace a file whole (a reader never sees it half written, as with sysfs)."""
        path = self.root / rel
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, path)

    def _write(self) -> None:
        hot = self.temp >= HOT_C
        self._put("sys/class/thermal/thermal_zone0/temp", str(int(self.temp * 1000)))
        self._put("sys/devices/platform/soc/soc:firmware/get_throttled", "60006" if hot else "0")
        for cpu in range(4):
            self._put(f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq",
                      "1000000" if hot else "1500000")

    def _loop(self) -> None:
        last = sum(os.times()[:2])
        while not self.stop.wait(0.02):
            now = sum(os.times()[:2])
            self.temp += self.rate * (now - last) - 0.0005 * (self.temp - 45.0)
            last = now
            self._write()


@pytest.fixture
def heating_pi4(tmp_path: Path) -> Iterator[Path]:
    root = pi4_tree(tmp_path / "pi4", temp_mc=70000)
    heater = Heater(root)
    heater.thread.start()
    yield root
    heater.stop.set()
    heater.thread.join()


def soak(capsys: pytest.CaptureFixture[str], artifact: Path, root: Path, plot: Path,
         *extra: str) -> dict:
    code = main(["bench", str(artifact), "--soak", "3", "--interval", "0.25", "--threads", "1",
                 "--backend", "onnxruntime", "--root", str(root), "--plot", str(plot),
                 "--warmup", "1", "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_the_soak_sees_the_board_heat_and_throttle(digits_artifact: Path, heating_pi4: Path,
                                                   tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "soak.svg"
    report = soak(capsys, digits_artifact, heating_pi4, plot)
    intervals, summary = report["intervals"], report["summary"]
    # the machine running the tests is shared: an interval may pass with the process starved
    assert len(intervals) >= 11 and sum(i["runs"] > 0 for i in intervals) >= len(intervals) - 2
    temps = [i["temperature_c"] for i in intervals]
    assert temps[-1] > temps[0] + 5 and max(temps) >= HOT_C
    first = next(i for i in intervals if i["throttling"])
    assert first["throttle"] == "0x60006" and "throttled" in first["throttle_flags"]
    assert first["cpu_mhz"] == 1000.0 and intervals[0]["cpu_mhz"] == 1500.0
    assert not intervals[0]["throttling"] and intervals[0]["throttle"] == "0x0"
    assert summary["throttling_seen_at_s"] == first["end_s"]
    assert summary["min_cpu_mhz"] == 1000.0 and summary["max_temperature_c"] == max(temps)
    timed = [i for i in intervals if i["p95_ms"] is not None]
    quarter = -(-len(timed) // 4)
    tail = sorted(i["p95_ms"] for i in timed[-quarter:])
    assert summary["settled_p95_ms"] == pytest.approx(tail[len(tail) // 2] if len(tail) % 2
                                                      else sum(tail[len(tail) // 2 - 1:][:2]) / 2,
                                                      abs=1e-4)
    assert summary["settled_from_s"] == timed[-quarter]["start_s"]
    assert all(i["energy_source"] == "modelled" and i["mj_per_sample"] > 0 for i in timed)
    svg = plot.read_text()
    assert svg.startswith("<svg") and 'class="marker"' in svg
    for series in ("p50 ms", "p95 ms", "p99 ms"):
        assert len(re.findall(f'data-series="{series}"', svg)) == len(timed)
    assert len(re.findall('data-series="temp C"', svg)) == len(intervals)
    assert f'data-y="{temps[-1]:g}"' in svg


def test_the_table_and_summary_lines(digits_artifact: Path, heating_pi4: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", str(digits_artifact), "--soak", "1.5", "--interval", "0.5",
                 "--threads", "1", "--backend", "onnxruntime", "--root", str(heating_pi4),
                 "--plot", str(tmp_path / "p.svg"), "--warmup", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "p95 ms" in out and "temp C" in out and "CPU MHz" in out
    assert len(re.findall(r"^\s+\d+\.\d\s+\d+\.\d\s+\d+ ", out, re.M)) == 3
    assert "settled p95 " in out and "throttling: " in out and f"plot: {tmp_path}" in out


def test_a_fixed_rate_and_measured_energy(digits_artifact: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = ina_tree(tmp_path / "ina", microwatts=4000000)
    report = soak(capsys, digits_artifact, root, tmp_path / "r.svg", "--rate", "40")
    runs = sum(i["runs"] for i in report["intervals"])
    assert 100 <= runs <= 125  # 40/s for 3 s
    assert report["summary"]["throttling_seen_at_s"] is None
    assert {i["energy_source"] for i in report["intervals"]} == {
        "hwmon ina226 (hwmon2/power1_input)"}
    # 4 W over each run's seconds: mJ per sample = 4 W x the runs' mean milliseconds
    for i in report["intervals"]:
        if i["runs"]:
            assert 4.0 * i["p50_ms"] * 0.5 <= i["mj_per_sample"] <= 4.0 * i["p99_ms"] * 3
