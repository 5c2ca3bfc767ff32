"""What the accuracy guard tells the user: its progress bar, the table of its attempts with
their evidence, and, for an exit 3, the layer at fault (``search/autoguard.py`` does the work)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgekit.converters.metrics.task_accuracy import TaskScore

    from .guard_outcome import GuardOutcome


class Progress:
    """A tqdm bar on a TTY unless quiet; nothing otherwise (logs stay clean)."""

    def __init__(self, quiet: bool) -> None:
        self.bar: Any = None
        self.enabled = not quiet and sys.stderr.isatty()

    def __call__(self, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="accuracy guard", unit="step", leave=False, file=sys.stderr)
        elif total:
            self.bar.total += total
            self.bar.refresh()
        else:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def at_fault(outcome: GuardOutcome) -> str:
    """For an exit 3: the layer the guard's ranking blames (restored alone, it helped most)."""
    if not outcome.ranking:
        return ""
    top, single = outcome.ranking[0], outcome.best_single
    text = f"; the layer at fault (restored alone, it helps most): {top.reason()}"
    if single is not None and single is not top:
        text += f"; of single tensors: {single.reason()}"
    if outcome.hopeless and outcome.ceiling is not None:
        text += (f"; even all {outcome.candidates} candidates float leave {outcome.ceiling.evidence.figure:.2f} "
                 "points, so no rung of theirs meets the budget")
    return text


def table(first: TaskScore, outcome: GuardOutcome, budget: float) -> str:
    """Rows: the plain int8 build, the ceiling and every guard attempt, with their evidence."""
    rows = [("int8 (no float layers)", first)]
    if outcome.ceiling is not None:
        rows.append((f"ceiling: {outcome.candidates or 'all'} candidate(s) float", outcome.ceiling))
    rows += [(f"{len(a.float_tensors)} tensor(s) {a.rung}, {len(a.nodes)} node(s)", a.score)
             for a in outcome.attempts]
    width = max(len(r[0]) for r in rows)
    lines = [f"  {'build':<{width}}  points  95% interval      N  budget {budget:g}"]
    lines += [f"  {name:<{width}}  {s.evidence.figure:6.2f}  {s.evidence.low:6.2f}..{s.evidence.high:<6.2f}"
              f"  {s.evidence.samples:4d}  {s.evidence.verdict(budget)}" for name, s in rows]
    if outcome.timed_out:
        lines.append(f"  (--guard-time {outcome.seconds:.0f} s cut the guard's work short: raise it for the "
                     "whole work budget)")
    elif outcome.hopeless:
        lines.append("  (guard stopped: even every candidate restored to float misses the budget, so no rung can meet it)")
    else:
        lines.append(f"  (guard: {outcome.ranked} candidate(s) x {outcome.subset} samples ranked, "
                     f"{len(outcome.attempts)} rebuild(s))")
    return "\n".join(lines)
