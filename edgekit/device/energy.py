"""Measured energy: a power sensor sampled on a thread, integrated over the run windows.

``PowerMeter`` reads a :class:`edgekit.device.power_sensors.PowerSensor` every ``interval_s`` into
a ring of (``perf_counter`` time, watts), the clock the execution recorder uses. The energy
of the recorded runs is the sum over runs of the board's watts at the run (interpolated
between the samples around it) x its seconds x its weight: the measured counterpart of the
profile's ``watts(threads) x seconds``. The board's watts while the model runs are what a
sample taken during a run shows, so a model that runs most of the time is measured well;
runs shorter than the sampling interval between long idle gaps are billed mostly at the
idle watts around them (``in_runs`` in ``info()`` says how many samples fell inside runs).

``MeasuredPower`` is what the tuner's policies read (``watts(threads)``, ``energy_j``):
the mean of the samples taken inside runs at each thread count, the profile's model scaled
to them for a count not yet measured, the model alone before any.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from edgekit.device.power_sensors import PowerSensor
from edgekit.targets import PowerModel

MIN_INTERVAL_S = 0.05
HWMON_INTERVAL_S = 1.0
VCGENCMD_INTERVAL_S = 2.0


class PowerMeter:
    """Samples one sensor on a daemon thread (never raises; a failed read is skipped)."""

    def __init__(self, sensor: PowerSensor, interval_s: float | None = None, size: int = 4096,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.sensor = sensor
        if interval_s is None:  # a hwmon read is a file read; vcgencmd starts a process
            interval_s = VCGENCMD_INTERVAL_S if sensor.kind == "vcgencmd" else HWMON_INTERVAL_S
        self.interval_s = max(MIN_INTERVAL_S, float(interval_s))
        self.clock = clock
        self._ring = np.full((size, 2), np.nan)
        self._n = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed = 0
        self.sample()

    @property
    def source(self) -> str:
        return self.sensor.source

    def sample(self) -> float | None:
        """Read the sensor now and keep the reading."""
        try:
            watts = self.sensor.read_watts()
        except Exception:  # noqa: BLE001 - a sensor bug must not stop the meter
            watts = None
        if watts is None:
            self.failed += 1
            return None
        with self._lock:
            self._ring[self._n % len(self._ring)] = (self.clock(), watts)
            self._n += 1
        return watts

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, watts) of the kept samples, oldest first."""
        with self._lock:
            n, size = self._n, len(self._ring)
            data = (self._ring[:n] if n <= size
                    else np.roll(self._ring, -(n % size), axis=0)).copy()
        return data[:, 0], data[:, 1]

    def watts_now(self) -> float | None:
        times, watts = self.samples()
        return float(watts[-1]) if watts.size else None

    def run_watts(self, window: dict[str, np.ndarray]) -> np.ndarray:
        """The board's watts at each run of a recorder window (at its midpoint, between the
        samples around it; before the first / after the last sample: that sample)."""
        times, watts = self.samples()
        if not watts.size or not window["seconds"].size:
            return np.full(window["seconds"].shape, np.nan)
        middle = window["end"] - 0.5 * window["seconds"]
        return np.interp(middle, times, watts)

    def in_runs(self, window: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(watts, threads) of the samples taken while a run of the window was in progress."""
        times, watts = self.samples()
        ends, starts = window["end"], window["end"] - window["seconds"]
        if not times.size or not ends.size:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        order = np.argsort(starts)
        starts, ends, threads = starts[order], ends[order], window["threads"][order]
        run = np.searchsorted(starts, times, side="right") - 1  # the last run started before
        inside = (run >= 0) & (ends[np.maximum(run, 0)] >= times)
        return watts[inside], threads[run[inside]]

    def info(self, window: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        times, watts = self.samples()
        out: dict[str, Any] = {"source": self.source, "sensor": self.sensor.name,
                               "samples": int(watts.size), "failed_reads": self.failed,
                               "interval_s": self.interval_s,
                               "last_w": round(float(watts[-1]), 4) if watts.size else None}
        if window is not None:
            out["in_runs"] = int(self.in_runs(window)[0].size)
        return out

    def start(self) -> PowerMeter:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="edgekit-meter",
                                            daemon=True)
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self._thread = None


def measured_energy(meter: PowerMeter, window: dict[str, np.ndarray]) -> dict[str, Any]:
    """Energy per sample and busy watts of a recorder window from the meter's samples."""
    seconds, rows, weight = window["seconds"], window["rows"], window["weight"]
    if not seconds.size:
        return {}
    watts = meter.run_watts(window)
    if not np.isfinite(watts).all():
        return {}
    busy = float((seconds * weight).sum())
    energy = float((watts * seconds * weight).sum())
    samples = int((rows * weight).sum())
    return {"energy_j_per_sample": energy / max(1, samples),
            "busy_power_w": round(energy / busy, 3) if busy > 0 else None}


class MeasuredPower:
    """The tuner's power figures from the meter where measured, the profile's model else.

    The same interface as ``edgekit.targets.PowerModel`` (``watts``, ``energy_j``), so the
    policies read it unchanged. ``window`` gives the recorder's recent runs."""

    def __init__(self, model: PowerModel, meter: PowerMeter,
                 window: Callable[[], dict[str, np.ndarray]]) -> None:
        self.model = model
        self.meter = meter
        self.window = window

    def measured(self) -> dict[int, float]:
        """Thread count -> mean board watts of the samples taken inside runs at it."""
        try:
            watts, threads = self.meter.in_runs(self.window())
        except Exception:  # noqa: BLE001 - fall back to the model
            return {}
        return {int(t): float(watts[threads == t].mean()) for t in np.unique(threads)
                if t > 0}

    def watts(self, threads: int) -> float:
        table = self.measured()
        if threads in table:
            return table[threads]
        if table:  # the model's shape, scaled to what was measured
            ratio = np.mean([w / self.model.watts(t) for t, w in table.items()])
            return float(self.model.watts(threads) * ratio)
        return self.model.watts(threads)

    def energy_j(self, threads: int, seconds: float) -> float:
        return self.watts(threads) * seconds
