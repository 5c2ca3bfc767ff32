"""What one accuracy-guard run did: each attempt (tensors moved up the ladder, the score, met or
not) and the outcome the manifest and the exit-3 table read. Types only, so that the guard
(``autoguard.py``) and its report (``guard_report.py``) both import them without a cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.converters.metrics.task_accuracy import TaskScore


@dataclass
class Attempt:
    float_tensors: list[str]  # the tensors moved up the ladder (named so since the float-only guard)
    nodes: list[str]
    path: Path
    score: TaskScore
    met: bool
    rung: str = "float"
    budget: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"float_tensors": self.float_tensors, "nodes": self.nodes, "rung": self.rung,
                "drop": round(self.score.drop, 4), "evidence": self.evidence, "met": self.met}

    @property
    def evidence(self) -> dict[str, Any]:
        return self.score.evidence.to_dict(self.budget) if self.budget is not None else self.score.evidence.to_dict()


@dataclass
class GuardOutcome:
    attempts: list[Attempt] = field(default_factory=list)
    ranked: int = 0            # candidates restored alone
    runs: int = 0              # model runs on the subset
    subset: int = 0            # samples of the subset
    timed_out: bool = False    # --guard-time cut the work short
    ceiling: TaskScore | None = None  # every candidate restored to float at once
    hopeless: bool = False     # the ceiling misses too: the guard stopped there
    seconds: float = 0.0       # not in the manifest (bytes stay the same)
    rungs: tuple[str, ...] = ("int8", "float")
    ranking: list[Any] = field(default_factory=list)
    failed_rungs: list[dict[str, Any]] = field(default_factory=list)  # a rung's rewrite that did not load
    candidates: int = 0        # candidates found (the ceiling restores them all)
    best_single: Any = None    # the best-ranked candidate that is one tensor (not a stretch)
    over_latency: list[dict[str, Any]] = field(default_factory=list)  # rebuilds over the latency budget
    widened: Attempt | None = None  # the fix widened while the evidence could not tell (widen.py)

    @property
    def met(self) -> Attempt | None:
        """The fix that ships: the widest kept, else the first within the budget."""
        return self.widened or next((a for a in self.attempts if a.met), None)

    @property
    def rebuilds(self) -> int:
        """Rebuilds made (scored, or costed over the latency budget): the work bound counts them."""
        return len(self.attempts) + len(self.over_latency)

    @property
    def best(self) -> Attempt | None:
        return min(self.attempts, key=lambda a: a.score.drop, default=None)

    def to_dict(self, budget: float, time_bound: float) -> dict[str, Any]:
        out = {"ladder": list(self.rungs), "budget_points": budget, "time_bound_s": time_bound,
               "timed_out": self.timed_out, "work": {"candidates": self.ranked, "subset_samples": self.subset,
                                                     "rebuilds": self.rebuilds},
               "tensors_ranked": self.ranked, "met": self.met is not None, "hopeless": self.hopeless,
               "ranking": [s.to_dict() for s in self.ranking[:8]],
               "attempts": [a.to_dict() for a in self.attempts],
               **({"over_latency": self.over_latency} if self.over_latency else {}),
               **({"widened": self.widened.to_dict()} if self.widened is not None else {}),
               **({"failed_rungs": self.failed_rungs} if self.failed_rungs else {})}
        if self.ceiling is not None:
            out["ceiling"] = self.ceiling.evidence.to_dict(budget)
        return out
