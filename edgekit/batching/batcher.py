"""Power-aware batcher behind ``Model.submit``: many callers, one worker, futures back.

The worker takes the oldest request, then collects more until the batch is full or the
request has waited ``max_wait``; it runs them as one backend call and splits the outputs.
How long it waits, how big batches get and how much idle time it leaves between batches
follow the power state and the tuning policy (the table is in ``edgekit/batching/batch_policy.py``);
threads follow the power state through the tuner.

Never mixed, never lost: requests are joined only when every output is proven per-row
(``edgekit/batching/per_row.py``: the batcher's own probe on random rows, before the first batch and
again at intervals; unproven: one request per run), and a result's row count is checked
before it is split. A failing batch is retried request by request, so only a bad request
fails. Everything the worker does is guarded: should it ever stop, every pending future
fails with ``BatcherDeadError`` and ``submit`` raises it. ``close()`` sets a flag (it never
queues behind a full queue). ``run_timeout_s`` bounds each backend run (``edgekit/device/timed_run.py``):
a batch, the per-row probe, each retry alone; not the time a request waits in the queue (see
``RuntimeOptions.run_timeout_s`` for the worst case of one request)."""

from __future__ import annotations

import atexit
import collections
import math
import threading
import time
import weakref
from concurrent.futures import Future, InvalidStateError
from typing import Any

import numpy as np

from edgekit.adapt import sharing
from edgekit.batching.arrivals import ArrivalTracker
from edgekit.batching.batch_policy import BatchPolicy, batch_policy, may_join
from edgekit.batching.batch_requests import Request, check_rows, describe_feeds, mark_running
from edgekit.batching.per_row import PerRowProof
from edgekit.device.power import NORMAL, PowerMonitor
from edgekit.device.timed_run import TimedRunner
from edgekit.errors import (
    BatcherDeadError,
    EdgekitError,
    InternalError,
    ModelClosedError,
    QueueFullError,
    RunTimeoutError,
    UserError,
)
from edgekit.runtime.options import check_policy
from edgekit.runtime.session import SessionLike
from edgekit.runtime.stats import percentiles_ms


class Batcher:
    """One worker thread forming batches for a session; thread-safe ``submit``.
    ``policy`` is the model's tuning policy, ``budget_ms`` the profile's latency budget."""

    def __init__(self, session: SessionLike, policy: str = "balanced", budget_ms: float = 100.0,
                 max_batch: int = 8, max_wait_ms: float | None = None, queue_size: int = 1024,
                 monitor: PowerMonitor | None = None, run_timeout_s: float | None = None
                 ) -> None:
        if max_batch < 1 or queue_size < 1:
            raise UserError(f"max_batch and queue_size must be >= 1; got {max_batch}, "
                            f"{queue_size}")
        if run_timeout_s is not None and not (math.isfinite(run_timeout_s)
                                              and run_timeout_s > 0):
            raise UserError(f"run_timeout_s must be a number of seconds > 0 or None; got "
                            f"{run_timeout_s!r}")
        self.session = session
        sharing.register(session)  # its runs share the cores with other models' (tuner)
        self.policy = check_policy(policy)
        self.max_batch = int(max_batch)
        self.max_wait_ms = max_wait_ms
        self.queue_size = int(queue_size)
        self.monitor = monitor
        self.budget_s = float(budget_ms) / 1000.0
        fixed = session.inputs[0].fixed_batch if session.inputs else None
        self._one_per_batch = fixed is not None and fixed > 1  # cannot concatenate requests
        # the manifest's shapes, else the batcher's own probe (per_row.py) before the first
        # batch and again at intervals
        self.per_row = PerRowProof(session.inputs, getattr(session, "outputs", []))
        self.run_timeout_s = run_timeout_s
        self._runner = TimedRunner() if run_timeout_s is not None else None
        self._pending: collections.deque[Request] = collections.deque()
        self._carry: collections.deque[Request] = collections.deque()
        self._inflight: list[Request] = []
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._closed = False
        self._dead: BaseException | None = None  # why the worker stopped, if it did
        self._policy: BatchPolicy | None = None
        self.policy_changes: list[tuple[float, BatchPolicy]] = []
        self._per_row: float | None = None  # moving average of batch time per row
        self._next_start = 0.0
        # an input or output may keep its samples off axis 0 (--batch-axis: a recurrent state)
        self._axes = {sp.name: getattr(sp, "batch_axis", 0) for sp in session.inputs}
        self._out_axes = [getattr(sp, "batch_axis", 0) for sp in getattr(session, "outputs", [])]
        self._arrivals = ArrivalTracker()  # whether waiting for companions pays (arrivals.py)
        self._request_seconds: collections.deque[float] = collections.deque(maxlen=4096)
        self.batches = 0
        self.failed_batches = 0
        self.completed = 0
        self.failed = 0
        self.retried_batches = 0
        self.timeouts = 0
        self.joined_batches = 0  # batches of more than one request
        self._thread = threading.Thread(target=self._run, name="edgekit-batcher", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    # -- callers ----------------------------------------------------------------------
    def submit(self, x: Any, block: bool = True, timeout: float | None = None) -> Future:
        """Queue one request. A full queue makes the caller wait for room (``block``; at most
        ``timeout`` seconds, then ``QueueFullError``) or, with ``block=False``, raises
        ``QueueFullError`` at once."""
        feeds = self.session.prepare_feeds(x)  # bad input fails in the caller, not the batch
        future: Future = Future()
        request = Request(feeds, future, self._axes)
        deadline = None if timeout is None else time.perf_counter() + max(0.0, timeout)
        with self._not_full:
            while True:
                self._check_open()
                if len(self._pending) < self.queue_size:
                    break
                remaining = None if deadline is None else deadline - time.perf_counter()
                if not block or (remaining is not None and remaining <= 0):
                    waited = "" if not block else f" after waiting {timeout} s"
                    raise QueueFullError(
                        f"request queue is full ({self.queue_size} waiting; expected fewer)"
                        f"{waited}: slow down, retry later, or load with a larger queue_size")
                self._not_full.wait(remaining)
            self._pending.append(request)
            self._not_empty.notify()
        return future

    def _check_open(self) -> None:
        if self._dead is not None:
            raise BatcherDeadError(f"the batcher's worker stopped ({self._dead!r}); expected "
                                   "a running batcher: load the model again") from self._dead
        if self._closed:
            raise ModelClosedError("submit() after close(): the model is closed (expected an "
                                   "open model; load it again)")

    def close(self, timeout: float | None = None) -> None:
        """Stop taking requests, run every queued one, then stop the worker. Requests still
        queued after ``timeout`` seconds fail (``ModelClosedError``). With a run bound, a run
        that times out while closing fails every request still queued (the runtime is
        stuck: each would wait as long again), so close() returns within the time the
        queue takes to run plus one ``run_timeout_s``."""
        with self._lock:
            self._closed = True
            self._not_empty.notify_all()
            self._not_full.notify_all()  # blocked submitters raise ModelClosedError
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        if self._thread.is_alive():
            self._fail_pending(ModelClosedError(
                f"the model was closed before this request ran (close waited {timeout} s)"))
        if self._runner is not None:
            self._runner.stop()

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
            fits = (0.8 * self.budget_s - policy.max_wait_s) / self._per_row
            if math.isfinite(fits):  # a NaN budget must not stop the worker
                limit = max(1, min(limit, int(fits)))
        return limit

    def _take(self, deadline: float | None) -> Request | None:
        """The oldest queued request; None once closed and empty, or at ``deadline``."""
        with self._not_empty:
            while not self._pending:
                if self._closed:
                    return None
                remaining = None if deadline is None else deadline - time.perf_counter()
                if remaining is not None and remaining <= 0:
                    return None
                self._not_empty.wait(remaining)
            request = self._pending.popleft()
            self._not_full.notify()
            return request

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - nothing may be lost: fail, then report
            with self._lock:
                self._dead = exc
                self._not_full.notify_all()
            self._fail_pending(BatcherDeadError(
                f"the batcher's worker stopped on {type(exc).__name__}: {exc} (a bug to "
                "report); this request did not run"))

    def _fail_pending(self, error: EdgekitError) -> None:
        with self._lock:
            requests = [*self._inflight, *self._carry, *self._pending]
            self._carry.clear()
            self._pending.clear()
            self._not_full.notify_all()
        for request in requests:
            if not request.future.done():
                try:
                    request.future.set_exception(error)
                except InvalidStateError:  # finished by the worker meanwhile
                    pass

    def _loop(self) -> None:
        while True:
            first = self._carry.popleft() if self._carry else self._take(None)
            if first is None:
                return
            self._inflight = [first]
            if not self._one_per_batch and self.per_row.due(self.joined_batches):
                with self.session.probing():  # a probe, not requests: no samples, no drift
                    self.per_row.prove(self._call, first.feeds, self._axes, self.joined_batches)
            policy = self.current_policy()
            joinable = self.outputs_per_row and not self._one_per_batch
            limit = self._limit(policy) if joinable else first.rows
            items, rows = self._inflight, first.rows
            deadline = min(max(first.t + policy.max_wait_s, self._next_start),
                           first.t + policy.max_delay_s)
            self._arrivals.observe(first.t)
            step = self._arrivals.step_s(policy.max_wait_s)  # None: no companion is likely
            last = first.t
            while rows < limit:
                until = deadline if step is None else min(deadline, max(last + step,
                                                                       self._next_start))
                item = self._take(until)
                if item is None:
                    break
                self._arrivals.observe(item.t)
                last = max(last, item.t)
                # too fresh to join (mains): the ones queued after it are fresher still
                fresh = not may_join(policy, time.perf_counter() - item.t, self._per_row)
                if item.key != first.key or rows + item.rows > limit or fresh:
                    self._carry.append(item)  # next batch
                    if item.key == first.key or fresh:
                        break
                    continue
                items.append(item)
                rows += item.rows
            self._execute(items, rows, policy)
            self._inflight = []

    @property
    def outputs_per_row(self) -> bool | None:
        """Whether requests may be joined (``per_row.PerRowProof``; None: not proven yet)."""
        return self.per_row.verdict

    @outputs_per_row.setter
    def outputs_per_row(self, verdict: bool | None) -> None:
        self.per_row.verdict = verdict

    def _call(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self._runner is None or self.run_timeout_s is None:
            return self.session.run_feeds(feeds)
        try:
            return self._runner.call(self.session.run_feeds, feeds, self.run_timeout_s)
        except (TimeoutError, RunTimeoutError):
            # a model that can loop without end also bounds its runs inside the backend
            # (``runtime/run_bounds.py``, the same seconds): whichever bound fires first, the
            # request fails and the session is replaced (a race under load made it either)
            self.timeouts += 1
            old = self.session.backend
            stopped = old.terminate()
            self.session.swap(self.session.make_backend(old.options), close=stopped)
            raise RunTimeoutError(
                f"{self.session.runtime} ran longer than run_timeout_s={self.run_timeout_s} "
                f"on input {describe_feeds(feeds)}; the session was replaced"
                f"{'' if stopped else ' (the runtime cannot stop a run: it goes on)'}"
            ) from None

    def _execute(self, items: list[Request], rows: int, policy: BatchPolicy) -> None:
        live = [r for r in items if mark_running(r.future)]
        if not live:
            return
        batch_id = self.batches
        self.batches += 1
        rows = sum(r.rows for r in live)
        t0 = time.perf_counter()
        try:
            if len(live) == 1:
                outputs = self._call(live[0].feeds)
            else:
                outputs = self._call({name: np.concatenate([r.feeds[name] for r in live],
                                                           axis=self._axes.get(name, 0))
                                      for name in live[0].feeds})
                check_rows(outputs, rows, self.session.runtime, self._out_axes)
                self.joined_batches += 1
        except Exception as exc:  # noqa: BLE001 - reported through the futures
            self.failed_batches += 1
            self._next_start = time.perf_counter()
            if len(live) == 1 or isinstance(exc, RunTimeoutError):
                # a stuck run fails its whole batch: retrying each request alone could wait
                # run_timeout_s once more per request behind it
                for request in live:
                    self._fail(request, batch_id, exc)
                if isinstance(exc, RunTimeoutError) and self._closed:
                    self._fail_pending(ModelClosedError(
                        f"the model was closed while its runtime was stuck ({exc}); this "
                        "request did not run"))
            else:  # find the bad request: each runs alone, only it fails
                self.retried_batches += 1
                for request in live:
                    self._execute_alone(request, batch_id)
            return
        t1 = time.perf_counter()
        per_row = (t1 - t0) / max(1, rows)
        self._per_row = per_row if self._per_row is None else 0.8 * self._per_row + 0.2 * per_row
        self._next_start = t1 + policy.gap * (t1 - t0)
        if len(live) == 1:  # whole outputs: right for any model, per-row or not
            self._succeed(live[0], batch_id, outputs, t1)
        else:
            offset = 0
            for request in live:
                self._succeed(request, batch_id,
                              [np.take(o, range(offset, offset + request.rows),
                                       axis=self._out_axis(j)) if self._out_axis(j) else
                               o[offset:offset + request.rows] for j, o in enumerate(outputs)], t1)
                offset += request.rows

    def _out_axis(self, index: int) -> int:
        return self._out_axes[index] if index < len(self._out_axes) else 0

    def _execute_alone(self, request: Request, batch_id: int) -> None:
        try:
            outputs = self._call(request.feeds)
        except Exception as exc:  # noqa: BLE001 - reported through the future
            self._fail(request, batch_id, exc)
        else:
            self._succeed(request, batch_id, outputs, time.perf_counter())

    def _succeed(self, request: Request, batch_id: int, outputs: list[np.ndarray],
                 t1: float) -> None:
        request.future.batch_id = batch_id
        try:
            request.future.set_result(self.session.format_outputs(outputs))
        except InvalidStateError:  # failed meanwhile by close(timeout=...)
            return
        self._request_seconds.append(t1 - request.t)
        self.completed += 1

    def _fail(self, request: Request, batch_id: int, exc: Exception) -> None:
        if not isinstance(exc, EdgekitError):
            error: EdgekitError = InternalError(
                f"batch {batch_id}: {self.session.runtime} failed on input "
                f"{describe_feeds(request.feeds)}: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
        else:
            error = exc
        request.future.batch_id = batch_id
        try:
            request.future.set_exception(error)
        except InvalidStateError:  # failed meanwhile by close(timeout=...)
            return
        self.failed += 1

    # -- metrics ----------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        policy = self._policy or self.current_policy()
        return {
            "state": policy.state, "max_batch": policy.max_batch,
            "max_wait_ms": round(policy.max_wait_s * 1e3, 3), "idle_gap": policy.gap,
            "queued": len(self._pending), "batches": self.batches,
            "failed_batches": self.failed_batches, "completed": self.completed,
            "failed": self.failed, "retried_batches": self.retried_batches,
            "timeouts": self.timeouts, "outputs_per_row": self.outputs_per_row,
            "per_row_reason": self.per_row.reason, "per_row_probes": self.per_row.probes,
            "alive": self._thread.is_alive() and self._dead is None,
            "policy_changes": len(self.policy_changes),
            "request_latency_ms": percentiles_ms(list(self._request_seconds)),
        }


# Finish queued requests before the interpreter tears down (a daemon worker inside a
# runtime call at teardown can abort the process); close() is idempotent.
_LIVE: weakref.WeakSet[Batcher] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for batcher in list(_LIVE):
        batcher.close()
