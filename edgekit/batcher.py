"""Power-aware batcher behind ``Model.submit``: many callers, one worker, futures back.

The worker takes the oldest request, then collects more until the batch is full or the
request has waited ``max_wait``; it runs them as one backend call and splits the outputs.
How long it waits, how big batches get and how much idle time it leaves between batches
follow the power state (and threads follow it through the tuner):

=================  =========  ==========================  ===========================
state              max batch  wait                        idle gap after a batch
=================  =========  ==========================  ===========================
normal / unknown   max_batch  0 (latency), 2 ms, or 10%   none
                              of the latency budget
on_battery / hot   2x         25% of the latency budget   as long as the batch ran
throttled / low    4x         40% of the latency budget   twice the batch time
=================  =========  ==========================  ===========================

A batch never waits past half the profile's latency budget, and its size is capped so that
its estimated run time fits the budget: p95 stays within ``budgets.latency_ms``.
Larger batches amortise per-call overhead (less energy per sample); idle gaps let the
governor drop the clock. A failing batch fails exactly its own futures; the worker goes on.
"""

from __future__ import annotations

import atexit
import collections
import queue
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgekit.errors import InternalError, QueueFullError, UserError
from edgekit.policy import check_policy
from edgekit.power import HOT, LOW_BATTERY, NORMAL, ON_BATTERY, THROTTLED, PowerMonitor
from edgekit.session import SessionLike
from edgekit.stats import percentiles_ms

_STOP = object()


@dataclass(frozen=True)
class BatchPolicy:
    state: str
    max_batch: int
    max_wait_s: float
    gap: float  # idle time after a batch, as a multiple of that batch's run time
    max_delay_s: float  # no request waits longer than this before its batch starts


def batch_policy(state: str, policy: str, max_batch: int, max_wait_ms: float | None,
                 budget_s: float) -> BatchPolicy:
    """The batching rule for a power state and tuning policy (see the module table)."""
    user_wait = None if max_wait_ms is None else max(0.0, max_wait_ms) / 1000.0
    delay = 0.5 * budget_s
    if state in (THROTTLED, LOW_BATTERY):
        wait = max(user_wait or 0.0, 0.4 * budget_s)
        return BatchPolicy(state, max_batch * 4, min(wait, delay), 2.0, delay)
    if state in (ON_BATTERY, HOT):
        wait = max(user_wait or 0.0, 0.25 * budget_s)
        return BatchPolicy(state, max_batch * 2, min(wait, delay), 1.0, delay)
    default = {"latency": 0.0, "balanced": min(0.002, 0.02 * budget_s),
               "efficiency": 0.1 * budget_s}[policy]
    wait = default if user_wait is None else user_wait
    return BatchPolicy(state, max_batch, min(wait, delay), 0.0, max(delay, wait))


class _Request:
    __slots__ = ("feeds", "future", "t", "rows", "key")

    def __init__(self, feeds: dict[str, np.ndarray], future: Future,
                 axes: dict[str, int] | None = None) -> None:
        self.feeds = feeds
        self.future = future
        self.t = time.perf_counter()
        axes = axes or {}
        name, first = next(iter(feeds.items()))
        self.rows = int(first.shape[axes.get(name, 0)]) if first.ndim else 1
        # requests batch together only when every non-batch dimension agrees
        self.key = tuple((n, a.shape[:axes.get(n, 0)] + a.shape[axes.get(n, 0) + 1:])
                         for n, a in feeds.items())


class Batcher:
    """One worker thread forming batches for a session; thread-safe ``submit``.
    ``policy`` is the model's tuning policy, ``budget_ms`` the profile's latency budget."""

    def __init__(self, session: SessionLike, policy: str = "balanced", budget_ms: float = 100.0,
                 max_batch: int = 8, max_wait_ms: float | None = None, queue_size: int = 1024,
                 monitor: PowerMonitor | None = None) -> None:
        if max_batch < 1 or queue_size < 1:
            raise UserError(f"max_batch and queue_size must be >= 1; got {max_batch}, "
                            f"{queue_size}")
        self.session = session
        self.policy = check_policy(policy)
        self.max_batch = int(max_batch)
        self.max_wait_ms = max_wait_ms
        self.queue_size = int(queue_size)
        self.monitor = monitor
        self.budget_s = float(budget_ms) / 1000.0
        fixed = session.inputs[0].fixed_batch if session.inputs else None
        # inputs and outputs whose samples are off axis 0 (--batch-axis at build time)
        self._axes = {s.name: getattr(s, "batch_axis", 0) for s in session.inputs}
        self._out_axes = [getattr(s, "batch_axis", 0) for s in getattr(session, "outputs", [])]
        self._one_per_batch = fixed is not None and fixed > 1  # cannot concatenate requests
        self._queue: queue.Queue = queue.Queue(maxsize=self.queue_size)
        self._carry: collections.deque[_Request] = collections.deque()
        self._lock = threading.Lock()
        self._closed = False
        self._policy: BatchPolicy | None = None
        self.policy_changes: list[tuple[float, BatchPolicy]] = []
        self._per_row: float | None = None  # moving average of batch time per row
        self._next_start = 0.0
        self._request_seconds: collections.deque[float] = collections.deque(maxlen=4096)
        self.batches = 0
        self.failed_batches = 0
        self.completed = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="edgekit-batcher", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    # -- callers ----------------------------------------------------------------------
    def submit(self, x: Any) -> Future:
        feeds = self.session.prepare_feeds(x)  # bad input fails in the caller, not the batch
        future: Future = Future()
        request = _Request(feeds, future, self._axes)
        with self._lock:
            if self._closed:
                raise UserError("submit() after close(): the model is closed (expected an "
                                "open model; load it again)")
            try:
                self._queue.put_nowait(request)
            except queue.Full:
                raise QueueFullError(
                    f"request queue is full ({self.queue_size} waiting; expected fewer): "
                    "slow down, retry later, or load with a larger queue_size"
                ) from None
        return future

    def close(self) -> None:
        """Stop taking requests, run every queued one, then stop the worker."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(_STOP)  # after every accepted request (FIFO)
        self._thread.join()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- worker -----------------------------------------------------------------------
    def current_policy(self) -> BatchPolicy:
        state = self.monitor.reading.state if self.monitor is not None else NORMAL
        if self._policy is None or self._policy.state != state:
            self._policy = batch_policy(state, self.policy,
                                        self.max_batch, self.max_wait_ms, self.budget_s)
            self.policy_changes.append((time.perf_counter(), self._policy))
        return self._policy

    def _limit(self, policy: BatchPolicy) -> int:
        limit = policy.max_batch
        if self._per_row:  # keep the batch's own run time inside the latency budget
            fits = int((0.8 * self.budget_s - policy.max_wait_s) / self._per_row)
            limit = max(1, min(limit, fits))
        return limit

    def _run(self) -> None:
        stopping = False
        while True:
            if self._carry:
                first = self._carry.popleft()
            elif stopping:
                return
            else:
                first = self._queue.get()
                if first is _STOP:
                    stopping = True
                    continue
            policy = self.current_policy()
            limit = first.rows if self._one_per_batch else self._limit(policy)
            items, rows = [first], first.rows
            deadline = min(max(first.t + policy.max_wait_s, self._next_start),
                           first.t + policy.max_delay_s)
            while rows < limit and not stopping:
                remaining = deadline - time.perf_counter()
                try:
                    item = (self._queue.get(timeout=remaining) if remaining > 0
                            else self._queue.get_nowait())
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                if item.key != first.key or rows + item.rows > limit:
                    self._carry.append(item)  # next batch
                    if item.key == first.key:
                        break
                    continue
                items.append(item)
                rows += item.rows
            self._execute(items, rows, policy)

    def _execute(self, items: list[_Request], rows: int, policy: BatchPolicy) -> None:
        live = [r for r in items if r.future.set_running_or_notify_cancel()]
        if not live:
            return
        batch_id = self.batches
        self.batches += 1
        rows = sum(r.rows for r in live)
        t0 = time.perf_counter()
        try:
            if len(live) == 1:
                feeds = live[0].feeds
            else:
                feeds = {name: np.concatenate([r.feeds[name] for r in live],
                                              axis=self._axes.get(name, 0))
                         for name in live[0].feeds}
            outputs = self.session.run_feeds(feeds)
        except Exception as exc:
            error = InternalError(
                f"batch {batch_id} ({len(live)} requests, {rows} rows) failed in "
                f"{self.session.runtime}: {exc}"
            )
            error.__cause__ = exc
            for request in live:
                request.future.batch_id = batch_id
                request.future.set_exception(error)
            self.failed_batches += 1
            self.failed += len(live)
            self._next_start = time.perf_counter()
            return
        t1 = time.perf_counter()
        per_row = (t1 - t0) / max(1, rows)
        self._per_row = per_row if self._per_row is None else 0.8 * self._per_row + 0.2 * per_row
        self._next_start = t1 + policy.gap * (t1 - t0)
        offset = 0
        for request in live:
            part = [o[offset:offset + request.rows] if not self._out_axis(j) else
                    np.take(o, range(offset, offset + request.rows), axis=self._out_axis(j))
                    for j, o in enumerate(outputs)]
            offset += request.rows
            request.future.batch_id = batch_id
            request.future.set_result(self.session.format_outputs(part))
            self._request_seconds.append(t1 - request.t)
        self.completed += len(live)

    def _out_axis(self, index: int) -> int:
        return self._out_axes[index] if index < len(self._out_axes) else 0

    # -- metrics ----------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        policy = self._policy or self.current_policy()
        return {
            "state": policy.state, "max_batch": policy.max_batch,
            "max_wait_ms": round(policy.max_wait_s * 1e3, 3), "idle_gap": policy.gap,
            "queued": self._queue.qsize(), "batches": self.batches,
            "failed_batches": self.failed_batches, "completed": self.completed,
            "failed": self.failed, "policy_changes": len(self.policy_changes),
            "request_latency_ms": percentiles_ms(list(self._request_seconds)),
        }


# Finish queued requests before the interpreter tears down (a daemon worker inside a
# runtime call at teardown can abort the process); close() is idempotent.
_LIVE: weakref.WeakSet[Batcher] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for batcher in list(_LIVE):
        batcher.close()
