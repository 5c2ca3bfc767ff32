"""Per-group widths from reconstruction error per latency saved (issue 34).

``widths.measure_groups`` scores a group by masking its lowest-magnitude channels and
re-running the model: right for groups cut by magnitude, but the groups reconstruction
handles (channels read by one 1x1 conv, ``reconstruct.consumer_of``) lose far less than
their magnitude masks say, and the measured widths are coarse (a quarter, a half, three
quarters). Here each such group's error is what reconstruction itself leaves at *every*
width (multiples of 8 down to ``FLOOR`` of the channels): one backward elimination on the
dense model's calibration moments records the least-squares objective after each removal
(``reconstruct.eliminate_gram``), relative to the BatchNorm-scaled spread of the
consumer's output. ``widths.plan_widths`` then thins step by step where the estimated
latency saved per error added is best; an error curve that steepens as channels go
spreads the cut over many groups instead of emptying a few.

Groups reconstruction cannot handle keep every channel in this plan.

A consumer's relative error is local: the same 1% costs the model output far more after the
stem than in the last block (EfficientNet-Lite0, ``bench_prune_where.py``: the stem cut to 16
channels alone, refit error 0.005, moved 37 of 156 top-1 decisions). With ``end_to_end``
each group is also cut alone to ``PROBE_SHARE`` of its channels, its consumer refit, and the
model output's error on the calibration samples measured (``widths.output_error``); the
group's curve is rescaled to that figure, so the greedy compares groups in one currency,
the output's error per second saved, and keeps the local curve's shape between widths.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .reconstruct import (
    BATCH,
    SAMPLES,
    _dense_weights,
    _flat,
    consumer_of,
    eliminate_gram,
    norm_scales,
)
from .structured import ROUND_TO, prune_structured
from .widths import Group, WidthPlan, latency_groups, op_seconds_by_module, plan_widths

FLOOR = 0.5  # a group keeps at least this share: a -20% budget never needs more
CORRECTIONS = 4  # plans estimated at most (the estimator is not linear in channels)
# the error curve's ridge: numerical only. The refit's pull towards the dense weights
# (reconstruct.RIDGE) counts every departure from them as error, so twin channels, rebuilt
# exactly by their twin at twice the weight, would look costly.
CURVE_RIDGE = 1e-6
PROBE_SHARE = 0.75  # the share of a group's channels it keeps in its end-to-end probe


class ReconstructionGroup(Group):
    end_to_end: tuple[int, float] | None = None  # (probe width, model output error) measured

    def widths(self) -> list[int]:
        """Every multiple of 8 from the dense width down to the floor, widest first."""
        low = max(ROUND_TO, int(np.ceil(self.channels * FLOOR / ROUND_TO)) * ROUND_TO)
        steps = range(self.channels // ROUND_TO * ROUND_TO, low - 1, -ROUND_TO)
        return sorted({self.channels, *steps}, reverse=True)


def _dense_grams(model: Any, convs: dict[str, Any], data: list[Any]) -> dict[str, np.ndarray]:
    """Each conv's input Gram matrix (a constant row last) over every calibration position."""
    import torch

    grams: dict[str, Any] = {}

    def hook(name: str) -> Any:
        def add(_m: Any, inputs: Any, _out: Any) -> None:
            x = _flat(inputs[0].detach())
            grams[name] = x @ x.T + grams[name] if name in grams else x @ x.T
        return add

    handles = [conv.register_forward_hook(hook(n)) for n, conv in convs.items()]
    try:
        with torch.no_grad():
            for i in range(0, len(data[0]), BATCH):
                model(*[d[i:i + BATCH] for d in data])
    finally:
        for handle in handles:
            handle.remove()
    return {n: g.numpy() for n, g in grams.items()}


def error_curve(gram: np.ndarray, dense_w: np.ndarray, scale: np.ndarray,
                widths: list[int]) -> dict[int, float]:
    """Width -> reconstruction's relative error (objective / BatchNorm-scaled spread)."""
    channels = gram.shape[0] - 1
    _, _, path = eliminate_gram(gram, dense_w @ gram, min(widths), dense_w, scale, CURVE_RIDGE)
    rows = gram[-1, -1]
    yy = np.einsum("ij,jk,ik->i", dense_w, gram, dense_w)
    mean = dense_w @ gram[:, -1] / rows
    spread = max(float(np.sum(scale ** 2 * (yy - rows * mean ** 2))), 1e-30)
    total = np.concatenate([[0.0], np.cumsum(path)]) / spread
    return {w: float(total[channels - w]) for w in widths}


def measure_reconstruction(model: Any, args: tuple[Any, ...], calib: list[np.ndarray],
                           profile: Any, end_to_end: bool = False) -> tuple[list[Group], float]:
    """The groups reconstruction can handle, each with its latency share and error curve
    (in the model output's error with ``end_to_end``)."""
    import torch

    found, dense_s = latency_groups(model, args, profile)
    names = {m: n for n, m in model.named_modules()}
    eligible: list[tuple[Group, Any]] = []
    for group, tp_group in found:
        conv = consumer_of(tp_group)
        if conv is not None and group.protected is None:
            eligible.append((ReconstructionGroup(**vars(group)), conv))
    data = [torch.from_numpy(np.ascontiguousarray(a[:SAMPLES])) for a in calib]
    model.eval()
    grams = _dense_grams(model, {names[c]: c for _, c in eligible}, data)
    scales = norm_scales(model, args)
    groups = []
    for group, conv in eligible:
        name = names[conv]
        dense_w = _dense_weights(conv, list(range(conv.out_channels)))
        scale = scales.get(name, np.ones(conv.out_channels))
        group.errors = error_curve(grams[name], dense_w, scale, group.widths())
        groups.append(group)
    if end_to_end:
        to_output_error(model, args, calib, groups)
    return groups, dense_s


def probe_width(group: Group) -> int | None:
    """The widest candidate width at most ``PROBE_SHARE`` of the channels."""
    return max((w for w in group.widths() if w <= group.channels * PROBE_SHARE), default=None)


def to_output_error(model: Any, args: tuple[Any, ...], calib: list[np.ndarray],
                    groups: list[Group]) -> None:
    """Rescale each group's local curve to the model output's error when the group alone is
    cut to its probe width and refit (``Group.end_to_end`` keeps the measured figure)."""
    import torch

    from .distill import torch_threads
    from .widths import _outputs, output_error

    data = [torch.from_numpy(np.ascontiguousarray(a[:SAMPLES])) for a in calib]
    with torch_threads(1):
        want = _outputs(model, data)
        for group in groups:
            probe = probe_width(group)
            local = group.errors.get(probe, 0.0) if probe else 0.0
            if probe is None:
                continue
            with contextlib.redirect_stdout(None):
                alone, _ = prune_structured(model, args, 0.0, {group.name: probe}, calib=calib)
            measured = output_error(_outputs(alone, data), want)
            group.end_to_end = (probe, measured)
            # a curve flat to numerical precision: its steps cost what the probe measured
            factor = measured / local if local > 1e-12 else None
            group.errors = {w: (e * factor if factor is not None else
                                measured * (group.channels - w) / (group.channels - probe))
                            for w, e in group.errors.items()}


def plan_by_reconstruction(model: Any, args: tuple[Any, ...], calib: list[np.ndarray],
                           profile: Any, target_s: float,
                           measured: tuple[list[Group], float] | None = None,
                           end_to_end: bool = False) -> WidthPlan:
    """Widths whose int8 estimate on ``profile`` is at most ``target_s`` seconds, thinning
    where reconstruction's error per second saved is lowest."""
    groups, dense_s = measured or measure_reconstruction(model, args, calib, profile,
                                                         end_to_end)
    aim = target_s
    for _ in range(CORRECTIONS):
        plan = plan_widths(groups, dense_s, aim)
        # the model is linear in channels; the estimator is not (per-call overheads, SIMD
        # lanes): estimate the planned architecture and aim lower by the shortfall
        with contextlib.redirect_stdout(None):
            pruned, _ = prune_structured(model, args, 0.0, plan.widths)
        actual = op_seconds_by_module(pruned, args, profile)[1]
        plan.predicted_latency_s = actual
        if actual <= target_s * 1.001 or not plan.reachable:
            break
        aim *= target_s / actual
    plan.target_latency_s = target_s
    return plan
