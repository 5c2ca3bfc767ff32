"""Power and thermal monitor: reads sensors (under a configurable root), names a power state.

Sensors are read by :mod:`edgekit.device.sensors` (sources and formats there).

States, most severe first: throttled, low_battery, hot, power_limit, on_battery, normal;
unknown when no sensor could be read at all. Thresholds come from the target profile in the
manifest. ``power_limit``: a power sensor (``edgekit/device/power_sensors.py``) measures the board
at 90% or more of the profile's supply rating (``power.supply_w``): the batcher and the tuner
save as when hot, before the supply sags into under-voltage.

Nothing here may hang or raise, whatever the tree holds (it runs on the hot path's behalf):
files are read through :mod:`edgekit.device.sysfs` (regular files only, non-blocking, one page at
most; nan/inf/overflow are "unknown"), listings are capped, duplicate zone names are resolved
in linear time, each sensor group is guarded (a failure is recorded in ``PowerReading.errors``
and the other groups still count), and the poller thread survives any exception, counting it
(``PowerMonitor.info()``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from edgekit.device.sensors import (
    battery_status,
    decode_throttled,
    read_cpufreq,
    read_loadavg,
    read_supplies,
    read_thermal,
    read_throttle,
)

NORMAL = "normal"
HOT = "hot"
THROTTLED = "throttled"
ON_BATTERY = "on_battery"
LOW_BATTERY = "low_battery"
POWER_LIMIT = "power_limit"
UNKNOWN = "unknown"
# most severe first
STATES = (THROTTLED, LOW_BATTERY, HOT, POWER_LIMIT, ON_BATTERY, NORMAL, UNKNOWN)
SAVING_STATES = (THROTTLED, LOW_BATTERY, HOT, POWER_LIMIT, ON_BATTERY)
SUPPLY_SHARE = 0.9  # measured watts at this share of the supply's rating: power_limit
SUPPLY_HYSTERESIS = 0.05  # ... left only below 85%, so the state does not flap

HYSTERESIS_C = 5.0  # leave "hot" only this far below the soft limit, so the state does not flap
CAPPED_RATIO = 0.95  # scaling_max_freq below 95% of cpuinfo_max_freq: the kernel capped the CPU


@dataclass(frozen=True)
class Thresholds:
    soft_limit_c: float = 80.0
    hard_limit_c: float = 85.0
    low_battery_pct: float = 20.0
    supply_w: float = 0.0  # the supply's rating (0: mains, no limit)

    @classmethod
    def from_profile(cls, profile: Mapping[str, Any] | None, low_battery_pct: float = 20.0
                     ) -> Thresholds:
        """Limits from a profile's ``[thermal]`` table; a missing, non-numeric or
        non-finite figure keeps the default (the manifest's own checks report it)."""
        thermal = profile.get("thermal") if isinstance(profile, Mapping) else None
        thermal = thermal if isinstance(thermal, Mapping) else {}
        power = profile.get("power") if isinstance(profile, Mapping) else None
        power = power if isinstance(power, Mapping) else {}
        return cls(soft_limit_c=_figure(thermal.get("soft_limit_c"), cls.soft_limit_c),
                   hard_limit_c=_figure(thermal.get("hard_limit_c"), cls.hard_limit_c),
                   low_battery_pct=_figure(low_battery_pct, cls.low_battery_pct),
                   supply_w=_figure(power.get("supply_w"), cls.supply_w))


def _figure(value: object, default: float) -> float:
    """``value`` as a finite float, else ``default`` (bools, huge ints, nan, garbage)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return default
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return default
    return number if math.isfinite(number) else default


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
    watts: float | None = None  # measured board power, when a power sensor is read
    errors: tuple[str, ...] = ()  # sensor groups that failed unexpectedly, and why
    skipped: int = 0  # entries beyond the listing cap (edgekit.device.sysfs.MAX_ENTRIES)
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
            "sensors": list(self.sensors), "watts": self.watts, "errors": list(self.errors),
            "skipped": self.skipped,
        }


def read_power(root: str = "/", thresholds: Thresholds | None = None,
               previous: str = UNKNOWN, use_vcgencmd: bool | None = None,
               watts: Callable[[], float | None] | None = None) -> PowerReading:
    """Read every sensor under ``root`` and decide the state. Never raises for a sensor:
    a group that fails is left out and named in ``errors``. ``watts``: the measured board
    power now (a power meter), when there is one."""
    thresholds = thresholds or Thresholds()
    errors: list[str] = []
    zones, skipped_zones = _guarded(errors, "thermal", read_thermal, root, default=({}, 0))
    cpus, skipped_cpus = _guarded(errors, "cpufreq", read_cpufreq, root, default=({}, 0))
    throttle, source = _guarded(errors, "throttle", read_throttle, root, use_vcgencmd,
                                default=(None, ""))
    supplies, skipped_supplies = _guarded(errors, "power_supply", read_supplies, root,
                                          default=([], 0))
    on_battery, capacity = battery_status(supplies)
    measured = _guarded(errors, "power", watts, default=None) if watts is not None else None
    sensors = tuple(name for name, found in (("thermal", zones), ("cpufreq", cpus),
                                             ("throttle", throttle is not None),
                                             ("power_supply", supplies),
                                             ("power", measured is not None)) if found)
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
    share = SUPPLY_SHARE - (SUPPLY_HYSTERESIS if previous == POWER_LIMIT else 0.0)
    if measured is not None and thresholds.supply_w > 0 and measured >= share * thresholds.supply_w:
        conditions.append("supply_limit")
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
    elif "supply_limit" in conditions:
        state = POWER_LIMIT
    elif on_battery:
        state = ON_BATTERY
    else:
        state = NORMAL
    return PowerReading(
        state=state, conditions=tuple(conditions), temperature_c=temperature, zones=zones,
        cpus=cpus, throttle=throttle, throttle_source=source, throttle_flags=flags,
        supplies=tuple(supplies), on_battery=on_battery, battery_pct=capacity, watts=measured,
        loadavg=_guarded(errors, "loadavg", read_loadavg, root, default=None),
        sensors=sensors, errors=tuple(errors),
        skipped=skipped_zones + skipped_cpus + skipped_supplies, time=time.monotonic(),
    )


def _guarded(errors: list[str], group: str, reader: Callable[..., Any], *args: Any,
             default: Any) -> Any:
    """``reader(*args)``, or ``default`` with the failure recorded: the readers handle every
    failure they know of, this catches the ones nobody foresaw (one group, not the poll)."""
    try:
        return reader(*args)
    except Exception as error:  # the monitor must outlive any sensor bug
        errors.append(f"{group}: {type(error).__name__}: {error}"[:300])
        return default


Listener = Callable[[PowerReading, PowerReading], None]


class PowerMonitor:
    """Polls :func:`read_power` on a background thread; the hot path only reads ``reading``.

    Listeners get ``(old, new)`` whenever the state changes (called on the poller thread).
    The poller never dies of an exception: a failed poll keeps the last reading, and every
    failure (of a poll, a sensor group or a listener) is counted; see :meth:`info`.
    """

    MIN_INTERVAL_S = 0.05  # a zero or negative interval would spin a core

    def __init__(self, root: str = "/", thresholds: Thresholds | None = None,
                 interval_s: float = 2.0, use_vcgencmd: bool | None = None,
                 watts: Callable[[], float | None] | None = None) -> None:
        self.root = root
        self.watts = watts  # the power meter's latest reading, when the board has a sensor
        self.thresholds = thresholds or Thresholds()
        interval = _figure(interval_s, 2.0)
        self.interval_s = max(self.MIN_INTERVAL_S, interval)
        self.use_vcgencmd = use_vcgencmd
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.polls = 0
        self.errors = 0
        self.last_error: str | None = None
        self.last_error_time: float | None = None
        self.reading = PowerReading(time=time.monotonic())
        self._poll_safely()

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
                             use_vcgencmd=self.use_vcgencmd, watts=self.watts)
            self.reading = new
            self.polls += 1
            for message in new.errors:
                self._record(message)
            listeners = list(self._listeners) if new.state != old.state else []
        for listener in listeners:
            try:
                listener(old, new)
            except Exception as error:  # a listener's bug must not stop us
                with self._lock:
                    self._record(f"listener: {type(error).__name__}: {error}")
        return new

    def _poll_safely(self) -> None:
        try:
            self.poll()
        except BaseException as error:  # keep the last reading, keep polling
            with self._lock:
                self._record(f"poll: {type(error).__name__}: {error}")

    def _record(self, message: str) -> None:
        """Count one failure (caller holds the lock)."""
        self.errors += 1
        self.last_error = message[:300]
        self.last_error_time = time.time()

    def info(self) -> dict[str, Any]:
        """Health of the monitor, for ``stats()``: polls done, failures seen, the last one.
        Lock-free on purpose: a poll in progress (vcgencmd may take up to 2 s) must not
        delay the caller; each figure is read atomically."""
        thread = self._thread
        return {"polls": self.polls, "errors": self.errors, "last_error": self.last_error,
                "last_error_time": self.last_error_time,
                "running": thread is not None and thread.is_alive(),
                "interval_s": self.interval_s}

    def start(self) -> PowerMonitor:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="edgekit-power",
                                            daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._poll_safely()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None
