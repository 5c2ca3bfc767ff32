"""Runtime metrics: a cheap ring buffer written from the hot path, summarised on demand.

The hot path (``Model.run_feeds``) only stores one tuple into a ring buffer (no lock);
percentiles, throughput and the energy estimate are computed when ``stats()`` is called.
``Model.predict`` times only one call in ``SAMPLE_STRIDE`` when calls take less than
``SAMPLE_BELOW_S`` (on a 27 us model even a perf_counter pair and a ring store cost ~4%;
1 ms, not less: a ~100 us model on a loaded machine takes 200-300 us, and timing every such
call cost it 2-3%); such an entry carries the weight of the calls it stands for.
Energy: with a power sensor (``edgekit/device/power_sensors.py``) the board's measured watts over
the run windows (``edgekit/device/energy.py``), and ``energy_source`` names the sensor; without one
the target profile's power model (``edgekit.targets.PowerModel``, the one the estimator uses
too): energy of one execution = watts(threads) * its wall time, ``energy_source`` "modelled".

The counters of ``Model.stats()`` (``COUNTERS`` below says the same, for tools):

* ``executions``: backend runs (one per ``predict`` call, per batch the batcher runs, per
  tuner probe run; not the batcher's per-row probe, no request) in the recent window, the
  last ``Recorder.size`` recorded entries that the percentiles, throughput and energy describe. Exact: an entry standing for fast calls not
  yet made is not counted ahead of them.
* ``samples``: input rows in those runs (a batch of 4 is 4 samples).
* ``total_executions`` / ``total_samples``: the same since the model was loaded.
* ``timed_executions``: runs whose latency was measured (fast calls: one in
  ``SAMPLE_STRIDE``); the latency percentiles come from these.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from edgekit.device.energy import PowerMeter, measured_energy
from edgekit.device.power import PowerMonitor, Thresholds, read_power
from edgekit.targets import PowerModel, Profile

__all__ = ["PowerModel", "Recorder", "StatsParts", "model_stats", "summarize"]

SAMPLE_BELOW_S = 1e-3
SAMPLE_STRIDE = 16

COUNTERS = {
    "executions": "backend runs (predict calls, batches, tuner probes) in the recent window",
    "samples": "input rows in the recent window's runs",
    "total_executions": "backend runs since the model was loaded",
    "total_samples": "input rows since the model was loaded",
    "timed_executions": "runs whose latency was measured (fast calls: 1 in SAMPLE_STRIDE)",
}


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity), the real ceiling for thread counts."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def process_cpu_seconds() -> float:
    """CPU time of this process, all threads (an onnxruntime pool's spinning included)."""
    times = os.times()
    return times.user + times.system


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


PROC_STAT_BYTES = 1 << 20  # ~150 bytes per CPU plus interrupts: far below on any board


def busy_seconds(path: str) -> float | None:
    """CPU seconds all cores spent busy since boot (the ``cpu`` line of proc/stat:
    user nice system idle iowait irq softirq steal ...), or None where it is unreadable.
    Read like a sysfs attribute (``edgekit.device.sysfs``): a regular file only (a FIFO or device
    in its place is never opened), at most PROC_STAT_BYTES, within a timeout."""
    from edgekit.device.sysfs import read_text_within

    text = read_text_within(path, PROC_STAT_BYTES)
    try:
        fields = (text or "").split("\n", 1)[0].split()
        ticks = [int(v) for v in fields[1:9]]
    except ValueError:
        return None
    if fields[:1] != ["cpu"] or len(ticks) < 8:
        return None
    return (sum(ticks[:3]) + sum(ticks[5:8])) / _TICK


class BusyMeter:
    """Cores kept busy by other processes: all busy CPU time in ``<root>/proc/stat`` minus
    this process's, averaged over about ``tau_s``. Unlike the 1-min load average it shows a
    competitor that starts or ends within a second or two. None where proc/stat is missing.
    Not thread-safe: one reader (the tuner's thread)."""

    def __init__(self, root: str, tau_s: float = 1.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.path = os.path.join(root, "proc/stat")
        self.tau_s = max(1e-3, tau_s)
        self.clock = clock
        self.restart()

    def restart(self) -> None:
        """Forget the average: the next ``read`` covers from now on, unsmoothed."""
        self.value: float | None = None
        self._mark = (self.clock(), busy_seconds(self.path), process_cpu_seconds())

    def read(self) -> float | None:
        now, busy, cpu = self.clock(), busy_seconds(self.path), process_cpu_seconds()
        then, busy_then, cpu_then = self._mark
        if busy is None or busy_then is None:
            return None
        if now - then >= 0.1:  # below that, clock-tick granularity (10 ms) dominates
            cores = max(0.0, (busy - busy_then - (cpu - cpu_then)) / (now - then))
            alpha = 1.0 - math.exp(-(now - then) / self.tau_s)
            self.value = cores if self.value is None else self.value + alpha * (
                cores - self.value)
            self._mark = (now, busy, cpu)
        return self.value


class Recorder:
    """Ring of recent executions: (end time, seconds, rows = batch size, threads, weight).

    Lock-free on the write side (``next()`` on an ``itertools.count`` is atomic in CPython,
    each slot is one tuple store): the hot path pays a few hundred nanoseconds. Readers may
    see a slot being overwritten under heavy concurrency; these are statistics, not ledgers.
    """

    __slots__ = ("size", "n", "total_rows", "total_weight", "started", "uncounted_runs",
                 "_uncounting", "_ring", "_mask", "_ticket")

    def __init__(self, size: int = 4096) -> None:
        if size & (size - 1):
            raise ValueError(f"ring size must be a power of two, got {size}")
        self.size = size
        self._mask = size - 1
        self._ring: list[tuple[float, float, int, int, int]] = [(0.0, 0.0, 0, 0, 0)] * size
        self._ticket = itertools.count()
        self.n = 0  # executions recorded so far; execution i lives in slot i % size
        self.total_rows = 0  # may undercount under concurrent callers (unlocked +=)
        self.total_weight = 0  # executions the entries stand for (same caveat)
        self.started = time.perf_counter()
        self.uncounted_runs = 0  # runs recorded inside ``uncounted()`` (weight 0)
        self._uncounting = False

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """Runs inside are not requests (the batcher's per-row probe, 3 runs at the first
        request): kept with weight 0, so they count in no executions, samples or latency
        (50 ``submit``s are 50 samples, not 54). Any thread's: the probe may run on the
        batcher's timeout runner; a ``predict`` from elsewhere in those few ms goes
        uncounted too (statistics, not ledgers)."""
        self._uncounting = True
        try:
            yield
        finally:
            self._uncounting = False

    def add(self, t0: float, t1: float, rows: int, threads: int, weight: int = 1) -> None:
        """One execution; ``weight`` > 1 when it stands for that many sampled calls."""
        if self._uncounting:
            weight = 0
            self.uncounted_runs += 1
        i = next(self._ticket)
        self._ring[i & self._mask] = (t1, t1 - t0, rows, threads, weight)
        self.n = i + 1
        self.total_rows += rows * weight
        self.total_weight += weight

    def window(self, since: int = 0) -> dict[str, np.ndarray]:
        """Entries with index >= ``since`` still in the ring, oldest first."""
        n = self.n
        first = max(since, n - self.size, 0)
        a, b = first & self._mask, n & self._mask
        if first >= n:
            entries: list[tuple[float, float, int, int, int]] = []
        else:
            entries = self._ring[a:b] if a < b else self._ring[a:] + self._ring[:b]
        data = np.array(entries, dtype=np.float64).reshape(-1, 5)
        return {"end": data[:, 0], "seconds": data[:, 1], "rows": data[:, 2].astype(np.int64),
                "threads": data[:, 3].astype(np.int64), "weight": data[:, 4].astype(np.int64)}

    def recent(self, seconds: float) -> dict[str, np.ndarray]:
        """Entries that ended within the last ``seconds``."""
        data = self.window()
        keep = data["end"] >= time.perf_counter() - seconds
        return {k: v[keep] for k, v in data.items()}


def typical(values: np.ndarray | list[float]) -> float:
    """The mean, on purpose not the median: an extra thread on a busy CPU causes frequent
    long stalls (a pool thread descheduled mid-op) that the median hides. On the loaded
    2-core dev box 1 and 2 threads had the same median and a 1.8x different mean; trimming
    even the slowest 2% hid exactly those stalls and picked the slower count."""
    data = np.asarray(values, dtype=np.float64)
    return float(data.mean()) if data.size else float("nan")


def percentiles_ms(seconds: np.ndarray | list[float]) -> dict[str, float | None]:
    values = np.asarray(seconds, dtype=np.float64)
    if values.size == 0:
        return {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None}
    p50, p90, p95, p99 = (float(v) for v in np.percentile(values, [50, 90, 95, 99]) * 1000.0)
    # plain floats: a printed stats() reads 0.2334, not np.float64(0.2334)
    return {"p50": round(p50, 4), "p90": round(p90, 4), "p95": round(p95, 4),
            "p99": round(p99, 4), "mean": round(float(values.mean()) * 1000.0, 4)}


def per_row_seconds(window: dict[str, np.ndarray]) -> np.ndarray:
    """Seconds per sample of each execution (batch time / batch size)."""
    return window["seconds"] / np.maximum(window["rows"], 1)


def summarize(window: dict[str, np.ndarray], power: PowerModel,
              default_threads: int) -> dict[str, Any]:
    """Latency percentiles, throughput, batch sizes, threads and energy of a window (its
    weight-0 entries, runs that were no request, left out)."""
    if window["weight"].size and not window["weight"].all():
        window = {k: v[window["weight"] > 0] for k, v in window.items()}
    seconds, rows, weight = window["seconds"], window["rows"], window["weight"]
    threads = np.where(window["threads"] > 0, window["threads"], default_threads)
    samples = int((rows * weight).sum())
    out: dict[str, Any] = {"executions": int(weight.sum()), "samples": samples}
    out["latency_ms"] = percentiles_ms(seconds)
    if seconds.size:
        span = float(window["end"][-1] - (window["end"][0] - seconds[0]))
        busy = float((seconds * weight).sum())
        watts = np.array([power.watts(int(t)) for t in threads])
        energy = float((watts * seconds * weight).sum())
        sizes = np.unique(rows)
        used = np.unique(threads)
        out.update({
            "throughput_per_s": round(samples / span, 2) if span > 0 else None,
            "busy_fraction": round(min(1.0, busy / span), 4) if span > 0 else None,
            "batch_sizes": {int(s): int(weight[rows == s].sum()) for s in sizes},
            "threads_used": {int(t): int(weight[threads == t].sum()) for t in used},
            "energy_j_per_sample": energy / max(1, samples),
            "busy_power_w": round(energy / busy, 3) if busy > 0 else None,
        })
    return out


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process (VmHWM), in MB."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    except (ImportError, OSError):
        return None


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs) so the next peak is per phase."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


class Reports(Protocol):
    """A part that reports on itself (the batcher, the tuner)."""

    def info(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class StatsParts:
    """What ``Model.stats()`` is made of, handed over explicitly."""

    runtime: str
    policy: str
    threads: int
    recorder: Recorder
    profile: Profile
    power_root: str
    thresholds: Thresholds
    monitor: PowerMonitor | None = None
    batcher: Reports | None = None
    tuner: Reports | None = None
    # calls the latest sampled entry already counts but that have not happened yet
    pending: int = 0
    drift: Reports | None = None  # the drift watch (edgekit/numerics/drift.py)
    meter: PowerMeter | None = None  # a power sensor: measured energy (edgekit/device/energy.py)


def model_stats(parts: StatsParts) -> dict[str, Any]:
    """``Model.stats()``: the recent window of executions plus batcher, tuner and power."""
    power = PowerModel.from_profile(parts.profile)
    default_threads = usable_cpus()
    recorder = parts.recorder
    out: dict[str, Any] = {"runtime": parts.runtime, "policy": parts.policy,
                           "threads": parts.threads or default_threads}
    window = recorder.window()
    out.update(summarize(window, power, default_threads))
    # energy: measured by the sensor over the run windows when there is one, else modelled
    out["energy_source"] = "modelled"
    if parts.meter is not None:
        measured = measured_energy(parts.meter, window)
        if measured:
            out.update(measured)
            out["energy_source"] = parts.meter.source
        out["power_sensor"] = parts.meter.info(window)
    pending = max(0, parts.pending)
    # the latest entry's weight counts calls not yet made: take them off (see COUNTERS)
    out["executions"] = max(0, out["executions"] - pending)
    out["samples"] = max(0, out["samples"] - pending)
    out["total_executions"] = max(0, recorder.total_weight - pending)
    out["total_samples"] = max(0, recorder.total_rows - pending)
    out["timed_executions"] = recorder.n - recorder.uncounted_runs
    reading = (parts.monitor.reading if parts.monitor is not None
               else read_power(parts.power_root, parts.thresholds))
    out["power"] = {k: v for k, v in reading.as_dict().items()
                    if k in ("state", "conditions", "temperature_c", "on_battery",
                             "battery_pct", "throttle_flags", "loadavg", "sensors", "watts")}
    out["power_model"] = {"idle_w": power.idle_w, "full_load_w": power.full_load_w,
                          "cores": power.cores}
    if parts.batcher is not None:
        out["batcher"] = parts.batcher.info()
    if parts.tuner is not None:
        out["tuner"] = parts.tuner.info()
    if parts.drift is not None:
        out["drift"] = parts.drift.info()
    return out
