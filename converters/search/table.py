"""The budget search's ranked candidate table: as text (build output, ``BudgetError``) and as
the manifest's ``search`` section (one entry per candidate, like Olive's ``models_rank.json``)."""

from __future__ import annotations

from typing import Any

from .budgets import BUDGETS, Budgets

COLUMNS = [("storage_mb", "storage MB"), ("ram_mb", "RAM MB"), ("latency_ms", "latency ms"),
           ("power_w", "power W"), ("threads", "threads"), ("accuracy_drop", "acc drop")]
STORAGE_NOTE = ("storage of candidates is estimated as the int8 ONNX model deflated (zip level 9) "
                "once per format, plus test vectors and 8 kB of manifest; the winner's figure is "
                "the written artifact")
POWER_NOTE = ("power: idle + (power at the candidate's threads - idle) x min(1, rate_hz x "
              "latency); threads: the profile's, or the count that meets latency and power with "
              "the least power when the profile's misses them")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def table(ranked: list[Any], budgets: Budgets, checked: tuple[str, ...], winner: Any,
          unchecked_because: dict[str, str] | None = None) -> str:
    """Ranked candidates with their figures; misses say which budget and by how much.
    ``unchecked_because``: why a budget left out of ``checked`` is (default: no cost model)."""
    why = unchecked_because or {}
    limits = ", ".join(
        f"{k} <= {budgets.limits[k]:g} {BUDGETS[k][0]}"
        + (f" at {budgets.rate_hz:g}/s" if k == "power_w" else "")
        + ("" if k in checked else f" (not checked: {why.get(k, 'no cost model')})")
        for k in BUDGETS)
    head = f"{'rank':>4}  {'candidate':<26}{'prune':>6} {'method':<11}{'float':>6}"
    head += "".join(f"{label:>12}" for _, label in COLUMNS) + "  result"
    lines = [f"budgets: {limits}", head]
    rank = 0
    for cand in ranked:
        fits = cand.verdict.fits
        rank += fits
        cells = "".join(f"{_cell(cand.figures.get(key)):>12}" for key, _ in COLUMNS)
        if fits:
            result = "fits" + ("  <- chosen" if cand is winner else "")
        else:
            result = ("estimate misses " if not cand.built else "misses ") + "; ".join(
                c.miss() for c in cand.verdict.missed)
        lines.append(f"{rank if fits else '-':>4}  {cand.id:<26}{cand.ratio:>6g} "
                     f"{cand.method or '(estimated)':<11}{len(cand.float_nodes):>6}{cells}  "
                     f"{result}")
    lines.append(f"note: {STORAGE_NOTE}; {POWER_NOTE}")
    return "\n".join(lines)


def front_ids(candidates: list[dict[str, Any]]) -> list[str]:
    """The built candidates no other is both faster (latency estimate) and more accurate than
    (accuracy drop), fastest first: the accuracy/latency front the report plots."""
    from ..report.front import front

    built = [c for c in candidates if isinstance(c["figures"].get("latency_ms"), (int, float))
             and isinstance(c["figures"].get("accuracy_drop"), (int, float))]
    points = [(float(c["figures"]["latency_ms"]), float(c["figures"]["accuracy_drop"]))
              for c in built]
    return [built[i]["id"] for i in front(points)]


def manifest_section(search: Any, ranked: list[Any], winner: Any) -> dict[str, Any]:
    candidates = []
    rank = 0
    for cand in ranked:
        entry = cand.to_dict()
        if cand.verdict.fits:
            rank += 1
            entry["rank"] = rank
        entry["chosen"] = cand is winner
        if cand.accuracy:
            entry["accuracy_metric"] = cand.accuracy.get("metric")
        candidates.append(entry)
    return {"winner": winner.id, "front": front_ids(candidates), "margin": search.margin, "stopped_early": search.stopped_early,
            "ratios": search.ratios, "methods": search.methods, "checked": list(search.checked),
            "order": "pruning ratio ascending, then calibration method, then float fallback",
            "selection": "most accurate within every budget; ties: closer to float (cosine), "
                         "then lower latency, then smaller",
            "notes": [STORAGE_NOTE, POWER_NOTE],
            # times each stage ran: the prefix cache runs a stage once per distinct prefix
            "stage_runs": dict(search.cache.runs), "candidates": candidates}
