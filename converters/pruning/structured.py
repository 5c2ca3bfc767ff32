"""Structured pruning of a torch module with torch-pruning: channels are physically removed.

Every Conv/Linear output-channel group (channels coupled through residual adds, concats and
depthwise convs are one group, as torch-pruning's dependency graph finds them) keeps
``max(8, floor8(channels * (1 - ratio)))`` channels, chosen by L2 magnitude of the group's
weights, or, given calibration data, by reconstruction where the group's channels are read
by one 1x1 conv only (``reconstruct.py``: that conv is then refit by least squares). Multiples of 8 because int8 kernels process 8/16 lanes per SIMD step: XNNPACK
and MLAS pad odd channel counts up, so a layer of 27 channels costs what 32 would, and
measured latency at odd counts is worse than at the next multiple of 8 (issue 7).

Layers whose output is a model output (reachable without passing another Conv/Linear:
classifier heads, detection heads) keep every channel, since pruning them would change
the model's output shape. Groups of fewer than 8 channels, and grouped (non-depthwise)
convolutions, are left as they are.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from edgekit.errors import UnsupportedModelError

from .reconstruct import consumer_of, forward_order, prune_by_reconstruction

ROUND_TO = 8


@dataclass
class StructuredReport:
    ratio: float
    params_before: int
    params_after: int
    channels: dict[str, list[int]] = field(default_factory=dict)  # layer -> [before, after]
    kept_whole: list[str] = field(default_factory=list)  # output layers, tiny groups
    widths: str = "uniform"  # or "sensitivity": per-group widths from widths.plan_widths
    select: str = "magnitude"  # or "reconstruction" (reconstruct.py) where a group allows it
    reconstruction: Any = None  # reconstruct.Reconstruction when select is "reconstruction"

    def to_dict(self) -> dict[str, Any]:
        method = ("structured (torch-pruning, reconstruction + least-squares refit where the "
                  "channels feed one 1x1 conv, else L2 magnitude)"
                  if self.select == "reconstruction" else "structured (torch-pruning, L2 magnitude)")
        extra = ({"reconstructed": [f.to_dict() for f in self.reconstruction.layers]}
                 if self.reconstruction is not None else {})
        return {"method": method, "select": self.select, "ratio": self.ratio, **extra,
                "widths": self.widths, "round_to": ROUND_TO,
                "params_before": self.params_before, "params_after": self.params_after,
                "channels": self.channels, "kept_whole": self.kept_whole}


def kept_channels(channels: int, ratio: float) -> int:
    """Channels a group keeps at ``ratio``: a multiple of 8, at least 8, at most all."""
    if channels <= ROUND_TO:
        return channels
    keep = int(channels * (1.0 - ratio) + 1e-9) // ROUND_TO * ROUND_TO
    return min(channels, max(ROUND_TO, keep))


def _roots() -> tuple[type, ...]:
    from torch import nn

    return (nn.modules.conv._ConvNd, nn.Linear)


def output_layers(graph: Any) -> list[Any]:
    """Conv/Linear modules from which a model output is reached without another Conv/Linear."""
    roots = _roots()
    found = []
    for module, node in graph.module2node.items():
        if not isinstance(module, roots):
            continue
        stack, seen, reaches = list(node.outputs), set(), not node.outputs
        while stack and not reaches:
            nxt = stack.pop()
            if id(nxt) in seen or isinstance(nxt.module, roots):
                continue
            seen.add(id(nxt))
            reaches = not nxt.outputs
            stack.extend(nxt.outputs)
        if reaches:
            found.append(module)
    return found


def _grouped(graph: Any) -> list[Any]:
    from torch import nn

    return [m for m in graph.module2node if isinstance(m, nn.modules.conv._ConvNd)
            and 1 < m.groups < m.in_channels]


def _out_channels(module: Any) -> int | None:
    return getattr(module, "out_channels", None) or getattr(module, "out_features", None)


def layer_channels(model: Any) -> dict[str, int]:
    """Output channels of every Conv/Linear, by module name."""
    roots = _roots()
    return {name: int(_out_channels(m)) for name, m in model.named_modules()
            if isinstance(m, roots)}


def prune_structured(model: Any, example_args: tuple[Any, ...], ratio: float,
                     widths: dict[str, int] | None = None, *,
                     calib: list[Any] | None = None) -> tuple[Any, StructuredReport]:
    """A pruned copy of ``model`` (the original is untouched) and what was removed.

    ``widths`` (group root module name -> channels kept, from ``widths.plan_widths``)
    replaces the uniform ``ratio``; groups it does not name keep every channel. With
    ``calib`` (calibration arrays), groups read by one 1x1 conv only are chosen by
    reconstruction and that conv refit (``reconstruct.py``); the others by magnitude."""
    import torch
    import torch_pruning as tp

    if not 0.0 <= ratio < 1.0:
        raise UnsupportedModelError(f"pruning ratio must be in [0, 1), got {ratio}")
    pruned = copy.deepcopy(model).eval()
    before = layer_channels(pruned)
    n_before = sum(p.numel() for p in pruned.parameters())
    try:
        graph = tp.DependencyGraph().build_dependency(pruned, example_inputs=list(example_args))
    except Exception as exc:  # noqa: BLE001 - torch-pruning traces through autograd; say why
        raise UnsupportedModelError(
            f"torch-pruning cannot trace {type(model).__name__} for structured pruning: "
            f"{type(exc).__name__}: {exc}") from exc
    ignored = output_layers(graph) + _grouped(graph)
    importance = tp.importance.MagnitudeImportance(p=2)
    names = {m: n for n, m in pruned.named_modules()}
    report = StructuredReport(ratio, n_before, n_before,
                              kept_whole=sorted(names[m] for m in ignored if m in names),
                              widths="uniform" if widths is None else "sensitivity",
                              select="magnitude" if calib is None else "reconstruction")
    pending = []  # (group, keep) handled by reconstruction once magnitude groups are cut
    for group in graph.get_all_groups(ignored_layers=ignored, root_module_types=list(_roots())):
        scores = importance(group)
        if scores is None:
            continue
        count = len(scores)
        keep = (kept_channels(count, ratio) if widths is None else
                min(count, widths.get(names.get(group[0].dep.target.module, ""), count)))
        if keep >= count:
            continue
        if calib is not None and consumer_of(group) is not None:
            pending.append((group, keep))
            continue
        drop = torch.argsort(scores)[: count - keep].tolist()
        group.prune(idxs=drop)
    if pending:
        order = forward_order(model, example_args)[0]
        report.reconstruction = prune_by_reconstruction(pruned, model, pending, calib, order,
                                                        example_args)
    after = layer_channels(pruned)
    report.channels = {name: [before[name], after.get(name, 0)] for name in before}
    report.params_after = sum(p.numel() for p in pruned.parameters())
    return pruned, report
