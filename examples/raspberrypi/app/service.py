"""The service loop: frames in, ``Model.submit`` futures out, stats every interval.

Frames are submitted to edgekit's power-aware batcher (``Model.submit``) and results are
taken back in order, so a slow frame never reorders the output. At most ``max_inflight``
frames wait at once: a camera then simply captures less often (its driver keeps only the
newest frame), a folder is read no faster than the model runs.

Degrading when the board throttles is shared between three parts: the power monitor
reports the state; the batcher and the thread tuner (inside edgekit) react on their own;
this loop lowers the frame rate (``FPS_FACTOR``) and logs each change.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from app.frames import Preprocessor
from edgekit.device.power import (
    HOT,
    LOW_BATTERY,
    NORMAL,
    ON_BATTERY,
    POWER_LIMIT,
    THROTTLED,
    UNKNOWN,
)
from edgekit.errors import UserError

log = logging.getLogger("classify")

# share of the configured frame rate kept in each power state
FPS_FACTOR = {NORMAL: 1.0, UNKNOWN: 1.0, ON_BATTERY: 0.5, HOT: 0.5, POWER_LIMIT: 0.5,
              THROTTLED: 0.25, LOW_BATTERY: 0.25}


@dataclass
class Result:
    frame: int
    source: str
    cls: int
    label: str
    probability: float
    latency_ms: float  # capture to result, including queueing and batching

    def as_dict(self) -> dict[str, Any]:
        return {"frame": self.frame, "source": self.source, "class": self.cls,
                "label": self.label, "probability": round(self.probability, 6),
                "latency_ms": round(self.latency_ms, 3)}


@dataclass
class Summary:
    frames: int = 0
    skipped: int = 0  # frames that could not be read or preprocessed
    results: list[Result] = field(default_factory=list)
    stats_lines: int = 0
    power_changes: list[tuple[str, str]] = field(default_factory=list)


def _stamp_done(future: concurrent.futures.Future) -> None:
    future.t_done = time.perf_counter()


def softmax_top(scores: np.ndarray) -> tuple[int, float]:
    """(class, probability) of one row of logits; probabilities pass through unchanged."""
    row = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not (np.all(row >= 0) and abs(row.sum() - 1.0) < 1e-3):
        row = np.exp(row - row.max())
        row /= row.sum()
    best = int(np.argmax(row))
    return best, float(row[best])


class Service:
    def __init__(self, model: Any, source: Any, pre: Preprocessor, fps: float = 10.0,
                 max_frames: int | None = None, stats_interval: float = 60.0,
                 max_inflight: int = 16, labels: list[str] | None = None,
                 output: IO[str] | None = None, log_results: str = "changes",
                 keep_results: bool = False) -> None:
        self.model, self.source, self.pre = model, source, pre
        self.fps = max(0.0, fps)
        self.max_frames = max_frames
        self.stats_interval = stats_interval
        self.max_inflight = max(1, max_inflight)
        self.labels = labels
        self.output = output
        self.log_results = log_results
        self.keep_results = keep_results
        self.stop_event = threading.Event()
        self.summary = Summary()
        self._window: list[float] = []  # end-to-end seconds of results in this stats window
        self._window_start = time.perf_counter()
        self._window_batches: set = set()  # batch ids (set by edgekit's batcher) in this window
        self._last_class: int | None = None
        self.monitor = model.power_monitor()
        self.state = self.monitor.state
        self.monitor.subscribe(self._on_power)

    # -- power ----------------------------------------------------------------------------
    def target_fps(self) -> float:
        return self.fps * FPS_FACTOR.get(self.state, 1.0)

    def _on_power(self, old: Any, new: Any) -> None:
        """Called by the power monitor's thread when the state changes."""
        self.state = new.state
        self.summary.power_changes.append((old.state, new.state))
        self.log_power(old.state, new)

    def log_power(self, old: str, reading: Any) -> None:
        temp = f"{reading.temperature_c:.1f} C" if reading.temperature_c is not None else "n/a"
        why = ", ".join(reading.conditions) or "no limits hit"
        rate = (f"frame rate {self.target_fps():.2f}/s ({FPS_FACTOR.get(reading.state, 1.0):.0%}"
                f" of {self.fps:g})" if self.fps else "frame rate unpaced")
        level = logging.INFO if reading.state in (NORMAL, UNKNOWN) else logging.WARNING
        log.log(level, "power %s -> %s (%s; %s): %s; edgekit's batcher and thread tuner "
                "follow the same state", old, reading.state, why, temp, rate)

    # -- loop -----------------------------------------------------------------------------
    def run(self) -> Summary:
        if self.state not in (NORMAL, UNKNOWN):
            self.log_power("start", self.monitor.reading)
        pending: collections.deque = collections.deque()
        next_due = time.perf_counter()
        frames = self.source.frames()
        try:
            while not self.stop_event.is_set():
                if self.max_frames is not None and self.summary.frames >= self.max_frames:
                    break
                fps = self.target_fps()
                if fps > 0:  # pace the capture, taking results while waiting
                    self._wait_until(next_due, pending)
                    if self.stop_event.is_set():
                        break
                    next_due = max(next_due + 1.0 / fps, time.perf_counter())
                frame = next(frames, None)
                if frame is None:
                    break
                try:
                    x = (self.pre.from_path(frame.path) if frame.path is not None
                         else self.pre.from_array(frame.pixels, frame.order, frame.name))
                except UserError as exc:  # one unreadable file must not stop the service
                    log.warning("skipping %s: %s", frame.name, exc)
                    self.summary.skipped += 1
                    if hasattr(self.source, "reject"):
                        self.source.reject(frame.path)  # not again on the next pass
                    continue
                future = self.model.submit(x)
                # stamp completion on the batcher's thread: latency must not include the
                # time a result waits here to be taken
                future.add_done_callback(_stamp_done)
                pending.append((frame, future))
                self.summary.frames += 1
                self._harvest(pending, block=len(pending) >= self.max_inflight)
                self._maybe_log_stats()
        finally:
            self._harvest(pending, block=True, drain=True)
            self.log_stats(final=True)
        return self.summary

    def _wait_until(self, deadline: float, pending: collections.deque) -> None:
        while not self.stop_event.is_set():
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            if pending:
                concurrent.futures.wait([pending[0][1]], timeout=remaining)
                self._harvest(pending, block=False)
            else:
                self.stop_event.wait(remaining)  # wakes at once on SIGTERM

    def _harvest(self, pending: collections.deque, block: bool, drain: bool = False) -> None:
        """Take finished results in frame order; block for the oldest when asked."""
        while pending and (drain or block or pending[0][1].done()):
            frame, future = pending.popleft()
            self._finish(frame, future)
            block = False

    def _finish(self, frame: Any, future: concurrent.futures.Future) -> None:
        scores = future.result()
        latency = getattr(future, "t_done", time.perf_counter()) - frame.t
        self._window.append(latency)
        self._window_batches.add(getattr(future, "batch_id", None))
        cls, probability = softmax_top(scores[0] if isinstance(scores, np.ndarray)
                                       else next(iter(scores.values()))[0])
        label = self.labels[cls] if self.labels and cls < len(self.labels) else str(cls)
        result = Result(frame.index, frame.name, cls, label, probability, latency * 1e3)
        if self.keep_results:
            self.summary.results.append(result)
        if self.output is not None:
            self.output.write(json.dumps(result.as_dict()) + "\n")
            self.output.flush()
        if self.log_results == "all" or (self.log_results == "changes"
                                         and cls != self._last_class):
            log.info("result frame %d %s: %s (p=%.3f) in %.1f ms", frame.index, frame.name,
                     label, probability, latency * 1e3)
        self._last_class = cls

    # -- stats ----------------------------------------------------------------------------
    def _maybe_log_stats(self) -> None:
        if (self.stats_interval > 0
                and time.perf_counter() - self._window_start >= self.stats_interval):
            self.log_stats()

    def log_stats(self, final: bool = False) -> None:
        """One line per interval (see the README's "Log lines")."""
        now = time.perf_counter()
        span = max(now - self._window_start, 1e-9)
        latencies = np.asarray(self._window) * 1e3
        stats = self.model.stats()
        batches = len(self._window_batches - {None})
        power = stats.get("power") or {}
        temp = power.get("temperature_c")
        if latencies.size:
            p50, p95, p99 = np.percentile(latencies, [50, 95, 99])
            lat = f"latency_ms p50={p50:.1f} p95={p95:.1f} p99={p99:.1f}"
        else:
            lat = "latency_ms p50=- p95=- p99=-"
        log.info(
            "%s %.1fs: frames=%d throughput=%.2f/s %s batch_mean=%s threads=%s power=%s "
            "temp=%s fps_target=%s",
            "final" if final else "stats", span, latencies.size, latencies.size / span, lat,
            f"{latencies.size / batches:.2f}" if batches else "-",
            stats.get("threads", "?"), power.get("state", "unknown"),
            f"{temp:.1f}C" if temp is not None else "n/a",
            f"{self.target_fps():.2f}" if self.fps else "unpaced")
        self.summary.stats_lines += 1
        for line in self.model.drift_warnings():  # once per stats line while it lasts
            log.warning("drift: %s", line)
        self._window = []
        self._window_batches = set()
        self._window_start = now
