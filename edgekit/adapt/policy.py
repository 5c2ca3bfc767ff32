"""Thread-count policies: which counts to try, which one a policy picks from measured times,
what a power state allows. Pure functions; the tuner thread that measures and swaps sessions
is ``edgekit.adapt.tuner``, the policy names and the tuner's options ``edgekit.runtime.options``.

* ``latency``    lowest time per sample;
* ``efficiency`` lowest energy per sample, ``watts(threads) * time`` from the profile's power model;
* ``balanced``   fewest threads whose time is within 10% of the best.
"""

from __future__ import annotations

import numpy as np

from edgekit.device.power import HOT, LOW_BATTERY, ON_BATTERY, POWER_LIMIT, THROTTLED
from edgekit.runtime.stats import usable_cpus
from edgekit.targets import PowerModel

BALANCED_WITHIN = 0.10


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
