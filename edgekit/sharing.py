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

from edgekit.stats import Recorder

RECENT_S = 5.0  # own executions older than this are not the current traffic
HISTORY = 1024  # entries of each other recorder looked at (the newest)


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


def _intervals(recorder: Recorder, since: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    window = recorder.window(max(since, recorder.n - HISTORY))
    ends = window["end"]
    threads = np.maximum(window["threads"], 1) * np.maximum(window["weight"], 1)
    return ends - window["seconds"], ends, threads.astype(np.float64)


def threads_alongside(starts: np.ndarray, ends: np.ndarray,
                      others: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
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


def shared_threads(own: HasRecorder, since: int) -> float | None:
    """Other models' threads alongside ``own``'s recent executions with index >= ``since``;
    None when it ran none in the last ``RECENT_S`` seconds."""
    starts, ends, _ = _intervals(own.recorder, since)
    recent = ends >= time.perf_counter() - RECENT_S
    if not recent.any():
        return None
    return threads_alongside(starts[recent], ends[recent],
                             [_intervals(r) for r in _others(own)])


def shared_during(own: HasRecorder, start: float, end: float) -> float:
    """Other models' threads running on average between ``start`` and ``end`` (perf_counter
    seconds), e.g. while the tuner probed: the reference a later ``shared_threads`` is
    compared with."""
    if end <= start:
        return 0.0
    return threads_alongside(np.array([start]), np.array([end]),
                             [_intervals(r) for r in _others(own)])
