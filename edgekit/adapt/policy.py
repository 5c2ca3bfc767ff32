"""Thread-count policies: which counts to try, which one a policy picks from measured times,
what a power state allows, and the tuner's options. Pure functions; the tuner thread that
measures and swaps sessions is ``edgekit.adapt.tuner``.

* ``latency``    lowest time per sample;
* ``efficiency`` lowest energy per sample, ``watts(threads) * time`` from the profile's power model;
* ``balanced``   fewest threads whose time is within 10% of the best.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgekit.device.power import HOT, LOW_BATTERY, ON_BATTERY, POWER_LIMIT, THROTTLED
from edgekit.errors import UserError
from edgekit.runtime.stats import usable_cpus
from edgekit.targets import PowerModel

POLICIES = ("balanced", "latency", "efficiency")
BALANCED_WITHIN = 0.10


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise UserError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    return policy


def candidate_threads(profile_cores: int, affinity: int | None = None) -> list[int]:
    """Thread counts worth trying: 1..n (n = usable CPUs capped by the profile's cores);
    beyond 4, powers of two and n, so that the probe stays short on big machines."""
    usable = affinity if affinity is not None else usable_cpus()
    n = max(1, min(usable, profile_cores) if profile_cores > 0 else usable)
    if n <= 4:
        return list(range(1, n + 1))
    picks = {1, 2, 3, 4, n}
    p = 8
    while p < n:
        picks.add(p)
        p *= 2
    return sorted(picks)


def choose_threads(per_row_s: dict[int, float], policy: str, power: PowerModel) -> int:
    """The thread count a policy picks from measured seconds per sample (ties: fewer threads).

    Only counts faster than every smaller count are eligible: a count that scales negatively
    (slower than fewer threads, e.g. a small model on a loaded machine) is never picked."""
    finite: dict[int, float] = {}
    fastest = np.inf
    for t in sorted(per_row_s):
        s = per_row_s[t]
        if np.isfinite(s) and s < fastest:
            finite[t] = fastest = s
    if not finite:
        return min(per_row_s)
    if policy == "latency":
        return min(finite, key=lambda t: (finite[t], t))
    if policy == "efficiency":
        return min(finite, key=lambda t: (power.energy_j(t, finite[t]), t))
    best = min(finite.values())
    return min(t for t, s in finite.items() if s <= best * (1.0 + BALANCED_WITHIN))


def score(threads: int, per_row_s: float, policy: str, power: PowerModel) -> float:
    """What a policy minimises (used for the keep-current hysteresis)."""
    return power.energy_j(threads, per_row_s) if policy == "efficiency" else per_row_s


def state_policy(policy: str, state: str, candidates: list[int]) -> tuple[str, list[int]]:
    """Effective policy and allowed thread counts under a power state."""
    if state in (THROTTLED, LOW_BATTERY):
        return "efficiency", [1]
    if state in (ON_BATTERY, HOT, POWER_LIMIT):
        cap = max(1, max(candidates) // 2)
        return "efficiency", [t for t in candidates if t <= cap] or [1]
    return policy, list(candidates)


@dataclass
class TunerOptions:
    budget_s: float = 1.5  # probe at load: warm-up + timed runs, all candidates
    warmup: int = 2
    retune_budget_s: float = 0.6  # offline re-probe when there is no live traffic
    check_s: float = 0.25  # how often the tuner thread looks at the triggers
    cooldown_s: float = 2.0  # no load/drift re-tune sooner than this after the last one
    drift: float = 0.25  # re-tune when latency moves this far from its moving average
    strikes: int = 3  # ... on this many consecutive checks (hysteresis)
    drift_s: float = 2.0  # ... lasting at least this long: another model or the machine's
    # noise moves a small model's time by 30% for a second; a live re-tune costs p95
    load_step: float = 1.0  # re-tune when the 1-min load average moves by a core
    busy_step: float = 0.5  # ... or when other processes' CPU use (proc/stat) moves this much
    busy_tau_s: float = 1.0  # averaging time of that CPU use
    margin: float = 0.10  # keep the current count unless the new one is this much better
    explore_samples: int = 24  # live executions measured per candidate window when re-tuning
    explore_min_s: float = 0.1  # ... over at least this long (longer than scheduler slices)
    explore_timeout_s: float = 1.5  # per window: bursty traffic may pause in between
    min_samples: int = 6  # executions a drift check needs
    own_busy: float = 0.3  # cores this process used since the last check that put off ...
    defer_s: float = 5.0  # ... an offline re-probe (no live traffic), for at most this long


def tuner_options(value: TunerOptions | dict[str, Any] | None) -> TunerOptions:
    if isinstance(value, TunerOptions):
        return value
    allowed = set(TunerOptions.__dataclass_fields__)
    unknown = sorted(set(value or {}) - allowed)
    if unknown:
        raise UserError(f"unknown tuner option(s) {unknown}; allowed: {', '.join(sorted(allowed))}")
    return TunerOptions(**(value or {}))
