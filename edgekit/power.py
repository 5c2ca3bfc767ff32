"""Power and thermal monitor: reads sysfs (under a configurable root) and names a power state.

Sources, all optional (a missing or unreadable sensor is "unknown", never an exception):

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

States, most severe first: throttled, low_battery, hot, on_battery, normal; unknown when
no sensor could be read at all. Thresholds come from the target profile in the manifest.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NORMAL = "normal"
HOT = "hot"
THROTTLED = "throttled"
ON_BATTERY = "on_battery"
LOW_BATTERY = "low_battery"
UNKNOWN = "unknown"
STATES = (THROTTLED, LOW_BATTERY, HOT, ON_BATTERY, NORMAL, UNKNOWN)  # most severe first
SAVING_STATES = (THROTTLED, LOW_BATTERY, HOT, ON_BATTERY)

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
HYSTERESIS_C = 5.0  # leave "hot" only this far below the soft limit, so the state does not flap
CAPPED_RATIO = 0.95  # scaling_max_freq below 95% of cpuinfo_max_freq: the kernel capped the CPU


@dataclass(frozen=True)
class Thresholds:
    soft_limit_c: float = 80.0
    hard_limit_c: float = 85.0
    low_battery_pct: float = 20.0

    @classmethod
    def from_profile(cls, profile: dict[str, Any] | None, low_battery_pct: float = 20.0
                     ) -> Thresholds:
        thermal = (profile or {}).get("thermal") or {}
        return cls(soft_limit_c=float(thermal.get("soft_limit_c", cls.soft_limit_c)),
                   hard_limit_c=float(thermal.get("hard_limit_c", cls.hard_limit_c)),
                   low_battery_pct=float(low_battery_pct))


@dataclass(frozen=True)
class PowerReading:
    """One snapshot of every sensor found, and the state decided from it."""

    state: str = UNKNOWN
    conditions: tuple[str, ...] = ()
    temperature_c: float | None = None
    zones: dict[str, float] = field(default_factory=dict)
    cpus: dict[int, dict[str, Any]] = field(default_factory=dict)
    throttle: int | None = None
    throttle_source: str = ""
    throttle_flags: tuple[str, ...] = ()
    supplies: tuple[dict[str, Any], ...] = ()
    on_battery: bool | None = None
    battery_pct: float | None = None
    loadavg: float | None = None
    sensors: tuple[str, ...] = ()
    time: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state, "conditions": list(self.conditions),
            "temperature_c": self.temperature_c, "zones": dict(self.zones),
            "cpus": {str(k): v for k, v in self.cpus.items()},
            "throttle": None if self.throttle is None else hex(self.throttle),
            "throttle_source": self.throttle_source, "throttle_flags": list(self.throttle_flags),
            "supplies": [dict(s) for s in self.supplies], "on_battery": self.on_battery,
            "battery_pct": self.battery_pct, "loadavg": self.loadavg,
            "sensors": list(self.sensors),
        }


def decode_throttled(value: int) -> tuple[str, ...]:
    """Names of the set bits of a ``get_throttled`` value (unknown bits are ignored)."""
    return tuple(name for bit, name in THROTTLE_BITS.items() if value >> bit & 1)


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):  # missing, EACCES, EIO from a flaky driver
        return None


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def read_thermal(root: str) -> dict[str, float]:
    """Zone name (type, or thermal_zoneN) -> degrees C, for zones with a plausible reading."""
    zones: dict[str, float] = {}
    for folder in sorted(glob.glob(os.path.join(root, "sys/class/thermal/thermal_zone*"))):
        value = _number(_read(os.path.join(folder, "temp")))
        if value is None:
            continue
        celsius = value / 1000.0 if abs(value) >= 200 else value  # a few drivers report C
        if not -40.0 <= celsius <= 150.0:  # disconnected sensors read -273 or 255
            continue
        name = _read(os.path.join(folder, "type")) or os.path.basename(folder)
        key, n = name, 1
        while key in zones:  # laptops repeat types ("acpitz")
            n += 1
            key = f"{name}#{n}"
        zones[key] = celsius
    return zones


def read_cpufreq(root: str) -> dict[int, dict[str, Any]]:
    cpus: dict[int, dict[str, Any]] = {}
    pattern = os.path.join(root, "sys/devices/system/cpu/cpu[0-9]*/cpufreq")
    for folder in glob.glob(pattern):
        try:
            index = int(os.path.basename(os.path.dirname(folder))[3:])
        except ValueError:
            continue
        info: dict[str, Any] = {}
        for key in ("scaling_cur_freq", "scaling_max_freq", "cpuinfo_max_freq"):
            value = _number(_read(os.path.join(folder, key)))
            if value is not None:
                info[key] = int(value)
        governor = _read(os.path.join(folder, "scaling_governor"))
        if governor:
            info["scaling_governor"] = governor
        if info:
            cpus[index] = info
    return dict(sorted(cpus.items()))


def read_throttle(root: str, use_vcgencmd: bool | None = None) -> tuple[int | None, str]:
    """(flags, source). vcgencmd only for the real root: a fake tree must not run it."""
    real_root = os.path.realpath(root) == "/"
    if use_vcgencmd is None:
        use_vcgencmd = real_root
    tool = shutil.which("vcgencmd") if use_vcgencmd else None
    if tool:
        try:
            out = subprocess.run([tool, "get_throttled"], capture_output=True, text=True,
                                 timeout=2.0, check=False).stdout.strip()
            if out.startswith("throttled="):
                return int(out.split("=", 1)[1], 16), "vcgencmd"
        except (OSError, subprocess.SubprocessError, ValueError):
            pass  # fall through to sysfs
    for pattern in THROTTLE_FILES:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            text = _read(path)
            if text:
                try:
                    return int(text, 16), os.path.relpath(path, root)
                except ValueError:
                    continue
    for folder in sorted(glob.glob(os.path.join(root, "sys/class/hwmon/hwmon*"))):
        if _read(os.path.join(folder, "name")) == "rpi_volt":
            alarm = _number(_read(os.path.join(folder, "in0_lcrit_alarm")))
            if alarm is not None:
                return (1 if alarm else 0), os.path.relpath(folder, root) + "/in0_lcrit_alarm"
    return None, ""


def read_supplies(root: str) -> list[dict[str, Any]]:
    supplies = []
    for folder in sorted(glob.glob(os.path.join(root, "sys/class/power_supply/*"))):
        entry: dict[str, Any] = {"name": os.path.basename(folder)}
        for key in ("type", "status", "scope"):
            text = _read(os.path.join(folder, key))
            if text:
                entry[key] = text
        for key in ("online", "capacity"):
            value = _number(_read(os.path.join(folder, key)))
            if value is not None:
                entry[key] = value
        if "type" in entry:
            supplies.append(entry)
    return supplies


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
    value = _number((_read(os.path.join(root, "proc/loadavg")) or "").split(" ")[0] or None)
    if value is not None:
        return value
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def read_power(root: str = "/", thresholds: Thresholds | None = None,
               previous: str = UNKNOWN, use_vcgencmd: bool | None = None) -> PowerReading:
    """Read every sensor under ``root`` and decide the state. Never raises for a sensor."""
    thresholds = thresholds or Thresholds()
    zones = read_thermal(root)
    cpus = read_cpufreq(root)
    throttle, source = read_throttle(root, use_vcgencmd)
    supplies = read_supplies(root)
    on_battery, capacity = battery_status(supplies)
    sensors = tuple(name for name, found in (("thermal", zones), ("cpufreq", cpus),
                                             ("throttle", throttle is not None),
                                             ("power_supply", supplies)) if found)
    temperature = max(zones.values()) if zones else None
    flags = decode_throttled(throttle) if throttle is not None else ()  # hwmon alarm: bit 0

    conditions: list[str] = []
    for flag in ("under_voltage", "freq_capped", "throttled"):
        if flag in flags:
            conditions.append(flag)
    capped = [i for i, c in cpus.items() if c.get("cpuinfo_max_freq")
              and c.get("scaling_max_freq", c["cpuinfo_max_freq"])
              < CAPPED_RATIO * c["cpuinfo_max_freq"]]
    if capped:
        conditions.append("cpufreq_capped")
    if temperature is not None and temperature >= thresholds.hard_limit_c:
        conditions.append("temp_hard_limit")
    # Hysteresis: once hot, stay hot until the temperature is clearly below the soft limit.
    soft = thresholds.soft_limit_c - (HYSTERESIS_C if previous in (HOT, THROTTLED) else 0.0)
    if "soft_temp_limit" in flags or (temperature is not None and temperature >= soft):
        conditions.append("temp_soft_limit")
    if on_battery:
        conditions.append("on_battery")
        if capacity is not None and capacity <= thresholds.low_battery_pct:
            conditions.append("low_battery")

    if not sensors:
        state = UNKNOWN
    elif set(conditions) & {"under_voltage", "freq_capped", "throttled", "cpufreq_capped",
                            "temp_hard_limit"}:
        state = THROTTLED
    elif "low_battery" in conditions:
        state = LOW_BATTERY
    elif "temp_soft_limit" in conditions:
        state = HOT
    elif on_battery:
        state = ON_BATTERY
    else:
        state = NORMAL
    return PowerReading(
        state=state, conditions=tuple(conditions), temperature_c=temperature, zones=zones,
        cpus=cpus, throttle=throttle, throttle_source=source, throttle_flags=flags,
        supplies=tuple(supplies), on_battery=on_battery, battery_pct=capacity,
        loadavg=read_loadavg(root), sensors=sensors, time=time.monotonic(),
    )


Listener = Callable[[PowerReading, PowerReading], None]


class PowerMonitor:
    """Polls :func:`read_power` on a background thread; the hot path only reads ``reading``.

    Listeners get ``(old, new)`` whenever the state changes (called on the poller thread).
    """

    def __init__(self, root: str = "/", thresholds: Thresholds | None = None,
                 interval_s: float = 2.0, use_vcgencmd: bool | None = None) -> None:
        self.root = root
        self.thresholds = thresholds or Thresholds()
        self.interval_s = float(interval_s)
        self.use_vcgencmd = use_vcgencmd
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reading = read_power(root, self.thresholds, use_vcgencmd=use_vcgencmd)

    @property
    def state(self) -> str:
        return self.reading.state

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def poll(self) -> PowerReading:
        """Read now; notify listeners if the state changed. Safe to call from any thread."""
        with self._lock:
            old = self.reading
            new = read_power(self.root, self.thresholds, previous=old.state,
                             use_vcgencmd=self.use_vcgencmd)
            self.reading = new
            listeners = list(self._listeners) if new.state != old.state else []
        for listener in listeners:
            try:
                listener(old, new)
            except Exception:  # a listener's bug must not stop the monitor
                pass
        return new

    def start(self) -> PowerMonitor:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="edgekit-power",
                                            daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None
