"""The batching rule: how big a batch gets, how long it waits and how long the worker idles
after it, per power state and tuning policy (``edgekit/batching/batcher.py`` runs it).

=================  =========  ==========================  ===========================
state              max batch  wait                        idle gap after a batch
=================  =========  ==========================  ===========================
normal / unknown   max_batch  0 [1] (latency, balanced)   none
                              or 10% of the latency
                              budget (efficiency)
on_battery / hot   2x         25% of the latency budget   as long as the batch ran
/ power_limit
throttled / low    4x         40% of the latency budget   twice the batch time
=================  =========  ==========================  ===========================

[1] On mains nothing waits for a companion that has not come: a request that waits pays
latency a batch-1 server never charges it. (``balanced`` used to wait up to 2 ms, gated by the
arrival rate, ``edgekit/batching/arrivals.py``: bunched arrivals fooled the gate, and each wait that
found no companion cost that request a run time or more.) Nor does a queued request join a
batch before it has waited one row's run time (``join_after_runs``): a burst of a few, at a
low rate, is served one by one as batch-1 would (joined, the first of them waits for the
others' rows, and a batch of 2-3 saved no time per row on the 2-core x86 host); a backlog, a
stream faster than the model, still batches. A ``max_wait_ms`` the caller sets is waited as
it says, and then queued requests join at once.

A batch never waits past half the profile's latency budget, and its size is capped so that
its estimated run time fits the budget: p95 stays within ``budgets.latency_ms``.
Larger batches amortise per-call overhead (less energy per sample); idle gaps let the
governor drop the clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.device.power import HOT, LOW_BATTERY, ON_BATTERY, POWER_LIMIT, THROTTLED


@dataclass(frozen=True)
class BatchPolicy:
    state: str
    max_batch: int
    max_wait_s: float
    gap: float  # idle time after a batch, as a multiple of that batch's run time
    max_delay_s: float  # no request waits longer than this before its batch starts
    join_after_runs: float = 0.0  # a queued request joins once it waited this many row runs


def batch_policy(state: str, policy: str, max_batch: int, max_wait_ms: float | None,
                 budget_s: float) -> BatchPolicy:
    """The batching rule for a power state and tuning policy (see the module table)."""
    user_wait = None if max_wait_ms is None else max(0.0, max_wait_ms) / 1000.0
    delay = 0.5 * budget_s
    if state in (THROTTLED, LOW_BATTERY):
        wait = max(user_wait or 0.0, 0.4 * budget_s)
        return BatchPolicy(state, max_batch * 4, min(wait, delay), 2.0, delay)
    if state in (ON_BATTERY, HOT, POWER_LIMIT):
        wait = max(user_wait or 0.0, 0.25 * budget_s)
        return BatchPolicy(state, max_batch * 2, min(wait, delay), 1.0, delay)
    default = {"latency": 0.0, "balanced": 0.0, "efficiency": 0.1 * budget_s}[policy]
    wait = default if user_wait is None else user_wait
    backlog_only = policy != "efficiency" and user_wait is None
    return BatchPolicy(state, max_batch, min(wait, delay), 0.0, max(delay, wait),
                       join_after_runs=1.0 if backlog_only else 0.0)


def may_join(policy: BatchPolicy, waited_s: float, per_row_s: float | None) -> bool:
    """Whether a queued request that has waited ``waited_s`` joins the batch being formed
    (``per_row_s``: the model's run time per row, None before the first batch)."""
    return waited_s >= policy.join_after_runs * (per_row_s or 0.0)
