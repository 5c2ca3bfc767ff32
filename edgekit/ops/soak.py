"""The soak benchmark (``edgekit bench --soak SECONDS``): the board's numbers after it heats.

Published latencies are measured on a cool board; a Pi 4 in a case reaches 80-85 C within
minutes and its firmware steps the Arm cores down (1500 -> 1000/750/600 MHz). The soak runs
the model for SECONDS at a fixed rate (``rate``, requests per second: the service's load)
or flat out, and records per interval: latency p50/p95/p99 of the runs in it, the SoC
temperature (the hottest thermal zone), the mean CPU frequency, the throttle flags
(``get_throttled``: vcgencmd or the firmware's sysfs file) and energy per sample (measured
by a power sensor when the board has one, else modelled from the profile; see
``edgekit/device/energy.py``). The summary gives the settled p95 (the median of the interval p95s
over the last quarter of the run), the first interval's p95 beside it, and when throttling
was first seen (a current throttle bit, or the kernel capping cpufreq).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.device.power import THROTTLED, PowerReading, Thresholds, read_power
from edgekit.ops.svgplot import Series, time_chart
from edgekit.targets import PowerModel

if TYPE_CHECKING:
    from edgekit.model import Model

Feed = np.ndarray | dict[str, np.ndarray]
SETTLED_SHARE = 0.25  # the settled p95: over the last quarter of the intervals


@dataclass(frozen=True)
class Interval:
    """One interval of a soak: its runs' latency and the board's state at its end."""

    start_s: float
    end_s: float
    runs: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    temperature_c: float | None
    cpu_mhz: float | None
    throttle: str | None  # the get_throttled value, hex
    throttle_flags: tuple[str, ...] = ()
    throttling: bool = False  # a current throttle bit or a capped cpufreq
    mj_per_sample: float | None = None
    energy_source: str = "modelled"
    late_runs: int = 0  # fixed rate: runs started more than one period late

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["throttle_flags"] = list(self.throttle_flags)
        return out


@dataclass
class _Runs:
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    late: int = 0


def run_soak(model: Model, x: Feed, seconds: float, rate: float | None = None,
             interval_s: float = 5.0, root: str = "/",
             on_interval: Callable[[Interval], None] | None = None,
             clock: Callable[[], float] = time.perf_counter,
             sleep: Callable[[float], None] = time.sleep) -> list[Interval]:
    """Run ``model.predict(x)`` for ``seconds`` (at ``rate`` per second, or flat out) and
    return one :class:`Interval` per ``interval_s``; ``on_interval`` sees each as it ends."""
    thresholds = Thresholds(soft_limit_c=model.spec.target.profile.thermal.soft_limit_c,
                            hard_limit_c=model.spec.target.profile.thermal.hard_limit_c)
    power = PowerModel.from_profile(model.spec.target.profile)
    rows = _rows(x)
    period = 1.0 / rate if rate else 0.0
    start = clock()
    end = start + seconds
    intervals: list[Interval] = []
    runs = _Runs()
    opened = start  # the current interval's start
    boundary = start + interval_s
    next_run = start
    state = "unknown"
    while True:
        now = clock()
        if now >= boundary or now >= end:
            reading = read_power(root, thresholds, previous=state)
            state = reading.state
            interval = _interval(model, runs, reading, opened - start, min(now, end) - start,
                                 rows, power)
            intervals.append(interval)
            if on_interval is not None:
                on_interval(interval)
            runs = _Runs()
            if now >= end:
                return intervals
            # a stalled machine (or a slow sensor) may have passed the next boundary too:
            # the next interval starts now rather than closing empty
            opened = now
            boundary = max(boundary + interval_s, now + 0.5 * interval_s)
            continue
        if period:
            if now < next_run:
                sleep(min(next_run - now, boundary - now))
                continue
            if now - next_run > period:  # more than a period behind: no catch-up burst
                runs.late += 1
                next_run = now
            next_run += period
        t0 = clock()
        model.predict(x)
        runs.starts.append(t0)
        runs.ends.append(clock())


def _rows(x: Feed) -> int:
    first = next(iter(x.values())) if isinstance(x, dict) else x
    return int(first.shape[0]) if getattr(first, "ndim", 0) else 1


def _interval(model: Model, runs: _Runs, reading: PowerReading, start_s: float, end_s: float,
              rows: int, power: PowerModel) -> Interval:
    seconds = np.asarray(runs.ends) - np.asarray(runs.starts)
    p50 = p95 = p99 = None
    if seconds.size:
        p50, p95, p99 = (round(float(v), 4) for v in np.percentile(seconds, [50, 95, 99])
                         * 1e3)
    freqs = [c["scaling_cur_freq"] / 1000.0 for c in reading.cpus.values()
             if "scaling_cur_freq" in c]
    mj, source = _energy(model, runs, seconds, rows, power)
    return Interval(
        start_s=round(start_s, 3), end_s=round(end_s, 3), runs=int(seconds.size),
        p50_ms=p50, p95_ms=p95, p99_ms=p99, temperature_c=reading.temperature_c,
        cpu_mhz=round(sum(freqs) / len(freqs), 1) if freqs else None,
        throttle=None if reading.throttle is None else hex(reading.throttle),
        throttle_flags=reading.throttle_flags, throttling=reading.state == THROTTLED,
        mj_per_sample=mj, energy_source=source, late_runs=runs.late)


def _energy(model: Model, runs: _Runs, seconds: np.ndarray, rows: int, power: PowerModel
            ) -> tuple[float | None, str]:
    """mJ per sample of the interval's runs: the sensor's watts at each run, else the
    profile's watts at the model's thread count."""
    if not seconds.size:
        return None, "modelled"
    meter = model.meter
    if meter is not None:
        watts = meter.run_watts({"end": np.asarray(runs.ends), "seconds": seconds})
        if np.isfinite(watts).all():
            return round(float((watts * seconds).sum()) / (seconds.size * rows) * 1e3, 4), \
                meter.source
    joules = power.watts(model.threads or 1) * float(seconds.sum())
    return round(joules / (seconds.size * rows) * 1e3, 4), "modelled"


def summarize(intervals: Sequence[Interval]) -> dict[str, Any]:
    """The settled p95, the first interval's p95, when throttling was first seen."""
    timed = [i for i in intervals if i.p95_ms is not None]
    if not timed:
        return {"intervals": len(intervals), "runs": 0}
    tail = timed[-max(1, math.ceil(len(timed) * SETTLED_SHARE)):]
    settled = float(np.median([i.p95_ms for i in tail]))
    first = timed[0].p95_ms
    throttled = next((i for i in intervals if i.throttling), None)
    temps = [i.temperature_c for i in intervals if i.temperature_c is not None]
    freqs = [i.cpu_mhz for i in intervals if i.cpu_mhz is not None]
    return {
        "intervals": len(intervals), "runs": sum(i.runs for i in intervals),
        "first_p95_ms": first, "settled_p95_ms": round(settled, 4),
        "settled_from_s": tail[0].start_s,
        "settled_over_first": round(settled / first, 3) if first else None,
        "throttling_seen_at_s": throttled.end_s if throttled else None,
        "max_temperature_c": max(temps) if temps else None,
        "min_cpu_mhz": min(freqs) if freqs else None,
        "energy_source": intervals[-1].energy_source,
        "late_runs": sum(i.late_runs for i in intervals),
    }


HEADER = (f"{'from s':>7} {'to s':>7} {'runs':>6} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} "
          f"{'temp C':>7} {'CPU MHz':>8} {'throttle':>9} {'mJ/sample':>10}")


def line(interval: Interval) -> str:
    def num(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    flags = interval.throttle or "-"
    if interval.throttling:
        flags += "*"
    return (f"{interval.start_s:>7.1f} {interval.end_s:>7.1f} {interval.runs:>6} "
            f"{num(interval.p50_ms, '.3f'):>9} {num(interval.p95_ms, '.3f'):>9} "
            f"{num(interval.p99_ms, '.3f'):>9} {num(interval.temperature_c, '.1f'):>7} "
            f"{num(interval.cpu_mhz, '.0f'):>8} {flags:>9} "
            f"{num(interval.mj_per_sample, '.4f'):>10}")


def summary_lines(summary: dict[str, Any]) -> list[str]:
    if not summary.get("runs"):
        return ["no run finished: nothing to summarise"]
    began = summary["throttling_seen_at_s"]
    return [
        f"settled p95 {summary['settled_p95_ms']:.3f} ms (median of the interval p95s from "
        f"{summary['settled_from_s']:.1f} s on); first interval p95 {summary['first_p95_ms']:.3f} "
        f"ms; settled/first {summary['settled_over_first']}",
        "throttling: " + (f"first seen at {began:.1f} s" if began is not None else "never seen")
        + f"; max temperature {summary['max_temperature_c']} C; lowest CPU frequency "
        f"{summary['min_cpu_mhz']} MHz; energy {summary['energy_source']}",
    ]


def plot(intervals: Sequence[Interval], summary: dict[str, Any], title: str) -> str:
    """Latency percentiles (left axis) and temperature (right) over time, as SVG."""
    xs = [i.end_s for i in intervals]
    series = [Series("p50 ms", tuple(i.p50_ms for i in intervals), "#3465a4"),
              Series("p95 ms", tuple(i.p95_ms for i in intervals), "#f57900"),
              Series("p99 ms", tuple(i.p99_ms for i in intervals), "#73d216", dashed=True),
              Series("temp C", tuple(i.temperature_c for i in intervals), "#cc0000",
                     right=True)]
    began = summary.get("throttling_seen_at_s")
    return time_chart(title, xs, series, "seconds since start", "latency (ms)",
                      "SoC temperature (C)", marker=began,
                      marker_label="throttling" if began is not None else "")
