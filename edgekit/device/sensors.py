"""Sensor readers for the power monitor: thermal zones, cpufreq, Pi throttle flags, power
supplies, load. Files are read through :mod:`edgekit.device.sysfs` (bounded, non-blocking).

Sources, all optional (a missing, unreadable or implausible value is "unknown", never an
exception):

* ``sys/class/thermal/thermal_zone*/{type,temp}``             millidegrees Celsius
* ``sys/devices/system/cpu/cpu*/cpufreq/{scaling_cur_freq, scaling_max_freq,
  cpuinfo_max_freq, scaling_governor}``                          kHz
* Raspberry Pi throttle flags: ``vcgencmd get_throttled`` (prints ``throttled=0x50005``)
  when it is on PATH and the root is the real ``/``; else the firmware driver's sysfs file
  ``sys/devices/platform/soc/soc:firmware/get_throttled`` (raspberrypi kernel,
  drivers/firmware/raspberrypi.c: ``sprintf(buf, "%x\\n", value)``, hex without ``0x``);
  else the ``rpi_volt`` hwmon under-voltage alarm (``in0_lcrit_alarm``).
  Bits: 0 under-voltage, 1 ARM frequency capped, 2 throttled, 3 soft temperature limit;
  16-19 the same "has occurred since boot".
* ``sys/class/power_supply/*/{type,online,status,capacity,scope}``
* ``proc/loadavg`` (falls back to ``os.getloadavg``)
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Container
from typing import Any

from edgekit.device.sysfs import entries, finite, read_text

THROTTLE_BITS = {
    0: "under_voltage",
    1: "freq_capped",
    2: "throttled",
    3: "soft_temp_limit",
    16: "under_voltage_occurred",
    17: "freq_capped_occurred",
    18: "throttled_occurred",
    19: "soft_temp_limit_occurred",
}
# Known locations of the firmware driver's file (soc node name differs between SoCs).
THROTTLE_FILES = (
    "sys/devices/platform/soc/soc:firmware/get_throttled",
    "sys/devices/platform/*/soc:firmware/get_throttled",
    "sys/devices/platform/*/*:firmware/get_throttled",
)


def decode_throttled(value: int) -> tuple[str, ...]:
    """Names of the set bits of a ``get_throttled`` value (unknown bits are ignored)."""
    return tuple(name for bit, name in THROTTLE_BITS.items() if value >> bit & 1)


def read_thermal(root: str) -> tuple[dict[str, float], int]:
    """(zone name (type, or thermal_zoneN) -> degrees C for zones with a plausible reading,
    zones left out by the listing cap)."""
    zones: dict[str, float] = {}
    next_suffix: dict[str, int] = {}  # per name: the next "#n" to try, so naming stays linear
    folders, skipped = entries(root, "sys/class/thermal/thermal_zone*")
    for folder in folders:
        value = finite(read_text(os.path.join(folder, "temp")))
        if value is None:
            continue
        celsius = value / 1000.0 if abs(value) >= 200 else value  # a few drivers report C
        if not -40.0 <= celsius <= 150.0:  # disconnected sensors read -273 or 255
            continue
        name = read_text(os.path.join(folder, "type")) or os.path.basename(folder)
        zones[unique_name(name, zones, next_suffix)] = celsius
    return zones, skipped


def unique_name(name: str, taken: Container[str], next_suffix: dict[str, int]) -> str:
    """``name``, or ``name#n`` with the first free n (laptops repeat types: "acpitz",
    "acpitz#2", ...). ``next_suffix`` remembers where to resume per name, so naming n zones
    costs O(n) lookups, not O(n^2); a type literally named "x#n" only moves the start on."""
    if name not in taken:
        return name
    n = next_suffix.get(name, 2)
    while f"{name}#{n}" in taken:
        n += 1
    next_suffix[name] = n + 1
    return f"{name}#{n}"


def _frequency(text: str | None) -> int | None:
    value = finite(text)
    return int(value) if value is not None and value > 0 else None


def read_cpufreq(root: str) -> tuple[dict[int, dict[str, Any]], int]:
    """(cpu index -> cpufreq figures in kHz and governor, cpus left out by the cap)."""
    cpus: dict[int, dict[str, Any]] = {}
    folders, skipped = entries(root, "sys/devices/system/cpu/cpu[0-9]*/cpufreq")
    for folder in folders:
        try:
            index = int(os.path.basename(os.path.dirname(folder))[3:])
        except ValueError:
            continue
        info: dict[str, Any] = {}
        for key in ("scaling_cur_freq", "scaling_max_freq", "cpuinfo_max_freq"):
            value = _frequency(read_text(os.path.join(folder, key)))
            if value is not None:
                info[key] = value
        governor = read_text(os.path.join(folder, "scaling_governor"))
        if governor:
            info["scaling_governor"] = governor
        if info:
            cpus[index] = info
    return dict(sorted(cpus.items())), skipped


def read_throttle(root: str, use_vcgencmd: bool | None = None) -> tuple[int | None, str]:
    """(flags, source). vcgencmd only for the real root: a fake tree must not run it."""
    try:
        real_root = os.path.realpath(root) == "/"
    except (OSError, ValueError):
        real_root = False
    if use_vcgencmd is None:
        use_vcgencmd = real_root
    tool = shutil.which("vcgencmd") if use_vcgencmd else None
    if tool:
        try:
            out = subprocess.run([tool, "get_throttled"], capture_output=True, text=True,
                                 timeout=2.0, check=False).stdout.strip()
            value = _flags(out.split("=", 1)[1]) if out.startswith("throttled=") else None
            if value is not None:
                return value, "vcgencmd"
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # fall through to sysfs
    for pattern in THROTTLE_FILES:
        for path in entries(root, pattern)[0]:
            value = _flags(read_text(path))
            if value is not None:
                return value, os.path.relpath(path, root)
    for folder in entries(root, "sys/class/hwmon/hwmon*")[0]:
        if read_text(os.path.join(folder, "name")) == "rpi_volt":
            alarm = finite(read_text(os.path.join(folder, "in0_lcrit_alarm")))
            if alarm is not None:
                return (1 if alarm else 0), os.path.relpath(folder, root) + "/in0_lcrit_alarm"
    return None, ""


def _flags(text: str | None) -> int | None:
    """A ``get_throttled`` value (hex, 32 bits) or ``None`` for anything else."""
    try:
        value = int(text or "", 16)
    except ValueError:
        return None
    return value if 0 <= value <= 0xFFFFFFFF else None


def read_supplies(root: str) -> tuple[list[dict[str, Any]], int]:
    """(power supplies with a type, supplies left out by the cap)."""
    supplies = []
    folders, skipped = entries(root, "sys/class/power_supply/*")
    for folder in folders:
        entry: dict[str, Any] = {"name": os.path.basename(folder)}
        for key in ("type", "status", "scope"):
            text = read_text(os.path.join(folder, key))
            if text:
                entry[key] = text
        online = finite(read_text(os.path.join(folder, "online")))
        if online is not None:
            entry["online"] = online
        capacity = finite(read_text(os.path.join(folder, "capacity")))
        if capacity is not None and 0.0 <= capacity <= 100.0:  # a percentage, or unknown
            entry["capacity"] = capacity
        if "type" in entry:
            supplies.append(entry)
    return supplies, skipped


def battery_status(supplies: list[dict[str, Any]]) -> tuple[bool | None, float | None]:
    """(on battery?, mean capacity %) from system supplies; None where it cannot be told."""
    system = [s for s in supplies if s.get("scope", "System") != "Device"]  # mice, headsets
    batteries = [s for s in system if s["type"] == "Battery"]
    external = [s for s in system if s["type"] != "Battery" and "online" in s]
    capacities = [s["capacity"] for s in batteries if "capacity" in s]
    capacity = sum(capacities) / len(capacities) if capacities else None
    if any(s.get("status") == "Discharging" for s in batteries):
        return True, capacity
    if any(s["online"] for s in external):
        return False, capacity
    if external and batteries:  # chargers present, none online: running from the battery
        return True, capacity
    if batteries and any(s.get("status") in ("Charging", "Full", "Not charging")
                         for s in batteries):
        return False, capacity
    return None, capacity


def read_loadavg(root: str) -> float | None:
    value = finite((read_text(os.path.join(root, "proc/loadavg")) or "").split(" ")[0] or None)
    if value is not None and value >= 0:
        return value
    try:
        value = os.getloadavg()[0]
    except OSError:
        return None
    return value if math.isfinite(value) else None
