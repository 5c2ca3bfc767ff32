"""Measured power (edgekit/device/power_sensors.py, edgekit/device/energy.py): a fake hwmon tree in the
kernel's file formats and a fake ``vcgencmd`` on PATH printing a real Pi 5
``pmic_read_adc`` output; ``stats()`` reports measured energy and names the sensor, and
without one says "modelled"; ``edgekit doctor`` lists what it found.

The kernel's hwmon ABI (Documentation/hwmon/sysfs-interface.rst), the units these files
hold::

    in[0-*]_input      Voltage input value.        Unit: millivolt
    curr[1-*]_input    Current input value.        Unit: milliampere
    power[1-*]_input   Instantaneous power use.    Unit: microWatt

(the ina2xx driver: ``in0`` the shunt voltage, ``in1`` the bus voltage, ``curr1``, ``power1``;
``name`` holds the chip, e.g. ``ina226``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from edgekit.targets import PowerModel, load_profile

import edgekit
from edgekit.commands.doctor import command as doctor_command
from edgekit.device.energy import MeasuredPower, PowerMeter
from edgekit.device.power_sensors import find_sensors, parse_pmic, pmic_watts

from ..fake_sysfs import pi4_tree, put

# `vcgencmd pmic_read_adc` on a Raspberry Pi 5 (firmware 2024), as printed: 12 currents,
# 12 voltages, EXT5V_V and BATT_V without a current
PMIC_OUTPUT = """\
 3V7_WL_SW_A current(0)=0.10247270A
   3V3_SYS_A current(1)=0.10832820A
   1V8_SYS_A current(2)=0.15712470A
  DDR_VDD2_A current(3)=0.00585558A
  DDR_VDDQ_A current(4)=0.00000000A
   1V1_SYS_A current(5)=0.24105470A
    0V8_SW_A current(6)=0.31424950A
  VDD_CORE_A current(7)=1.42880000A
   3V3_DAC_A current(17)=0.00000000A
   3V3_ADC_A current(18)=0.00006105A
   0V8_AON_A current(16)=0.00354090A
      HDMI_A current(22)=0.02002440A
 3V7_WL_SW_V volt(8)=3.71091200V
   3V3_SYS_V volt(9)=3.30910500V
   1V8_SYS_V volt(10)=1.80073100V
  DDR_VDD2_V volt(11)=1.10439400V
  DDR_VDDQ_V volt(12)=0.60439500V
   1V1_SYS_V volt(13)=1.10805800V
    0V8_SW_V volt(14)=0.80402850V
  VDD_CORE_V volt(15)=0.90659250V
   3V3_DAC_V volt(20)=3.31135200V
   3V3_ADC_V volt(21)=3.31867800V
   0V8_AON_V volt(19)=0.79882700V
      HDMI_V volt(23)=5.07860000V
     EXT5V_V volt(24)=5.05716000V
      BATT_V volt(25)=0.00000000V
"""
# the same rails, V x I by hand: 3V7_WL_SW 0.38027, 3V3_SYS 0.35847, 1V8_SYS 0.28294,
# DDR_VDD2 0.00647, DDR_VDDQ 0, 1V1_SYS 0.26710, 0V8_SW 0.25267, VDD_CORE 1.29534,
# 3V3_DAC 0, 3V3_ADC 0.00020, 0V8_AON 0.00283, HDMI 0.10170
PMIC_WATTS = 2.94799


def ina_tree(root: Path, microwatts: int | None = 4200000, milliamps: int = 840,
             millivolts: int = 5000, chip: str = "ina226", number: int = 2) -> Path:
    """A Pi 4 with an INA2xx on I2C as hwmon<number>, after other hwmon devices."""
    pi4_tree(root)
    put(root, "sys/class/hwmon/hwmon0/name", "cpu_thermal")
    put(root, "sys/class/hwmon/hwmon0/temp1_input", "52000")
    put(root, "sys/class/hwmon/hwmon1/name", "rpi_volt")
    put(root, "sys/class/hwmon/hwmon1/in0_lcrit_alarm", "0")
    base = f"sys/class/hwmon/hwmon{number}"
    put(root, f"{base}/name", chip)
    put(root, f"{base}/in0_input", "2")  # shunt voltage, mV
    put(root, f"{base}/in1_input", str(millivolts))  # bus voltage, mV
    put(root, f"{base}/curr1_input", str(milliamps))  # mA
    if microwatts is not None:
        put(root, f"{base}/power1_input", str(microwatts))  # uW
    return root


def fake_vcgencmd(folder: Path, output: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pmic.txt").write_text(output)
    script = folder / "vcgencmd"
    script.write_text(f'#!/bin/sh\ncase "$1" in\n  pmic_read_adc) cat "{folder}/pmic.txt" ;;\n'
                      '  get_throttled) echo "throttled=0x0" ;;\n  *) exit 1 ;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def run_digits(artifact: Path, root: Path, calls: int = 60, **options: object
               ) -> edgekit.Model:
    with np.load(Path(__file__).parents[3] / "examples/raspberrypi/digits.npz") as npz:
        x = npz["x"].astype(np.float32)
    model = edgekit.load(artifact, backend="onnxruntime", threads=1, power_root=str(root),
                         **options)
    for i in range(calls):  # run_feeds records every run (predict times 1 in 16 of fast ones)
        model.run_feeds(model.prepare_feeds(x[i % len(x):i % len(x) + 1]))
    return model


def busy_per_sample(model: edgekit.Model) -> float:
    window = model.session.recorder.window()
    return float((window["seconds"] * window["weight"]).sum()
                 / (window["rows"] * window["weight"]).sum())


def test_an_ina226_is_found_by_name_and_read_in_watts(tmp_path: Path) -> None:
    [sensor] = find_sensors(str(ina_tree(tmp_path)))
    assert (sensor.kind, sensor.name, sensor.method) == ("hwmon", "ina226", "power1_input")
    assert sensor.read_watts() == pytest.approx(4.2)  # 4200000 uW
    assert sensor.source == "hwmon ina226 (hwmon2/power1_input)"


def test_an_ina219_without_power_is_current_times_voltage(tmp_path: Path) -> None:
    root = ina_tree(tmp_path, microwatts=None, milliamps=850, millivolts=5100, chip="ina219")
    [sensor] = find_sensors(str(root))
    assert sensor.method == "curr1_input x in1_input"
    assert sensor.read_watts() == pytest.approx(0.850 * 5.100)


def test_stats_report_measured_energy_and_name_the_sensor(digits_artifact: Path,
                                                          tmp_path: Path) -> None:
    root = ina_tree(tmp_path, microwatts=2000000)  # 2 W while the first runs are made
    model = run_digits(digits_artifact, root)
    meter = model.meter
    assert meter is not None
    meter.sample()
    first = busy_per_sample(model)
    put(root, "sys/class/hwmon/hwmon2/power1_input", "8000000")  # 8 W from now on
    meter.sample()
    for _ in range(4):  # more runs, at 8 W
        model.run_feeds(model.prepare_feeds(np.ones((1, 1, 8, 8), np.float32)))
    meter.sample()
    stats = model.stats()
    model.close()
    window = model.session.recorder.window()
    seconds = window["seconds"] * window["weight"]
    expected = (2.0 * seconds[:60].sum() + 8.0 * seconds[60:].sum()) / 64
    assert stats["energy_source"] == "hwmon ina226 (hwmon2/power1_input)"
    assert stats["energy_j_per_sample"] == pytest.approx(expected, rel=1e-6)
    assert stats["power_sensor"]["sensor"] == "ina226" and stats["power_sensor"]["samples"] >= 4
    assert first > 0


def test_no_sensor_is_modelled(digits_artifact: Path, tmp_path: Path) -> None:
    model = run_digits(digits_artifact, pi4_tree(tmp_path))
    stats = model.stats()
    model.close()
    assert model.meter is None and "power_sensor" not in stats
    assert stats["energy_source"] == "modelled"
    watts = PowerModel.from_profile(load_profile("rpi4")).watts(1)
    assert stats["energy_j_per_sample"] == pytest.approx(watts * busy_per_sample(model),
                                                         rel=1e-6)
    # power_sensor="none" leaves even a present INA226 alone
    model = run_digits(digits_artifact, ina_tree(tmp_path / "ina"), power_sensor="none")
    assert model.stats()["energy_source"] == "modelled"
    model.close()


def test_pmic_read_adc_sums_the_paired_rails_in_both_formats() -> None:
    rails = parse_pmic(PMIC_OUTPUT)
    assert len(rails) == 14 and rails["EXT5V"] == {"V": 5.05716}
    assert pmic_watts(PMIC_OUTPUT) == pytest.approx(PMIC_WATTS, abs=1e-4)
    older = "VDD_CORE_A=1.2340A\nVDD_CORE_V=0.8750V\nEXT5V_V=5.1200V\n"  # older firmware
    assert pmic_watts(older) == pytest.approx(1.2340 * 0.8750)
    assert pmic_watts('error=1 error_msg="Command not registered"\n') is None


def test_a_pi5_pmic_through_vcgencmd(digits_artifact: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = fake_vcgencmd(tmp_path / "bin", PMIC_OUTPUT)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    root = pi4_tree(tmp_path / "root")
    # a fake tree never runs vcgencmd by itself ...
    model = run_digits(digits_artifact, root)
    assert model.stats()["energy_source"] == "modelled"
    model.close()
    # ... asked to, it measures with it
    model = run_digits(digits_artifact, root, power_sensor="vcgencmd")
    stats = model.stats()
    model.close()
    assert stats["energy_source"] == ("vcgencmd pmic_read_adc (sum of rail V x I, no loss "
                                      "correction)")
    assert stats["energy_j_per_sample"] == pytest.approx(PMIC_WATTS * busy_per_sample(model),
                                                         rel=1e-3)


def test_doctor_lists_the_sensors(tmp_path: Path) -> None:
    result = CliRunner().invoke(doctor_command, ["--root", str(ina_tree(tmp_path))])
    assert result.exit_code == 0, result.output
    assert ("power         hwmon ina226 (hwmon2/power1_input): 4.200 W (used for measured "
            "energy)") in result.output
    bare = CliRunner().invoke(doctor_command, ["--root", str(pi4_tree(tmp_path / "pi4"))])
    assert "power         no sensor found" in bare.output and "modelled" in bare.output


def test_the_tuner_reads_measured_watts_per_thread_count(tmp_path: Path) -> None:
    root = ina_tree(tmp_path, microwatts=3000000)
    [sensor] = find_sensors(str(root))
    now = [100.0]
    meter = PowerMeter(sensor, clock=lambda: now[0])  # one sample at t=100: 3 W
    for t, microwatts in ((101.05, 3500000), (102.05, 5000000), (103.5, 9000000)):
        put(root, "sys/class/hwmon/hwmon2/power1_input", str(microwatts))
        now[0] = t
        meter.sample()
    # runs [101, 101.1] at 1 thread, [102, 102.1] at 2 threads; 103.5 falls in no run
    window = {"end": np.array([101.1, 102.1]), "seconds": np.array([0.1, 0.1]),
              "rows": np.array([1, 1]), "threads": np.array([1, 2]),
              "weight": np.array([1, 1])}
    model = PowerModel(idle_w=2.7, full_load_w=6.4, cores=4)
    measured = MeasuredPower(model, meter, lambda: window)
    assert measured.measured() == {1: pytest.approx(3.5), 2: pytest.approx(5.0)}
    assert measured.energy_j(2, 0.01) == pytest.approx(0.05)
    ratio = (3.5 / model.watts(1) + 5.0 / model.watts(2)) / 2
    assert measured.watts(4) == pytest.approx(model.watts(4) * ratio)


def test_measured_watts_near_the_supply_rating_save_power(tmp_path: Path) -> None:
    from edgekit.adapt.policy import state_policy
    from edgekit.batching.batch_policy import batch_policy
    from edgekit.device.power import NORMAL, POWER_LIMIT, Thresholds, read_power

    root = pi4_tree(tmp_path)
    limits = Thresholds(supply_w=15.0)  # the rpi4 profile's official 5.1 V 3 A supply
    assert read_power(str(root), limits, watts=lambda: 13.0).state == NORMAL  # 87%
    high = read_power(str(root), limits, watts=lambda: 14.0)  # 93%
    assert high.state == POWER_LIMIT and "supply_limit" in high.conditions
    assert high.watts == 14.0 and "power" in high.sensors
    # hysteresis: once limited, 87% still is; 80% is not
    assert read_power(str(root), limits, POWER_LIMIT, watts=lambda: 13.0).state == POWER_LIMIT
    assert read_power(str(root), limits, POWER_LIMIT, watts=lambda: 12.0).state == NORMAL
    # the batcher batches twice as much, the tuner keeps half the threads, as when hot
    assert batch_policy(POWER_LIMIT, "balanced", 8, None, 0.1).max_batch == 16
    assert state_policy("latency", POWER_LIMIT, [1, 2, 3, 4]) == ("efficiency", [1, 2])


def test_a_model_on_a_board_at_its_supply_limit(digits_artifact: Path, tmp_path: Path) -> None:
    root = ina_tree(tmp_path, microwatts=14000000)  # 14 W of a 15 W supply
    with np.load(Path(__file__).parents[3] / "examples/raspberrypi/digits.npz") as npz:
        x = npz["x"][:4].astype(np.float32)
    with edgekit.load(digits_artifact, backend="onnxruntime", threads=1,
                      power_root=str(root)) as model:
        assert model.submit(x[:1]).result(timeout=30).shape == (1, 10)
        stats = model.stats()
    assert stats["batcher"]["state"] == "power_limit"
    assert stats["power"]["state"] == "power_limit" and stats["power"]["watts"] == 14.0
