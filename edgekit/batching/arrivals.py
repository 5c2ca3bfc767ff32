"""When waiting for a fuller batch pays: the batcher's wait decision from observed arrivals.

Waiting ``max_wait`` for companions that do not come adds that wait to every request and
costs energy (the worker wakes for nothing, the batch is still 1). So the batcher waits for
the next request only while one is likely soon: ``step_s`` is the 75th percentile of the
recent inter-arrival times (with 25% slack for jitter) when that fits in the policy's wait,
else 0 (do not wait). The batcher re-arms that step after every companion, within the
policy's overall wait: a steady stream slower than the wait never waits; a fast one fills
its batches; when a burst ends, at most one step is lost. A percentile, not the mean, so
that one long pause does not stop batching, and catch-up bursts of a late sender (gaps of
0 between slow ones) do not start waits that the slow gaps then waste.
"""

from __future__ import annotations

import collections

WINDOW = 32  # gaps remembered
MIN_GAPS = 4  # fewer than this: no evidence, wait as the policy says


class ArrivalTracker:
    """Inter-arrival times of requests, fed with their submit times in order (one worker)."""

    def __init__(self, window: int = WINDOW) -> None:
        self._gaps: collections.deque[float] = collections.deque(maxlen=window)
        self._last: float | None = None
        self._step: float | None = None  # cached until the next gap

    def observe(self, t: float) -> None:
        """A request submitted at ``t`` (perf_counter seconds); repeated or older: ignored."""
        last = self._last
        if last is not None and t <= last:
            return
        self._last = t
        if last is not None:
            self._gaps.append(t - last)
            self._step = None

    def step_s(self, max_wait_s: float) -> float | None:
        """How long to wait for the next request: None without evidence (wait as the policy
        says), 0 when the next one is unlikely within ``max_wait_s``, else the step."""
        if max_wait_s <= 0:
            return 0.0
        if len(self._gaps) < MIN_GAPS:
            return None
        if self._step is None:
            self._step = _percentile(sorted(self._gaps), 0.75) * 1.25
        return self._step if self._step <= max_wait_s else 0.0


def _percentile(ordered: list[float], q: float) -> float:
    """numpy.percentile's default (linear) on a sorted list: it runs on every request in the
    batcher's worker, where numpy's ~70 us per call (holding the GIL) was a quarter of a small
    model's run and delayed the other threads of the process (the caller, other models)."""
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
