"""What the prune stage needs from a build: the width plan and the distillation data.

``plan_for`` turns a pruning ratio into per-group widths on the build's target: the goal
is the estimated int8 latency that uniform pruning at that ratio reaches (so the ratio the
budget search bisects means the same in both modes), and ``widths.plan_widths`` spends it
where the error per saved millisecond is lowest. With reconstruction selection (the
default for torch sources) the error is reconstruction's own at every width
(``recon_plan.py``: on EfficientNet-Lite0 at -21% it kept 34.6% top-1 agreement where
magnitude masks' plan kept 4.5%); only when the groups reconstruction handles cannot reach
the goal at their floor are the widths planned by magnitude masks over every group.

``distill_inputs`` reads ``--distill-data`` once per build (the search prunes at several
ratios); without it the calibration inputs are used, and the build says plainly that a
pretrained model pruned without data loses accuracy.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from edgekit.converters.inputs.datasets import has_data, load_dataset

from ..context import BuildConfig, BuildContext, Dataset
from .recon_plan import measure_reconstruction, plan_by_reconstruction
from .structured import prune_structured
from .widths import Group, WidthPlan, measure_groups, op_seconds_by_module, plan_widths

CORRECTIONS = 4  # plans estimated per ratio at most
# the plan reads each group's consumer's refit error; recon_plan's end_to_end option (each group's
# model-output error) stays out of the build: on EfficientNet-Lite0 at -21% it kept 37.2% [30.0,
# 45.0] where the local plan kept 34.6% [27.6, 42.4] (n=156), for one pruned copy and refit per
# group (1624 s of plan at load 11-13 against 24-42 s); docs/measurements/pruning.md, round 5

NO_DATA = ("pruning without --distill-data: the pruned model is distilled on the {n} "
           "calibration samples only, and a pretrained model pruned without data loses "
           "accuracy; prefer the other levers (calibration method, float fallback, a larger "
           "target or a looser budget) or pass --distill-data with a few hundred unlabelled "
           "inputs")
_LOADED: list[tuple[BuildConfig, Dataset]] = []  # one slot: the last build's distill data
# reconstruction's error curves of a dense model: the same for every ratio the search probes
_CURVES: weakref.WeakKeyDictionary[Any, tuple[list[Group], float]] = weakref.WeakKeyDictionary()


def plan_for(ctx: BuildContext, dense: Any, args: tuple[Any, ...], calib: list[np.ndarray],
             ratio: float, select: str = "magnitude") -> WidthPlan | None:
    """Per-group widths as fast as uniform ``ratio``'s estimate; None without a cost model.
    ``select="reconstruction"``: planned by reconstruction's error where it reaches."""
    if ctx.profile.cost_model is None:
        ctx.warn(f"target {ctx.profile.name!r} has no [cost_model]: per-layer widths cannot "
                 "weigh latency, every layer is pruned by the same ratio")
        return None
    if select == "reconstruction":
        plan = reconstruction_plan(ctx, dense, args, calib, ratio)
        if plan is not None:
            return plan
    # the latency uniform widths reach at this ratio: sensitivity-aware widths reach it too,
    # at less error, so a ratio means the same budget in both modes (and stays monotone)
    uniform, _ = prune_structured(dense, args, ratio)
    goal = aim = op_seconds_by_module(uniform, args, ctx.profile)[1]
    groups, dense_s = measure_groups(dense, args, calib, ctx.profile)
    for _ in range(CORRECTIONS):
        plan = plan_widths(groups, dense_s, aim)
        # the model is linear in channels; the estimator is not (per-call overheads, SIMD
        # lanes): estimate the planned architecture and aim lower by the shortfall
        pruned, _ = prune_structured(dense, args, ratio, plan.widths)
        actual = op_seconds_by_module(pruned, args, ctx.profile)[1]
        if actual <= goal * 1.01 or not plan.reachable:
            break
        aim *= goal / actual
    plan.target_latency_s = goal
    thinned = {n: w for n, w in plan.widths.items()
               if w < next(g.channels for g in groups if g.name == n)}
    ctx.report(f"  widths for {goal * 1e3:.4g} ms (uniform {ratio:g}'s estimate): "
               f"{len(thinned)} of {len(groups)} "
               f"group(s) thinned, predicted output error {plan.predicted_error:.4f}"
               + ("" if plan.reachable else " (target not reachable: every group at its floor)"))
    return plan


def reconstruction_plan(ctx: BuildContext, dense: Any, args: tuple[Any, ...],
                        calib: list[np.ndarray], ratio: float) -> WidthPlan | None:
    """Widths from reconstruction's error curves (``recon_plan.py``) removing ``ratio`` of
    the dense estimate, or None when the groups it handles cannot reach that.

    Here a ratio is the share of estimated latency removed (what the search's implied
    ratio, ``1 - limit / dense + headroom``, asks for), not uniform pruning's estimate at
    that ratio: uniform widths thin both sides of every conv, so uniform 0.24 removes ~40%
    of the latency and would ask the plan for twice what a -21% budget needs."""
    measured = _CURVES.get(dense)
    if measured is None:
        measured = _CURVES[dense] = measure_reconstruction(dense, args, calib, ctx.profile)
    groups, dense_s = measured
    goal = dense_s * (1.0 - ratio)
    if not groups:
        ctx.report("  widths: no group is read by one 1x1 conv only (reconstruction cannot "
                   "plan them): planned by magnitude masks")
        return None
    plan = plan_by_reconstruction(dense, args, calib, ctx.profile, goal, measured)
    if not plan.reachable or plan.predicted_latency_s > goal * 1.01:
        ctx.report(f"  widths: the {len(groups)} group(s) reconstruction handles reach "
                   f"{plan.predicted_latency_s * 1e3:.4g} ms at their floor, not "
                   f"{goal * 1e3:.4g} ms: planned by magnitude masks over every group")
        return None
    plan.method = ("reconstruction- and latency-aware (greedy, saved latency per "
                   "least-squares reconstruction error of the consuming 1x1 conv)")
    thinned = {g.name: f"{g.channels}->{plan.widths[g.name]}" for g in groups
               if plan.widths[g.name] < g.channels}
    ctx.report(f"  widths for {goal * 1e3:.4g} ms ({ratio:.0%} under the dense "
               f"{dense_s * 1e3:.4g} ms) by reconstruction error: "
               f"{len(thinned)} of {len(groups)} group(s) thinned ("
               + ", ".join(f"{k} {v}" for k, v in thinned.items())
               + f"), predicted {plan.predicted_latency_s * 1e3:.4g} ms, summed relative "
               f"error {plan.predicted_error:.4f}")
    return plan


def distill_inputs(ctx: BuildContext,
                   calib: list[np.ndarray]) -> tuple[list[np.ndarray], float | None, str]:
    """The arrays to distil on, the time budget, and how the data is described."""
    config = ctx.config
    seconds = None if config.distill_time is None else float(config.distill_time)
    if not has_data(config.distill_data):
        ctx.warn(NO_DATA.format(n=len(calib[0])))
        return calib, seconds, "calibration inputs, no labels"
    data = _load(ctx)
    arrays = [data.arrays[i["name"]] for i in ctx.inputs if i["name"] in data.arrays]
    return arrays, seconds, f"--distill-data {data.source}, {len(data)} samples, no labels"


def _load(ctx: BuildContext) -> Dataset:
    config = ctx.config
    if _LOADED and _LOADED[0][0] is config:
        return _LOADED[0][1]
    fed = [i for i in ctx.inputs if i["name"] not in config.consts]
    data, _ = load_dataset(config.distill_data, fed, config.preprocess,
                           progress=not config.quiet, seed=config.seed)
    _LOADED[:] = [(config, data)]
    return data


def agreement(model: Any, dense: Any, inputs: list[np.ndarray],
              dense_out: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Top-1 agreement of ``model``'s first output with ``dense``'s on ``inputs`` (cosine
    when the output is not a [N, classes] score), and the dense output for the next call."""
    import torch

    from .distill import BATCH

    def first(net: Any) -> np.ndarray:
        parts = []
        data = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
        net.eval()
        with torch.no_grad():
            for i in range(0, len(data[0]), BATCH):
                out = net(*[d[i:i + BATCH] for d in data])
                while isinstance(out, (tuple, list)):
                    out = out[0]
                parts.append(out.float().numpy())
        return np.concatenate(parts)

    want = first(dense) if dense_out is None else dense_out
    got = first(model)
    if want.ndim == 2 and want.shape[1] > 1:
        return float(np.mean(want.argmax(1) == got.argmax(1))), want
    a, b = want.reshape(len(want), -1), got.reshape(len(got), -1)
    cos = np.sum(a * b, 1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1),
                                        1e-12)
    return float(np.mean(cos)), want
