"""Thread tuner: picks the intra-op thread count by measurement, and re-picks it when
power state, load or latency change.

Runtimes fix the thread count when a session is created, so a change means a new session:
it is built on the tuner's own thread and swapped in atomically (``Session.swap``); callers
never wait for it. The hot path only appends timings to the session's ``Recorder``. The tuner
sees the model only through ``edgekit.runtime.session.SessionLike``; its clock is injectable (the
cooldown and trigger tests step it instead of sleeping).

Policies (time per sample measured per candidate thread count: the median over timed
blocks of the mean within each block, see ``edgekit.adapt.probe.block_estimate`` and
``edgekit.runtime.stats.typical``):

* ``latency``    lowest time per sample;
* ``efficiency`` lowest energy per sample, ``watts(threads) * time`` from the profile's power model;
* ``balanced``   fewest threads whose time is within 10% of the best.

Re-tune triggers: a power state change; the 1-min load average or, faster, other processes'
CPU use (proc/stat minus this process) moving by ``load_step`` / ``busy_step`` cores; other
models of this process running alongside this one's executions (``edgekit.adapt.sharing``:
proc/stat cannot see them) by ``busy_step`` threads more or fewer than when it was tuned;
latency drifting from its moving average for ``drift_s`` of traffic without a pause (twice
as long after each drift re-tune that kept the count, up to 8x: the drift was noise, and
exploring on live traffic costs the callers' latency). An offline re-probe waits while this
process is busy with other work, which it would otherwise measure as load.

When the power monitor reports on_battery / hot, the tuner switches to ``efficiency`` with at
most half the cores; throttled / low_battery allow one thread. Every session it opens is
made by ``edgekit.runtime.options.backend_options``: spin-waiting (onnxruntime
``session.intra_op.allow_spinning``) only where the load allowed it and the policy in force
is not ``efficiency``.
"""

from __future__ import annotations

import atexit
import math
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from edgekit.adapt import sharing
from edgekit.adapt.policy import candidate_threads, choose_threads, score, state_policy
from edgekit.adapt.probe import SETTLE_S, block_estimate, probe, probe_feeds
from edgekit.backends import Backend
from edgekit.device.power import PowerMonitor
from edgekit.runtime.options import (
    RuntimeOptions,
    TunerOptions,
    backend_options,
    check_policy,
    may_spin,
)
from edgekit.runtime.session import SessionLike
from edgekit.runtime.stats import BusyMeter, per_row_seconds, process_cpu_seconds, typical
from edgekit.targets import PowerModel, Profile


class ThreadTuner:
    """Owns the choice of thread count for one session (``threads="auto"``).

    ``vectors``: the artifact's test vectors (``in/<name>``) the probe times, else random
    data. ``clock``: seconds, monotonic; the cooldown, the triggers and the CPU-use
    averages read it (the probe and the live exploration sleep, so they use real time).
    ``runtime``: the load's options; every session the tuner opens is made from them
    (``backend_options``: ``allow_spinning=False`` holds for each)."""

    def __init__(self, session: SessionLike, policy: str, monitor: PowerMonitor,
                 profile: Profile, options: TunerOptions | None = None, *,
                 power_root: str = "/", vectors: dict[str, Any] | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 runtime: RuntimeOptions | None = None) -> None:
        self.session = session
        self.runtime = runtime or RuntimeOptions()
        self.policy = check_policy(policy)
        self.monitor = monitor
        self.options = options or TunerOptions()
        self.clock = clock
        self.power = PowerModel.from_profile(profile)
        self.candidates = candidate_threads(profile.cpu.cores)
        self.events: list[dict[str, Any]] = []
        self.measured: dict[int, float] = {}
        self.effective_policy = self.policy
        self._feeds = probe_feeds(session.inputs, vectors or {})
        self._baseline: float | None = None
        self._strikes = 0
        self._drift_since: float | None = None  # clock at the first strike of this drift
        self._drift_backoff = 1.0  # x drift_s: doubles after each drift re-tune that changed nothing
        self._seen = 0
        self._idle = True
        self._tuned_state = monitor.state
        self._own_load = 0.0  # this process's CPU use, averaged like the 1-min load average
        self._cpu_mark = (clock(), process_cpu_seconds())
        self._tuned_load = self._external_load(monitor.reading.loadavg)
        self._busy = BusyMeter(power_root, self.options.busy_tau_s, clock=clock)
        self._tuned_busy: float | None = None
        self._busy_strikes = 0
        self._tuned_shared = 0.0  # other models' threads alongside ours when last tuned
        self._shared_strikes = 0
        self._shared_now: float | None = None  # the last figure check() read
        self._own_mark = (clock(), process_cpu_seconds())
        self._own_cores = 0.0  # this process's CPU use between the last two checks
        self._deferred_since: float | None = None
        self._tuned_at = 0.0
        self._retired: list[Backend] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one re-tune at a time
        sharing.register(session)

    # -- choosing ---------------------------------------------------------------------
    def initial(self) -> Backend:
        """Probe at load (bounded by ``budget_s``); returns the chosen session."""
        state = self.monitor.state
        policy, candidates = state_policy(self.policy, state, self.candidates)
        t0, began = self.clock(), time.perf_counter()
        self._busy.restart()
        try:
            measured, backends = probe(self._maker(policy), self._feeds, candidates,
                                       self.options.budget_s, self.options.warmup)
        except Exception as exc:  # e.g. symbolic non-batch dims the probe input cannot fill
            fallback = max(candidates)
            self._record(f"initial: probe failed ({exc}); using {fallback} threads", state,
                         policy, None, fallback, {}, "none", t0)
            return self._maker(policy)(fallback)
        chosen = choose_threads(measured, policy, self.power)
        for t, backend in backends.items():
            if t != chosen:
                backend.close()
        self._tuned_busy = self._busy.read()  # other processes' share while probing
        self._tuned_shared = sharing.shared_during(self.session, began, time.perf_counter())
        self._record("initial", state, policy, None, chosen, measured, "probe", t0)
        return backends[chosen]

    def retune(self, reason: str) -> int:
        """Measure the allowed candidates again and swap in the policy's pick."""
        with self._lock:
            t0, began, mark = self.clock(), time.perf_counter(), self.session.recorder.n
            reading = self.monitor.reading
            policy, candidates = state_policy(self.policy, reading.state, self.candidates)
            spinning = may_spin(self.runtime, policy)
            current = self.session.backend
            before = current.options.threads
            measured, live, mode = self._explore(candidates, policy, current)
            if measured is None and self._defer(reason):
                return before  # the triggers stay armed: check() asks again
            if measured is None:  # no live traffic: measure offline (the CPU is ours)
                measured, live = probe(self._maker(policy), self._feeds, candidates,
                                       self.options.retune_budget_s, self.options.warmup)
                mode = "probe"
            chosen = choose_threads(measured, policy, self.power)
            same_kind = (current.options.allow_spinning == spinning and before in measured)
            if same_kind and before != chosen and (
                score(before, measured[before], policy, self.power)
                <= score(chosen, measured[chosen], policy, self.power) * (1 + self.options.margin)
            ):
                chosen = before  # not clearly better: keep the current one (no flapping)
            target = live.pop(chosen) if chosen in live else current
            if self.session.backend is not target:
                self.session.swap(target, close=False)
            self._retire(list(live.values()) + ([current] if target is not current else []))
            self._tuned_state = reading.state
            self._tuned_load = self._external_load(reading.loadavg)
            self._tuned_busy = self._busy.read()
            self._busy_strikes = 0
            # the reference as check() will measure it: alongside our live runs, or, for
            # an offline probe (back-to-back runs), over its whole span
            # after a sharing re-tune, the level that triggered it (steady for ``strikes``
            # checks; the exploration's own windows read lower and re-triggered)
            if reason.startswith("shared"):
                live_shared = self._shared_now
            elif mode == "live":
                live_shared = sharing.shared_threads(self.session,
                                                     self.session.recorder.window(mark))
            else:
                live_shared = None
            self._tuned_shared = (live_shared if live_shared is not None else
                                  sharing.shared_during(self.session, began, time.perf_counter()))
            self._shared_strikes = 0
            self._baseline = measured.get(chosen) if mode == "live" else None
            self._strikes = 0
            self._drift_since = None
            fruitless = reason.startswith("drift") and chosen == before
            self._drift_backoff = min(8.0, 2.0 * self._drift_backoff) if fruitless else 1.0
            self._deferred_since = None
            self._seen = self.session.recorder.n
            self._record(reason, reading.state, policy, before, chosen, measured, mode, t0)
            return chosen

    def _defer(self, reason: str) -> bool:
        """Put off an offline probe while this process is busy with other work (another
        model, a preprocessing thread): the probe would measure that contention, not the
        machine's. A power change never waits, nor anything for longer than ``defer_s``."""
        if reason.startswith("power") or self._own_cores < self.options.own_busy:
            return False
        now = self.clock()
        if self._deferred_since is None:
            self._deferred_since = now
        return now - self._deferred_since < self.options.defer_s

    def _maker(self, policy: str) -> Callable[[int], Backend]:
        """A new session of ``threads`` under the policy in force."""
        return lambda threads: self.session.make_backend(
            backend_options(self.runtime, policy, threads))

    def _explore(self, candidates: list[int], policy: str, current: Backend
                 ) -> tuple[dict[int, float] | None, dict[int, Backend], str]:
        """Try each candidate on the live traffic, in A B .. B A order so that a load that
        rises or falls during the exploration weighs on every candidate alike."""
        recorder = self.session.recorder
        if len(recorder.recent(1.0)["rows"]) < 2 * self.options.min_samples:
            return None, {}, "probe"
        built: dict[int, Backend] = {}
        sessions: dict[int, Backend] = {}
        make = self._maker(policy)
        spinning = may_spin(self.runtime, policy)
        for t in candidates:
            if t == current.options.threads and current.options.allow_spinning == spinning:
                sessions[t] = current
            else:
                backend = make(t)
                backend.run(self._feeds)  # first run allocates; keep it off the live window
                sessions[t] = built[t] = backend
        times: dict[int, list[float]] = {t: [] for t in candidates}
        for t in candidates + candidates[::-1]:
            self.session.swap(sessions[t], close=False)
            time.sleep(SETTLE_S)  # let the previous pool stop spinning, the call in flight end
            start = recorder.n + 1
            began = time.perf_counter()
            deadline = began + self.options.explore_timeout_s
            while ((recorder.n - start < self.options.explore_samples
                    or time.perf_counter() - began < self.options.explore_min_s)
                   and time.perf_counter() < deadline and not self._stop.is_set()):
                time.sleep(0.005)
            window = recorder.window(start)
            window_times = per_row_seconds(window)[window["threads"] == t]
            if window_times.size < 3:  # traffic stopped mid-way: fall back to the probe
                self.session.swap(current, close=False)
                self._retire(list(built.values()))
                return None, {}, "probe"
            times[t].append(typical(window_times))
        # the mean of each candidate's two window means (the median of two), as the probe
        measured = {t: block_estimate(v) for t, v in times.items()}
        return measured, built, "live"

    # -- triggers ---------------------------------------------------------------------
    def check(self) -> str | None:
        """The reason to re-tune now, or None (called every ``check_s`` by the thread).
        The moving average and the strikes keep learning during the cooldown after a
        re-tune; only triggering waits for it to end."""
        now, cpu = self.clock(), process_cpu_seconds()
        if now - self._own_mark[0] > 0.05:
            self._own_cores = (cpu - self._own_mark[1]) / (now - self._own_mark[0])
            self._own_mark = (now, cpu)
        reading = self.monitor.reading
        if reading.state != self._tuned_state:
            return f"power {self._tuned_state}->{reading.state}"
        cooling = self.clock() - self._tuned_at < self.options.cooldown_s
        load = self._external_load(reading.loadavg)
        if (not cooling and load is not None and self._tuned_load is not None
                and abs(load - self._tuned_load) >= self.options.load_step):
            return f"load {self._tuned_load:.2f}->{load:.2f}"
        # The 1-min load average takes a minute to show a process that started or ended;
        # the CPU time other processes used in the last second shows it at once. It matters
        # most when a competitor leaves: the chosen count's latency does not change then
        # (it had fewer threads than cores), so no drift would ever reveal the freed core.
        busy = self._busy.read()
        if busy is not None and self._tuned_busy is None:
            self._tuned_busy = busy
        elif busy is not None and self._tuned_busy is not None:
            if abs(busy - self._tuned_busy) >= self.options.busy_step:
                self._busy_strikes += 1
                if self._busy_strikes >= self.options.strikes and not cooling:
                    return f"cpu busy {self._tuned_busy:.2f}->{busy:.2f} cores"
            else:
                self._busy_strikes = 0
        recorder = self.session.recorder
        since, self._seen = self._seen, recorder.n
        window = recorder.window(since)
        reason = (self._sharing_changed(window, cooling)
                  if window["seconds"].size >= self.options.min_samples else None)
        if reason:
            return reason
        mine = window["threads"] == self.session.backend.options.threads
        times = per_row_seconds(window)[mine]
        if times.size < self.options.min_samples:
            # a pause: the drift so far was not seen to last through it; bursts apart (a
            # caller serving in turns) must not add up to one lasting drift
            self._idle = True
            self._strikes = 0
            self._drift_since = None
            return None
        if self._idle:  # first window after a pause: cold caches and clocks, not a trend
            self._idle = False
            return None
        now = typical(times)
        if self._baseline is None:
            self._baseline = now
            return None
        if abs(now / self._baseline - 1.0) > self.options.drift:
            self._strikes += 1
            if self._drift_since is None:
                self._drift_since = self.clock()
            lasted = self.clock() - self._drift_since
            if (self._strikes >= self.options.strikes and not cooling
                    and lasted >= self.options.drift_s * self._drift_backoff):
                return f"drift {self._baseline * 1e3:.3f}->{now * 1e3:.3f} ms/sample"
            return None
        self._strikes = 0
        self._drift_since = None
        self._baseline = 0.9 * self._baseline + 0.1 * now  # moving average
        return None

    def _sharing_changed(self, window: dict[str, np.ndarray], cooling: bool) -> str | None:
        """Other models of this process now run more (or fewer) threads alongside ours than
        when we were tuned, on ``strikes`` checks in a row: measure again under the sharing."""
        shared = sharing.shared_threads(self.session, window)
        if shared is None:  # no traffic of ours: nothing shares it
            return None
        self._shared_now = shared
        if abs(shared - self._tuned_shared) < self.options.busy_step:
            self._shared_strikes = 0
            return None
        self._shared_strikes += 1
        if self._shared_strikes >= self.options.strikes and not cooling:
            return f"shared {self._tuned_shared:.2f}->{shared:.2f} threads"
        return None

    def _external_load(self, loadavg: float | None) -> float | None:
        """Load average minus our own busy threads: serving must not look like a CPU hog."""
        now, cpu = self.clock(), process_cpu_seconds()
        then, cpu_then = self._cpu_mark
        if now - then > 0.05:
            alpha = 1.0 - math.exp(-(now - then) / 60.0)  # the kernel's 1-minute decay
            self._own_load += alpha * ((cpu - cpu_then) / (now - then) - self._own_load)
            self._cpu_mark = (now, cpu)
        return None if loadavg is None else max(0.0, loadavg - self._own_load)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.options.check_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                reason = self.check()
                if reason:
                    self.retune(reason)
            except Exception as exc:  # keep serving on the current session
                self.events.append({"reason": "error", "error": repr(exc),
                                    "at": self.clock()})
                self._tuned_at = self.clock()

    def start(self) -> ThreadTuner:
        _LIVE.add(self)
        self.monitor.subscribe(lambda old, new: self._wake.set())
        self._tuned_at = self.clock()
        self._thread = threading.Thread(target=self._loop, name="edgekit-tuner", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30.0)
        self._thread = None
        self._retire([])
        for backend in self._retired:
            backend.close()
        self._retired = []

    # -- bookkeeping ------------------------------------------------------------------
    def _retire(self, backends: list[Backend]) -> None:
        # Callers that grabbed an old session before a swap may still be inside it: close
        # sessions one re-tune later, never right away.
        old, self._retired = self._retired, backends
        for backend in old:
            if backend is not self.session.backend:
                backend.close()

    def _record(self, reason: str, state: str, policy: str, before: int | None, chosen: int,
                measured: dict[int, float], mode: str, t0: float) -> None:
        now = self.clock()
        self.measured = dict(measured)
        self.effective_policy = policy
        self._tuned_at = now
        self.events.append({
            "reason": reason, "state": state, "policy": policy, "mode": mode,
            "threads_from": before, "threads_to": chosen,
            "ms_per_sample": {t: round(s * 1e3, 4) for t, s in measured.items()},
            "seconds": round(now - t0, 3), "at": now,
        })
        del self.events[:-50]

    def info(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "effective_policy": self.effective_policy,
            "candidates": list(self.candidates), "threads": self.session.backend.options.threads,
            "ms_per_sample": {t: round(s * 1e3, 4) for t, s in self.measured.items()},
            "retunes": sum(1 for e in self.events
                           if not e["reason"].startswith(("initial", "error"))),
            "events": [{k: v for k, v in e.items() if k != "at"} for e in self.events[-10:]],
        }


# A tuner thread still building or timing a session while the interpreter tears down makes
# onnxruntime abort ("terminate called without an active exception"): stop them first.
_LIVE: weakref.WeakSet[ThreadTuner] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for tuner in list(_LIVE):
        tuner.stop()
