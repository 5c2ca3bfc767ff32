"""Other models of this process running at the same time as this one: how many of their
threads run alongside this model's executions, read from their execution recorders.

The tuner's fast load signal (``stats.BusyMeter``: proc/stat) subtracts this whole process,
so a second model serving in the same process is invisible to it: two models that each
picked 2 threads alone then run 4 threads on 2 cores and fight, and neither tuner notices
(a model's latency under that fight is its baseline from the first request, so no drift
shows either). Models register their session here (the batcher and the tuner do); the
tuner compares the threads alongside its runs now with those alongside its last tuning.

Only executions that overlap in time count: models served in turns (one idle while the
other runs) do not share cores, however busy each is.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Protocol

import numpy as np

from edgekit.runtime.stats import Recorder

RECENT_S = 5.0  # own executions older than this are not the current traffic
HISTORY = 256  # entries of each other recorder looked at (the newest): the tuner checks
# every 0.25 s and this runs on its thread, holding the GIL the serving threads need


class HasRecorder(Protocol):
    recorder: Recorder


_SESSIONS: weakref.WeakSet[HasRecorder] = weakref.WeakSet()
_LOCK = threading.Lock()


def register(session: HasRecorder) -> None:
    """Count ``session``'s executions as sharing the cores with every other one."""
    with _LOCK:
        _SESSIONS.add(session)


def _others(own: HasRecorder) -> list[Recorder]:
    with _LOCK:
        return [s.recorder for s in _SESSIONS if s is not own]


Intervals = tuple[np.ndarray, np.ndarray, np.ndarray]  # starts, ends, threads


def _intervals(window: dict[str, np.ndarray]) -> Intervals:
    ends = window["end"]
    threads = np.maximum(window["threads"], 1) * np.maximum(window["weight"], 1)
    return ends - window["seconds"], ends, threads.astype(np.float64)


def _others_since(own: HasRecorder, start: float) -> list[Intervals]:
    """The newest executions of every other model that ran after ``start``."""
    out = []
    for recorder in _others(own):
        n = recorder.n
        if n == 0 or recorder.window(n - 1)["end"][0] <= start:  # idle since: skip cheaply
            continue
        out.append(_intervals(recorder.window(n - HISTORY)))
    return out


def threads_alongside(starts: np.ndarray, ends: np.ndarray, others: list[Intervals]) -> float:
    """Mean number of other threads running during the intervals ``[starts, ends]``:
    each other execution's threads times its overlap, over the intervals' total time."""
    total = float(np.sum(ends - starts))
    if total <= 0.0:
        return 0.0
    shared = 0.0
    lo, hi = float(starts.min()), float(ends.max())
    for o_starts, o_ends, o_threads in others:
        keep = (o_ends > lo) & (o_starts < hi)
        if not keep.any():
            continue
        overlap = (np.minimum(ends[:, None], o_ends[keep][None, :])
                   - np.maximum(starts[:, None], o_starts[keep][None, :]))
        shared += float((np.clip(overlap, 0.0, None) * o_threads[keep][None, :]).sum())
    return shared / total


def shared_threads(own: HasRecorder, window: dict[str, np.ndarray]) -> float | None:
    """Other models' threads alongside ``own``'s executions in ``window`` (a window of its
    recorder) that ended in the last ``RECENT_S`` seconds; None when there are none."""
    starts, ends, _ = _intervals(window)
    recent = ends >= time.perf_counter() - RECENT_S
    if not recent.any():
        return None
    starts, ends = starts[recent], ends[recent]
    return threads_alongside(starts, ends, _others_since(own, float(starts.min())))


def shared_during(own: HasRecorder, start: float, end: float) -> float:
    """Other models' threads running on average between ``start`` and ``end`` (perf_counter
    seconds), e.g. while the tuner probed: the reference a later ``shared_threads`` is
    compared with."""
    if end <= start:
        return 0.0
    return threads_alongside(np.array([start]), np.array([end]), _others_since(own, start))
