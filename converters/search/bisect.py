"""Pruning ratios by bisection, stopping at the first ratio that cannot meet the accuracy budget.

Two monotone facts make a sweep wasteful (issue 21: 16 candidates over 7 minutes although
the mildest ratio had already missed the accuracy budget by 22 points):

* the hardware figures (RAM, latency, power) only fall as the ratio grows, and they are
  known from the pruned *architecture* alone: bisection on estimates finds the smallest
  ratio that fits them, without distilling, calibrating or quantizing anything;
* accuracy only falls as the ratio grows: when the smallest hardware-fitting ratio misses
  the accuracy budget, every larger one misses it by more, so the search stops there and
  names the lever that would help (distillation data, a looser budget, a larger target).

A latency budget also adds the ratio it implies (``1 - limit / dense estimate``, with a
little headroom) to the ratios tried: sensitivity-aware widths remove that share of the
estimated latency, so the mildest sufficient pruning is among the candidates.
"""

from __future__ import annotations

import time
from typing import Any

from ..pipeline import Rejected
from ..stages.prune import PruneConfig
from . import budgets as B

HEADROOM = 0.03  # the width plan's latency prediction is approximate


def probe(search: Any, ratio: float) -> bool:
    """Does the architecture pruned at ``ratio`` fit the estimated budgets? (nothing built)"""
    started = time.perf_counter()
    seen: list[bool] = []

    def check(path: Any) -> bool:
        seen.append(search._precheck(path, ratio, started))
        return False  # always turned down: a probe never distils or calibrates

    config = search.base.config
    prune = PruneConfig(ratio, config.finetune_steps, widths=config.prune_widths or "sensitivity",
                        select=config.prune_select or "reconstruction",
                        precheck=check, reference=search.reference)
    try:
        search.cache.run(search.plan.before("calibrate"), {"prune": prune})
    except Rejected:
        pass
    search.probes = getattr(search, "probes", 0) + 1
    return bool(seen and seen[0])


def implied_ratio(search: Any) -> float | None:
    """The latency share a latency budget asks to remove from the dense estimate."""
    dense = next((c for c in search.candidates if c.ratio == 0 and "latency_ms" in c.figures),
                 None)
    limit = search.budgets.limits.get("latency_ms")
    if dense is None or not limit or dense.figures["latency_ms"] <= limit:
        return None
    ratio = 1.0 - limit / dense.figures["latency_ms"] + HEADROOM
    return round(ratio, 3) if 0.0 < ratio < 0.95 else None


def prune_by_bisection(search: Any, ratios: list[float]) -> None:
    """Build the smallest ratio fitting the estimates, then larger ones only while hardware
    (not accuracy) is what misses."""
    dense_missed = search._missed_at(0.0) if 0.0 in search.ratios else set()
    if dense_missed and dense_missed <= {"accuracy_drop"}:
        stop_for_accuracy(search, 0.0)
        return
    implied = implied_ratio(search)
    config = search.base.config
    if implied is not None and config.prune is None and config.prune_ratios is None:
        ratios = sorted({*ratios, implied})
    estimated = any(k in search.checked for k in B.ESTIMATED)
    first = 0
    if estimated:
        low, high, found = 0, len(ratios) - 1, None
        while low <= high:
            mid = (low + high) // 2
            if probe(search, ratios[mid]):
                found, high = mid, mid - 1
            else:
                low = mid + 1
        if found is None:
            search.lever = (f"even pruning at {ratios[-1]:g} misses the estimated budgets: pick a "
                            "larger target or relax --max-latency-ms / --max-ram-mb / "
                            "--max-power-w")
            search.base.report(f"  prune: no ratio up to {ratios[-1]:g} fits the estimated "
                               "budgets (bisection on estimates, nothing built)")
            return
        first = found
    for ratio in ratios[first:]:
        if search._ratio(ratio) or search.stopped_early:
            return
        tried = [c for c in search.candidates if c.ratio == ratio and c.built]
        if tried and any(c.verdict.hardware_fits() for c in tried):
            # accuracy, not hardware, is what missed: more pruning only loses more
            stop_for_accuracy(search, ratio)
            return
    search.lever = "relax a budget (--max-*) or pick a larger target"


def stop_for_accuracy(search: Any, ratio: float) -> None:
    has_data = search.base.config.distill_data is not None
    why = ("the pruned float model alone misses it" if ratio in search.float_missed
           else "the best int8 build misses it")
    where = ("the unpruned model fits the hardware budgets but" if ratio == 0 else
             f"the smallest pruning that fits the hardware budgets ({ratio:g})")
    search.lever = (f"{where} misses the accuracy budget ({why}), and pruning only loses more: "
                    + ("" if has_data else "pass --distill-data (unlabelled inputs) to recover "
                       "accuracy, ")
                    + "relax --max-accuracy-drop, relax the hardware budget, or pick a larger "
                    "target")
    search.base.report(f"  prune {ratio:g}: misses the accuracy budget; larger ratios are not "
                       "tried (accuracy only falls as pruning grows)")
    if ratio == 0:  # pruning cannot win accuracy back: distillation data does not help either
        search.lever = search.lever.replace("pass --distill-data (unlabelled inputs) to recover "
                                            "accuracy, ", "")
