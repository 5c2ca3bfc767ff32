"""Per-group widths from sensitivity and latency share (NetAdapt-style greedy).

Uniform pruning thins every layer by the same share; on a pretrained network that removes
as much from the fragile layers (stem, head, squeeze-excite, the last projection) as from
the redundant ones (issue 21: EfficientNet-Lite0 lost 23 top-1 points at 25%). Here:

1. **Sensitivity**: for each prunable group (torch-pruning's coupled channels), the
   lowest-L2 channels are masked to zero at each candidate width (multiples of 8) and the
   dense model's outputs are compared on calibration samples: the error is the output MSE
   divided by the output variance. Zeroing a group's Conv/Linear/BatchNorm outputs is what
   removing those channels does to every reader, without rebuilding the model per trial.
   Every BatchNorm is re-estimated on ``BN_SAMPLES`` calibration inputs under each mask, as
   the build does before distilling: on the MobileNet-style digits net at uniform 0.28's
   latency, the plan from dense statistics kept 82.3% top-1 after BatchNorm re-estimation,
   the plan from re-estimated ones 91.5% (dense 99.5%).
2. **Latency share**: the dense model's int8 estimate on the target
   (``converters.estimate``), op by op; an op belongs to the module its ONNX node is named
   after, and a Conv/Linear's seconds scale with the kept share of every group whose
   channels it reads or writes (``predicted_latency``).
3. **Greedy**: from the dense widths, repeatedly take the one-step thinning with the most
   latency saved per unit of error added, until the predicted latency meets the target.
   Protected groups (stem, head, squeeze-excite, last projection) count their error
   ``PROTECT_PENALTY`` times, so they are thinned only when the others cost more.
"""

from __future__ import annotations

import contextlib
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .reconstruct import forward_order
from .structured import ROUND_TO, kept_channels

FRACTIONS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75)  # candidate shares removed per group
MEASURED = (0.25, 0.5, 0.75)  # shares whose error is measured; widths between interpolate
PROTECT_PENALTY = 4.0
SAMPLES = 32  # calibration samples scoring each trial (one thread: 0.2 s for MobileNetV2-0.5)
BN_SAMPLES = 128  # calibration samples BatchNorm statistics are re-estimated on per trial
MIN_ERROR_STEP = 1e-6  # a step measured as free still costs something: ties go to latency


@dataclass
class Group:
    name: str  # the root Conv/Linear module
    channels: int
    modules: list[str]  # every Conv/Linear/BatchNorm reading or writing these channels
    order: int  # forward position of the root (stem first)
    protected: str | None = None  # why: stem, head, squeeze-excite, last projection
    latency_s: float = 0.0  # estimated int8 seconds of the ops on these channels
    op_seconds: dict[str, float] = field(default_factory=dict)  # member module -> seconds
    errors: dict[int, float] = field(default_factory=dict)  # width -> output error

    def widths(self) -> list[int]:
        """Candidate widths, widest first (the dense width included)."""
        found = sorted({kept_channels(self.channels, f) for f in FRACTIONS} | {self.channels},
                       reverse=True)
        return [w for w in found if w >= ROUND_TO]

    def error(self, width: int) -> float:
        """Output error at ``width``: measured, or interpolated between measured widths."""
        known = sorted(self.errors.items())
        if not known:
            return 0.0
        widths = [w for w, _ in known]
        values = [e for _, e in known]
        return float(np.interp(width, widths, values))


@dataclass
class WidthPlan:
    groups: list[Group]
    dense_latency_s: float
    widths: dict[str, int] = field(default_factory=dict)  # group name -> chosen width
    predicted_latency_s: float = 0.0
    predicted_error: float = 0.0
    target_latency_s: float = 0.0
    reachable: bool = True
    # what each group's error is: the model output's under magnitude masks (here), or the
    # consumer's reconstruction error (recon_plan.py)
    method: str = "sensitivity- and latency-aware (greedy, saved latency per error)"

    def to_dict(self) -> dict[str, Any]:
        share = self.dense_latency_s or 1.0
        return {"method": self.method,
                "dense_latency_ms": round(self.dense_latency_s * 1e3, 4),
                "target_latency_ms": round(self.target_latency_s * 1e3, 4),
                "predicted_latency_ms": round(self.predicted_latency_s * 1e3, 4),
                "predicted_output_error": round(self.predicted_error, 6),
                "reachable": self.reachable,
                "groups": {g.name: {"channels": g.channels, "width": self.widths[g.name],
                                    "protected": g.protected,
                                    "latency_share": round(g.latency_s / share, 4),
                                    "error_at": {str(w): round(e, 6) for w, e in
                                                 sorted(g.errors.items())}}
                           for g in self.groups}}


# The sensitivity profile of a dense model is the same for every ratio the search tries.
_PROFILES: weakref.WeakKeyDictionary[Any, tuple[list[Group], float]] = weakref.WeakKeyDictionary()


def _module_of(op_name: str) -> str:
    """'/features/features.1/conv/conv.0/Conv#4' -> 'features.1.conv.0': TorchScript scopes
    name each module relative to its grandparent, so a scope extending the previous one
    adds only its tail."""
    parts = op_name.split("#")[0].strip("/").split("/")[:-1]
    full, previous = "", ""
    for part in parts:
        if previous and part.startswith(previous + "."):
            full += part[len(previous):]
        else:
            full = f"{full}.{part}" if full else part
        previous = part
    return full


def op_seconds_by_module(model: Any, args: tuple[Any, ...],
                         profile: Any) -> tuple[dict[str, float], float]:
    """Estimated int8 seconds per torch module on ``profile`` and the dense total."""
    import warnings

    import torch

    from ..estimate.cost import CostModel
    from ..estimate.graph import read_graph
    from ..estimate.host_rates import load_or_calibrate
    from ..estimate.ops import build_ops

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dense.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # TorchScript export: its node names carry the module path the ops are charged to
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17)
        benchmark = profile.cost_model is not None and profile.cost_model.method == "benchmark"
        cost = CostModel.from_profile(profile, load_or_calibrate() if benchmark else None)
        ops = build_ops(read_graph(str(path), "int8"))  # as estimate() reads the int8 variant
    by_module: dict[str, float] = {}
    cached = cost.cached(ops)  # as the estimate decides: weights in cache are not streamed
    total = cost.latency(ops, profile.threads)  # the per-run overhead included
    for op in ops:
        seconds = cost.op_seconds(op, profile.threads, cached)
        name = _module_of(op.name)
        by_module[name] = by_module.get(name, 0.0) + seconds
    return by_module, total


def _outputs(model: Any, data: list[Any]) -> list[Any]:
    import torch

    from ..pytorch.inputs import flat_outputs

    with torch.no_grad():
        return [t.float() for t in flat_outputs(model(*data))]


def output_error(got: list[Any], want: list[Any]) -> float:
    """Mean over outputs of MSE / the dense output's variance across samples: the share of
    the sample-to-sample signal lost (a constant offset such as a class bias is not signal)."""
    errors = []
    for g, w in zip(got, want, strict=True):
        spread = float(w.var(0).mean()) if len(w) > 1 else float(w.var())
        errors.append(float(((g - w) ** 2).mean()) / max(spread, 1e-12))
    return float(np.mean(errors))


def _mask_hooks(group: Any, drop: list[int]) -> list[Any]:
    """Zero channels ``drop`` at the output of every Conv/Linear/BatchNorm writing them."""
    import torch
    from torch import nn

    norm = nn.modules.batchnorm._BatchNorm
    layers = (nn.modules.conv._ConvNd, nn.Linear)
    index = torch.tensor(drop, dtype=torch.long)

    def hook(_m: Any, _i: Any, out: Any) -> Any:
        out = out.clone()
        out.index_fill_(1, index, 0.0)
        return out

    handles = []
    for item in group:
        module = item.dep.target.module
        writes = isinstance(module, norm) or (
            isinstance(module, layers)
            and "out_channels" in getattr(item.dep.handler, "__name__", ""))
        width = (getattr(module, "out_channels", None) or getattr(module, "out_features", None)
                 or getattr(module, "num_features", 0))
        if writes and max(drop) < width:  # a concat remaps indices: such readers stay unmasked
            handles.append(module.register_forward_hook(hook))
    return handles


def measure_groups(model: Any, args: tuple[Any, ...], inputs: list[np.ndarray],
                   profile: Any, samples: int = SAMPLES) -> tuple[list[Group], float]:
    """The sensitivity and latency share of every prunable group of ``model`` (cached)."""
    cached = _PROFILES.get(model)
    if cached is not None:
        return cached
    from .distill import torch_threads

    model.eval()
    with torch_threads(1):  # many small forwards: one thread is faster than contended ones
        found = _measure(model, args, inputs, profile, samples)
    _PROFILES[model] = found
    return found


def latency_groups(model: Any, args: tuple[Any, ...],
                   profile: Any) -> tuple[list[tuple[Group, Any]], float]:
    """Every prunable group of ``model`` with its latency share (no error measured yet),
    beside torch-pruning's group, and the dense estimate."""
    import torch_pruning as tp

    from .structured import _grouped, _roots, output_layers

    graph = tp.DependencyGraph().build_dependency(model, example_inputs=list(args))
    names = {m: n for n, m in model.named_modules()}
    order, pooled = forward_order(model, args)
    position = {n: i for i, n in enumerate(order)}
    seconds, total = op_seconds_by_module(model, args, profile)
    found = []
    ignored = output_layers(graph) + _grouped(graph)
    for tp_group in graph.get_all_groups(ignored_layers=ignored,
                                         root_module_types=list(_roots())):
        root = names.get(tp_group[0].dep.target.module)
        channels = len(tp_group[0].idxs)
        if root is None or channels <= ROUND_TO:
            continue
        members = sorted({names[i.dep.target.module] for i in tp_group
                          if i.dep.target.module in names})
        group = Group(root, channels, members, position.get(root, len(order)))
        group.op_seconds = {m: seconds[m] for m in members if seconds.get(m)}
        group.latency_s = sum(group.op_seconds.values())
        if root in pooled:
            group.protected = "squeeze-excite"
        found.append((group, tp_group))
    return found, total


def _measure(model: Any, args: tuple[Any, ...], inputs: list[np.ndarray], profile: Any,
             samples: int) -> tuple[list[Group], float]:
    import torch
    import torch_pruning as tp

    data = [torch.from_numpy(np.ascontiguousarray(a[:samples])) for a in inputs]
    dense = _outputs(model, data)
    norm_data = [np.ascontiguousarray(a[:BN_SAMPLES]) for a in inputs]
    importance = tp.importance.MagnitudeImportance(p=2)
    groups: list[Group] = []
    found, total = latency_groups(model, args, profile)
    for group, tp_group in found:
        scores = importance(tp_group)
        if scores is None:
            continue
        ranking = torch.argsort(scores).tolist()
        group.errors[group.channels] = 0.0
        for width in sorted({kept_channels(group.channels, f) for f in MEASURED}
                            - {group.channels}):
            handles = _mask_hooks(tp_group, ranking[: group.channels - width])
            try:
                with _batchnorm_reestimated(model, norm_data):
                    group.errors[width] = output_error(_outputs(model, data), dense)
            finally:
                for handle in handles:
                    handle.remove()
        groups.append(group)
    _protect(groups)
    return groups, total


@contextlib.contextmanager
def _batchnorm_reestimated(model: Any, inputs: list[np.ndarray]) -> Iterator[None]:
    """BatchNorm statistics recomputed on ``inputs`` inside, the dense ones restored after."""
    from torch import nn

    from .recover import reestimate_batchnorm

    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [{k: v.clone() for k, v in m.state_dict().items()} for m in norms]
    try:
        if norms and len(inputs[0]):
            reestimate_batchnorm(model, inputs)
        yield
    finally:
        for norm, state in zip(norms, saved, strict=True):
            norm.load_state_dict(state)
        model.eval()


def _protect(groups: list[Group]) -> None:
    ranked = sorted(groups, key=lambda g: g.order)
    if len(ranked) < 3:  # a tiny net: every group is needed to reach any target
        return
    ranked[0].protected = ranked[0].protected or "stem"
    ranked[-1].protected = ranked[-1].protected or "head"
    if len(ranked) >= 5:
        ranked[-2].protected = ranked[-2].protected or "last projection"


def predicted_latency(groups: list[Group], widths: dict[str, int], dense_s: float) -> float:
    """Estimated seconds at ``widths``: each Conv/Linear's seconds scale with the kept share
    of every group it reads or writes (a conv between two thinned groups shrinks twice, a
    depthwise conv once); ops no group touches keep their time."""
    shares: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for group in groups:
        share = widths[group.name] / group.channels
        for module, value in group.op_seconds.items():
            seconds[module] = value
            shares[module] = shares.get(module, 1.0) * share
    return dense_s - sum(seconds.values()) + sum(v * shares[m] for m, v in seconds.items())


def plan_widths(groups: list[Group], dense_latency_s: float,
                target_latency_s: float) -> WidthPlan:
    """Greedy: thin where the latency saved per error added is best, until the target."""
    plan = WidthPlan(groups, dense_latency_s, {g.name: g.channels for g in groups},
                     target_latency_s=target_latency_s)
    latency, error = dense_latency_s, 0.0
    while latency > target_latency_s:
        best: tuple[float, Group, int, float, float] | None = None
        for group in groups:
            current = plan.widths[group.name]
            narrower = [w for w in group.widths() if w < current]
            if not narrower or group.latency_s <= 0:
                continue
            step = narrower[0]
            after = predicted_latency(groups, {**plan.widths, group.name: step}, dense_latency_s)
            saved = latency - after
            added = max(group.error(step) - group.error(current), MIN_ERROR_STEP)
            penalty = PROTECT_PENALTY if group.protected else 1.0
            score = saved / (added * penalty)
            if saved > 0 and (best is None or score > best[0]):
                best = (score, group, step, after, added)
        if best is None:
            plan.reachable = False
            break
        _, group, step, latency, added = best
        plan.widths[group.name] = step
        error += added
    plan.predicted_latency_s, plan.predicted_error = latency, error
    return plan
