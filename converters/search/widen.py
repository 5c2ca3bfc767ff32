"""The guard's two checks past "the figure is within the budget": latency and margin.

* **Latency binds every rung.** A rung's rebuild is costed by the estimator before it is scored:
  over the profile's latency budget (when int8 itself fits it), the rung is skipped and the next
  one tried. The estimator costs int16 layers as LiteRT runs them (its 16x8 reference kernel,
  one thread, ``estimate/cost.REFERENCE_16X8``): YOLOv8n's backbone at int16 is estimated at
  5.4 s on a Pi 4 (measured 1.5 s on this EPYC host at one thread, 30x the int8 .tflite), where
  costing it as int8 said 46 ms and the guard shipped it.
* **A wider span when the evidence cannot tell.** The fix that first brings the figure within
  the budget is judged on the validation samples the guard fixed it on; when their interval
  still straddles the budget (0.00 [0.00, 8.60] points of YOLOv8n's detections on 64 images
  against 5), held-out data can miss (91.7% of float's detections kept on 24 held-out ones). The
  guard then spends what the latency budget leaves: the fix widened by the next contiguous
  stretch of activations (``restore.segments``: the int8 error builds up along the backbone),
  at the same rung, each kept when it fits the latency budget, stays acceptable and is no worse
  on the task figure, skipped otherwise (a later, cheaper stretch may still fit); it stops when
  the evidence says "met", the stretches or the rebuilds (``--guard-steps``) run out. Work, not
  seconds: the same inputs give the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgekit.errors import UserError

from ..context import BuildContext


def latency_ms(ctx: BuildContext, path: Path) -> float | None:
    """The estimator's latency of the QDQ model at ``path`` on the build's target (the thread
    count the budgets module picks), None when it cannot judge."""
    from ..estimate import estimate
    from . import budgets as B

    if ctx.profile.cost_model is None:
        return None
    try:
        est = estimate(str(path), ctx.profile, calibrate=False)
    except UserError:
        return None
    if not est.judges_latency:
        return None
    limits = B.resolve(ctx.profile, ctx.config.budgets)
    return float(B.hardware_figures(est, ctx.profile, limits.rate_hz, limits.limits)["latency_ms"])


def latency_bound(ctx: BuildContext, int8_path: Path) -> float | None:
    """The latency the guard's rungs must stay within: the profile's budget when the int8 model
    fits it (a rung must not break a budget the build meets), else none."""
    from . import budgets as B

    limit = B.resolve(ctx.profile, ctx.config.budgets).limits["latency_ms"]
    base = latency_ms(ctx, int8_path)
    return limit if base is not None and base <= limit else None


def segment_nodes(float_model: Any, qdq: Any) -> list[set[str]]:
    """The nodes of each contiguous stretch of activations (``restore.segments``), in graph order."""
    from . import restore
    from .guard import fix_set

    found = restore.restorables(qdq, float_model)
    return [{n for item in group for n in fix_set(float_model, item.tensor, item.kind)}
            for group in restore.segments(float_model, found)]


def wider(nodes: set[str], segments: list[set[str]]) -> list[set[str]]:
    """The stretches to add one at a time, nearest the fix first: those after the last stretch
    the fix holds, then those before the first. None when the fix holds no stretch (a branch
    or one tensor: a local fix, not error built up along the graph). A stretch is held when over half
    its nodes are in the fix: fix sets take a tensor's readers too, so a stretch's neighbours
    share a few nodes with it (PP-OCRv4 rec's fix of two stretches touched four)."""
    touched = [k for k, seg in enumerate(segments) if 2 * len(seg & nodes) > len(seg)]
    if not touched:
        return []
    after = [seg for seg in segments[max(touched) + 1:] if not seg <= nodes]
    before = [seg for seg in reversed(segments[:min(touched)]) if not seg <= nodes]
    return after + before
