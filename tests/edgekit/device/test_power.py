"""Power-state decoding on fake sysfs trees: a Pi 4, a laptop with a battery, no sensors."""

from __future__ import annotations

from pathlib import Path

import pytest
from edgekit.targets import load_profile

from edgekit.device.power import (
    HOT,
    LOW_BATTERY,
    NORMAL,
    ON_BATTERY,
    THROTTLED,
    UNKNOWN,
    PowerMonitor,
    Thresholds,
    decode_throttled,
    read_power,
)

from ..fake_sysfs import laptop_tree, pi4_tree, put

RPI4 = Thresholds.from_profile(load_profile("rpi4").to_dict())


def test_throttle_bits_decode() -> None:
    assert decode_throttled(0x0) == ()
    assert decode_throttled(0x50005) == ("under_voltage", "throttled", "under_voltage_occurred",
                                         "throttled_occurred")
    assert decode_throttled(0x80008) == ("soft_temp_limit", "soft_temp_limit_occurred")
    assert decode_throttled(0x2) == ("freq_capped",)


def test_pi4_normal(tmp_path: Path) -> None:
    reading = read_power(str(pi4_tree(tmp_path)), RPI4)
    assert reading.state == NORMAL
    assert reading.temperature_c == pytest.approx(52.0)
    assert reading.zones == {"cpu-thermal": pytest.approx(52.0)}
    assert reading.throttle == 0
    assert reading.throttle_source == "sys/devices/platform/soc/soc:firmware/get_throttled"
    assert sorted(reading.cpus) == [0, 1, 2, 3]
    assert reading.cpus[2] == {"scaling_cur_freq": 1500000, "scaling_max_freq": 1500000,
                               "cpuinfo_max_freq": 1500000, "scaling_governor": "ondemand"}
    assert reading.loadavg == pytest.approx(0.42)
    assert reading.on_battery is None
    assert set(reading.sensors) == {"thermal", "cpufreq", "throttle"}


def test_pi4_past_events_only_stay_normal(tmp_path: Path) -> None:
    # 0x50000: under-voltage and throttling happened since boot, but not now
    reading = read_power(str(pi4_tree(tmp_path, throttled="50000")), RPI4)
    assert reading.state == NORMAL
    assert reading.throttle_flags == ("under_voltage_occurred", "throttled_occurred")


@pytest.mark.parametrize("flags, expected, condition", [
    ("50005", THROTTLED, "under_voltage"),
    ("4", THROTTLED, "throttled"),
    ("2", THROTTLED, "freq_capped"),
    ("80008", HOT, "temp_soft_limit"),
])
def test_pi4_throttle_flags(tmp_path: Path, flags: str, expected: str, condition: str) -> None:
    reading = read_power(str(pi4_tree(tmp_path, throttled=flags)), RPI4)
    assert reading.state == expected
    assert condition in reading.conditions


def test_pi4_temperatures_against_profile_limits(tmp_path: Path) -> None:
    assert RPI4.soft_limit_c == 80.0 and RPI4.hard_limit_c == 85.0  # rpi4.toml
    assert read_power(str(pi4_tree(tmp_path / "a", temp_mc=79000)), RPI4).state == NORMAL
    assert read_power(str(pi4_tree(tmp_path / "b", temp_mc=81500)), RPI4).state == HOT
    assert read_power(str(pi4_tree(tmp_path / "c", temp_mc=86000)), RPI4).state == THROTTLED


def test_hot_state_has_hysteresis(tmp_path: Path) -> None:
    root = str(pi4_tree(tmp_path, temp_mc=78000))
    assert read_power(root, RPI4, previous=NORMAL).state == NORMAL
    assert read_power(root, RPI4, previous=HOT).state == HOT  # 78 C: not yet 5 C below
    put(tmp_path, "sys/class/thermal/thermal_zone0/temp", "74000")
    assert read_power(root, RPI4, previous=HOT).state == NORMAL


def test_cpufreq_cap_counts_as_throttled(tmp_path: Path) -> None:
    root = pi4_tree(tmp_path, throttled="0", cur=600000, max_freq=600000)
    reading = read_power(str(root), RPI4)
    assert reading.state == THROTTLED and "cpufreq_capped" in reading.conditions


def test_hwmon_undervoltage_alarm_when_no_firmware_file(tmp_path: Path) -> None:
    root = pi4_tree(tmp_path)
    (root / "sys/devices/platform/soc/soc:firmware/get_throttled").unlink()
    put(root, "sys/class/hwmon/hwmon1/name", "rpi_volt")
    put(root, "sys/class/hwmon/hwmon1/in0_lcrit_alarm", "1")
    reading = read_power(str(root), RPI4)
    assert reading.state == THROTTLED and reading.throttle_flags == ("under_voltage",)


def test_laptop_on_mains_charging(tmp_path: Path) -> None:
    reading = read_power(str(laptop_tree(tmp_path)), RPI4)
    assert reading.state == NORMAL
    assert reading.on_battery is False and reading.battery_pct == 80
    assert reading.zones == {"acpitz": 45.0, "x86_pkg_temp": 51.0}


def test_laptop_on_battery_and_low_battery(tmp_path: Path) -> None:
    on_battery = read_power(str(laptop_tree(tmp_path / "a", 0, "Discharging", 55)), RPI4)
    assert on_battery.state == ON_BATTERY and on_battery.battery_pct == 55
    low = read_power(str(laptop_tree(tmp_path / "b", 0, "Discharging", 12)), RPI4)
    assert low.state == LOW_BATTERY
    # low capacity while charging is not a reason to save power
    charging = read_power(str(laptop_tree(tmp_path / "c", 1, "Charging", 12)), RPI4)
    assert charging.state == NORMAL


def test_no_sensors_is_unknown_not_an_error(tmp_path: Path) -> None:
    reading = read_power(str(tmp_path / "empty"), RPI4)
    assert reading.state == UNKNOWN
    assert reading.sensors == () and reading.temperature_c is None and reading.throttle is None


def test_garbage_sensor_files_are_ignored(tmp_path: Path) -> None:
    put(tmp_path, "sys/class/thermal/thermal_zone0/temp", "not a number")
    put(tmp_path, "sys/class/thermal/thermal_zone1/temp", "-273150")  # disconnected sensor
    put(tmp_path, "sys/devices/platform/soc/soc:firmware/get_throttled", "zz")
    (tmp_path / "sys/class/power_supply/BAT0").mkdir(parents=True)  # no type file
    put(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "")
    reading = read_power(str(tmp_path), RPI4)
    assert reading.state == UNKNOWN and reading.zones == {}


def test_monitor_reports_state_changes_to_listeners(tmp_path: Path) -> None:
    root = laptop_tree(tmp_path)
    monitor = PowerMonitor(str(root), RPI4, interval_s=3600)  # polled by hand here
    changes: list[tuple[str, str]] = []
    monitor.subscribe(lambda old, new: changes.append((old.state, new.state)))
    assert monitor.state == NORMAL
    monitor.poll()
    assert changes == []  # no change, no call
    put(root, "sys/class/power_supply/AC/online", "0")
    put(root, "sys/class/power_supply/BAT0/status", "Discharging")
    monitor.poll()
    put(root, "sys/class/thermal/thermal_zone1/temp", "95000")
    monitor.poll()
    assert changes == [(NORMAL, ON_BATTERY), (ON_BATTERY, THROTTLED)]
    monitor.stop()


def test_vcgencmd_is_preferred_but_only_for_the_real_root(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tool = tmp_path / "bin" / "vcgencmd"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\n[ "$1" = get_throttled ] && echo "throttled=0x80008"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    root = pi4_tree(tmp_path / "root", throttled="0")
    used = read_power(str(root), RPI4, use_vcgencmd=True)
    assert (used.throttle, used.throttle_source, used.state) == (0x80008, "vcgencmd", HOT)
    fake_root = read_power(str(root), RPI4)  # default: a fake tree never runs the real tool
    assert fake_root.throttle == 0 and fake_root.throttle_source.endswith("get_throttled")
