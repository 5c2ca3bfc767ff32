"""Measured board power: hwmon power monitors (INA219/INA226/INA260...) and the Pi 5's PMIC.

hwmon units (Linux ``Documentation/hwmon/sysfs-interface.rst``)::

    power[1-*]_input   Instantaneous power use.   Unit: microWatt
    curr[1-*]_input    Current input value.       Unit: milliampere
    in[0-*]_input      Voltage input value.       Unit: millivolt

The ina2xx driver names the chip in ``name`` (hwmon numbers change across reboots, so a
device is found by it), reports the bus voltage as ``in1`` (``in0`` is the shunt voltage),
the current as ``curr1`` and the power as ``power1``. Watts: ``power1_input`` / 1e6, else
``curr1_input`` (mA) x ``in1_input`` (mV) / 1e6.

``vcgencmd pmic_read_adc`` (Pi 5: the DA9091 PMIC) prints 12 current and 12 voltage rails,
``VDD_CORE_A current(7)=1.11625000A`` / ``VDD_CORE_V volt(15)=0.74944980V`` (older
firmware: ``VDD_CORE_A=1.2340A``), plus ``EXT5V_V`` and ``BATT_V`` with no current. Board
power = the sum of V x I over the rails that have both. No loss correction is applied: the
figure is the PMIC's output rails, without its conversion losses or what USB and the 5 V
pins draw (third-party tools fit one, e.g. x1.1451 + 0.5879 W); the source name says
"no loss correction".

Nothing here raises for a sensor: a missing, unreadable or implausible value is None.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from edgekit.device.sysfs import entries, finite, read_text
from edgekit.errors import UserError

# hwmon chip names of board power monitors (drivers/hwmon/ina2xx.c, ina238.c, ina209.c)
POWER_CHIPS = ("ina209", "ina219", "ina220", "ina226", "ina230", "ina231", "ina237",
               "ina238", "ina260")
MAX_WATTS = 1000.0  # a board reading above this is a broken sensor, not a measurement
PMIC_LINE = re.compile(r"^\s*(?P<rail>[A-Za-z0-9_]+?)_(?P<kind>[AV])"
                       r"(?:\s+(?:current|volt)\(\d+\))?\s*=\s*(?P<value>[-+0-9.eE]+)[AV]\s*$")
VCGENCMD_TIMEOUT_S = 2.0


def check_sensor_option(value: object) -> str:
    """``power_sensor``: "auto", "none", "vcgencmd" or "hwmon:NAME"; else a UserError."""
    if isinstance(value, str) and (value in ("auto", "none", "vcgencmd")
                                   or value.startswith("hwmon:") and len(value) > 6):
        return value
    raise UserError(f"power_sensor must be 'auto', 'none', 'vcgencmd' or 'hwmon:NAME' (a "
                    f"hwmon chip name such as hwmon:ina226); got {value!r}")


@dataclass(frozen=True)
class PowerSensor:
    """One place board power can be read: a hwmon chip or ``vcgencmd pmic_read_adc``."""

    kind: str  # "hwmon" | "vcgencmd"
    name: str  # the hwmon chip ("ina226") or "pmic"
    path: str  # the hwmon folder, or the vcgencmd executable
    method: str  # "power1_input", "curr1_input x in1_input" or "pmic_read_adc"

    @property
    def source(self) -> str:
        """What ``stats()`` and ``doctor`` name as the energy's source."""
        if self.kind == "vcgencmd":
            return "vcgencmd pmic_read_adc (sum of rail V x I, no loss correction)"
        return f"hwmon {self.name} ({os.path.basename(self.path)}/{self.method})"

    def read_watts(self) -> float | None:
        """Board watts now, or None when the sensor gave nothing plausible."""
        if self.kind == "vcgencmd":
            return pmic_watts(run_pmic(self.path))
        return hwmon_watts(self.path, self.method)


def hwmon_watts(folder: str, method: str) -> float | None:
    if method == "power1_input":
        microwatts = finite(read_text(os.path.join(folder, "power1_input")))
        watts = None if microwatts is None else microwatts / 1e6
    else:
        milliamps = finite(read_text(os.path.join(folder, "curr1_input")))
        millivolts = finite(read_text(os.path.join(folder, "in1_input")))
        watts = (None if milliamps is None or millivolts is None
                 else abs(milliamps) * millivolts / 1e6)
    return watts if watts is not None and 0.0 <= watts <= MAX_WATTS else None


def hwmon_sensors(root: str, only: str | None = None) -> list[PowerSensor]:
    """The power monitor chips under ``root`` (``only``: that chip name), in hwmon order."""
    found = []
    for folder in entries(root, "sys/class/hwmon/hwmon*")[0]:
        name = read_text(os.path.join(folder, "name")) or ""
        if (name != only) if only else (name not in POWER_CHIPS):
            continue
        for method in ("power1_input", "curr1_input x in1_input"):
            if hwmon_watts(folder, method) is not None:
                found.append(PowerSensor("hwmon", name, folder, method))
                break
    return found


def run_pmic(tool: str) -> str:
    try:
        return subprocess.run([tool, "pmic_read_adc"], capture_output=True, text=True,
                              timeout=VCGENCMD_TIMEOUT_S, check=False).stdout
    except (OSError, subprocess.SubprocessError, ValueError):
        return ""


def parse_pmic(text: str) -> dict[str, dict[str, float]]:
    """Rail -> {"A": amps, "V": volts} from ``pmic_read_adc`` output (either format)."""
    rails: dict[str, dict[str, float]] = {}
    for line in text.splitlines()[:256]:
        match = PMIC_LINE.match(line)
        if match is None:
            continue
        value = finite(match["value"])
        if value is not None:
            rails.setdefault(match["rail"], {})[match["kind"]] = value
    return rails


def pmic_watts(text: str) -> float | None:
    """Sum of V x I over the rails with both; None when no rail has both."""
    pairs = [r["A"] * r["V"] for r in parse_pmic(text).values() if "A" in r and "V" in r]
    watts = sum(pairs)
    return watts if pairs and 0.0 <= watts <= MAX_WATTS else None


def vcgencmd_sensor() -> PowerSensor | None:
    tool = shutil.which("vcgencmd")
    if tool is None or pmic_watts(run_pmic(tool)) is None:
        return None
    return PowerSensor("vcgencmd", "pmic", tool, "pmic_read_adc")


def find_sensors(root: str = "/", option: str = "auto") -> list[PowerSensor]:
    """Every power sensor the option allows, the one used first: hwmon chips, then (auto:
    under the real root only, so that a fake tree never runs it) ``vcgencmd``."""
    option = check_sensor_option(option)
    if option == "none":
        return []
    if option.startswith("hwmon:"):
        return hwmon_sensors(root, option[6:])
    if option == "vcgencmd":
        sensor = vcgencmd_sensor()
        return [sensor] if sensor else []
    found = hwmon_sensors(root)
    try:
        real_root = os.path.realpath(root) == "/"
    except (OSError, ValueError):
        real_root = False
    if real_root:
        sensor = vcgencmd_sensor()
        found += [sensor] if sensor else []
    return found
