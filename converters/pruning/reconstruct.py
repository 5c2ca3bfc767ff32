"""Channel selection by reconstruction and least-squares refit of the consuming layer.

Magnitude keeps the channels with the largest weights; on a pretrained network that is a
poor guide to what the next layer needs (issue 34: EfficientNet-Lite0 at -20% latency lost
43 points of top-1 agreement). Here, for every group whose removed channels are read by one
1x1 convolution and nothing else (the expansion channels of an inverted residual block:
expand 1x1 -> BN -> act -> depthwise -> BN -> act -> project 1x1, where the projection is
linear in the depthwise block's output), the channels to keep are those from which the
projection's *dense* output is rebuilt best, and the projection's weights and bias are then
refit to it by least squares (He, Zhang & Sun 2017; ThiNet, Luo et al. 2017):

* ``X`` (channels x rows): the projection's input on calibration samples in the model
  pruned so far (groups are handled in forward order, so each fit sees the already-pruned
  predecessors' activations and errors do not accumulate), ``ROWS`` sampled positions;
  ``Y`` (out x rows): the dense model's projection output at the same positions.
* Backward elimination, Optimal-Brain-Surgeon style: with ``H = X Xᵀ + ridge`` and ``W``
  the least-squares fit, removing channel ``c`` and refitting the rest costs exactly
  ``|W[:, c]|² / H⁻¹[c, c]`` (ridge-pulled towards the dense weights); the cheapest channel goes, ``W`` and ``H⁻¹`` are updated in
  closed form, until the group's width (set by ``widths``) is reached. A constant row
  carries the bias and is never removed. Quadratic in the channel count per removal.
* The projection gets the refit weights and a bias (added if it had none), so the
  BatchNorm after it sees the dense statistics again and needs no re-estimation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ROWS = 4096  # sampled positions per layer: several times the widest group (1152 channels)
RIDGE = 0.05  # of the mean diagonal of X Xᵀ: the pull towards the dense weights
SAMPLES = 64  # calibration samples the activations are drawn from
BATCH = 16


@dataclass
class LayerFit:
    consumer: str
    channels: tuple[int, int]  # before, after
    error_selected: float  # relative error ||Y - W_S X_S||² / ||Y - mean||², dense weights
    error_refit: float  # the same after the least-squares refit

    def to_dict(self) -> dict[str, Any]:
        return {"consumer": self.consumer, "channels": list(self.channels),
                "error_selected": round(self.error_selected, 6),
                "error_refit": round(self.error_refit, 6)}


@dataclass
class Reconstruction:
    layers: list[LayerFit] = field(default_factory=list)
    # consumer name -> (weight, bias) of the selected channels with the dense values: what
    # selection alone gives (the build measures its agreement before applying the refit)
    selected_only: dict[str, tuple[Any, Any, Any]] = field(default_factory=dict)


def consumer_of(group: Any) -> Any | None:
    """The single non-depthwise 1x1 Conv reading the group's channels, else None."""
    from torch import nn

    readers = []
    for item in group:
        dep = item.dep
        name = getattr(dep.handler, "__name__", "")
        module = dep.target.module
        if "in_channels" in name and isinstance(module, nn.modules.conv._ConvNd):
            if module.groups == 1:
                readers.append(module)
        elif "in_channels" in name and not isinstance(module, nn.modules.batchnorm._BatchNorm):
            if not (isinstance(module, nn.modules.conv._ConvNd)):
                return None  # a Linear or other reader: not handled here
    readers = list({id(m): m for m in readers}.values())
    if len(readers) != 1:
        return None
    conv = readers[0]
    if tuple(conv.kernel_size) != (1,) * len(conv.kernel_size) or any(s != 1 for s in conv.stride):
        return None
    return conv


class _Stop(Exception):
    pass


@contextlib.contextmanager
def _captured(module: Any, which: str, stop: bool) -> Iterator[list[Any]]:
    found: list[Any] = []

    def hook(_m: Any, inputs: Any, output: Any) -> None:
        found.append((inputs[0] if which == "input" else output).detach())
        if stop:
            raise _Stop

    handle = module.register_forward_hook(hook)
    try:
        yield found
    finally:
        handle.remove()


def _rows(tensor: Any, positions: np.ndarray) -> np.ndarray:
    """(N, C, *spatial) -> (C, rows) at the flat sample-major ``positions``."""
    flat = tensor.transpose(0, 1).reshape(tensor.shape[1], -1)
    return flat[:, positions].double().numpy()


def _positions(shape: tuple[int, ...], layer: int) -> np.ndarray:
    total = int(np.prod([shape[0], *shape[2:]]))
    gen = np.random.default_rng(1000 + layer)
    return np.sort(gen.choice(total, size=min(ROWS, total), replace=False))


def _activations(model: Any, module: Any, which: str, data: list[Any]) -> Any:
    import torch

    with torch.no_grad(), _captured(module, which, stop=which == "input") as found:
        for i in range(0, len(data[0]), BATCH):
            with contextlib.suppress(_Stop):
                model(*[d[i:i + BATCH] for d in data])
    return torch.cat(found)


def eliminate(x: np.ndarray, y: np.ndarray, keep: int,
              prior: np.ndarray | None = None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Channels of ``x`` (C x rows) to keep so that ``y`` (out x rows) is rebuilt best by a
    least-squares fit with a bias, ridge-pulled towards ``prior`` (out x C+1: the dense
    weights and bias; zeros without); returns (kept indices, weight out x keep, bias out).

    The pull matters: a late layer of EfficientNet-Lite0 has 1152 inputs and 64 photos give
    3136 positions at 7x7, so a free fit learns the calibration photos, not the layer."""
    channels = x.shape[0]
    xb = np.vstack([x, np.ones((1, x.shape[1]))])  # the bias row, never removed
    h = xb @ xb.T
    ridge = RIDGE * float(np.mean(np.diag(h)[:channels]))
    h[np.arange(channels + 1), np.arange(channels + 1)] += ridge
    prior = np.zeros((y.shape[0], channels + 1)) if prior is None else prior
    target = y @ xb.T + ridge * prior
    hinv = np.linalg.inv(h)
    w = target @ hinv
    removed = np.zeros(channels, dtype=bool)
    for _ in range(channels - keep):
        # the update below zeroes a removed channel's row and column of H⁻¹ and of W
        cost = np.sum(w[:, :-1] ** 2, axis=0) / np.maximum(np.diag(hinv)[:-1], 1e-30)
        cost[removed] = np.inf
        j = int(np.argmin(cost))
        col = hinv[:, j].copy()
        w -= np.outer(w[:, j], col / col[j])
        hinv -= np.outer(col, col / col[j])
        removed[j] = True
    alive = [*np.flatnonzero(~removed).tolist(), channels]
    # a direct solve on the survivors: the closed-form updates drift over many removals
    kept = alive[:-1]
    idx = [*kept, channels]
    sub = h[np.ix_(idx, idx)]
    w = np.linalg.solve(sub, target[:, idx].T).T
    return kept, w[:, :-1], w[:, -1]


def _surviving_outputs(conv: Any, dense_conv: Any) -> list[int]:
    """The dense output channels ``conv`` still has (an earlier magnitude group may have cut
    some), found by their weights: pruning copies rows, and the input side is not cut yet."""
    return _rows_of(conv.weight, dense_conv.weight)


def _rows_of(weight: Any, source: Any) -> list[int]:
    """Which output row of ``source`` each output row of ``weight`` is."""
    import torch

    rows = source.detach().reshape(source.shape[0], -1)
    mine = weight.detach().reshape(weight.shape[0], -1)
    found = []
    for row in mine:
        match = torch.nonzero(torch.all(rows == row, dim=1)).flatten().tolist()
        found.append(next(i for i in match if i not in found))
    return found


def relative_error(y: np.ndarray, got: np.ndarray) -> float:
    spread = float(np.sum((y - y.mean(axis=1, keepdims=True)) ** 2))
    return float(np.sum((y - got) ** 2)) / max(spread, 1e-30)


def _dense_outputs(dense: Any, consumers: list[str], data: list[Any]) -> dict[str, Any]:
    modules = dict(dense.named_modules())
    found: dict[str, list[Any]] = {n: [] for n in consumers}
    handles = []
    for name in consumers:
        def hook(_m: Any, _i: Any, out: Any, name: str = name) -> None:
            found[name].append(out.detach())
        handles.append(modules[name].register_forward_hook(hook))
    import torch
    try:
        with torch.no_grad():
            for i in range(0, len(data[0]), BATCH):
                dense(*[d[i:i + BATCH] for d in data])
    finally:
        for handle in handles:
            handle.remove()
    return {n: torch.cat(v) for n, v in found.items()}


def prune_by_reconstruction(pruned: Any, dense: Any, pending: list[tuple[Any, int]],
                            calib: list[np.ndarray], order: list[str]) -> Reconstruction:
    """Prune each pending (group, keep) of ``pruned`` in place by reconstruction, in the
    forward ``order`` of their consumers, refitting each consumer; ``dense`` is untouched."""
    import torch
    from torch import nn

    names = {m: n for n, m in pruned.named_modules()}
    work = [(g, k, consumer_of(g)) for g, k in pending]
    rank = {n: i for i, n in enumerate(order)}
    work.sort(key=lambda t: rank.get(names[t[2]], len(rank)))
    data = [torch.from_numpy(np.ascontiguousarray(a[:SAMPLES])) for a in calib]
    targets = _dense_outputs(dense, [names[c] for _, _, c in work], data)
    result = Reconstruction()
    dense_modules = dict(dense.named_modules())
    pruned.eval()
    for layer, (group, keep, conv) in enumerate(work):
        name = names[conv]
        x_all = _activations(pruned, conv, "input", data)
        y_all = targets[name][:, _surviving_outputs(conv, dense_modules[name])]
        positions = _positions(tuple(x_all.shape), layer)
        x, y = _rows(x_all, positions), _rows(y_all, positions)
        dense_w = conv.weight.detach().double().reshape(conv.out_channels, -1).numpy()
        dense_b = (conv.bias.detach().double().numpy() if conv.bias is not None
                   else np.zeros(conv.out_channels))
        kept, weight, bias = eliminate(x, y, keep, np.hstack([dense_w, dense_b[:, None]]))
        selected = dense_w[:, kept] @ x[kept] + dense_b[:, None]
        refit = weight @ x[kept] + bias[:, None]
        fit = LayerFit(name, (x.shape[0], keep), relative_error(y, selected),
                       relative_error(y, refit))
        if fit.error_refit > fit.error_selected:  # ridge can cost a little: never worse
            weight, bias = dense_w[:, kept], dense_b
            fit.error_refit = fit.error_selected
        result.layers.append(fit)
        drop = sorted(set(range(x.shape[0])) - set(kept))
        group.prune(idxs=drop)
        shape = conv.weight.shape
        refit_w = torch.from_numpy(weight).to(conv.weight.dtype).reshape(shape)
        # a later group may cut this conv's outputs: rows are matched through the refit
        result.selected_only[name] = (
            torch.from_numpy(dense_w[:, kept]).to(conv.weight.dtype).reshape(shape),
            None if conv.bias is None else conv.bias.detach().clone(), refit_w.clone())
        with torch.no_grad():
            conv.weight.copy_(refit_w)
            if conv.bias is None:
                conv.bias = nn.Parameter(torch.zeros(conv.out_channels, dtype=conv.weight.dtype))
            conv.bias.copy_(torch.from_numpy(bias).to(conv.weight.dtype))
    return result


def with_selected_only(model: Any, result: Reconstruction) -> Any:
    """A copy of the pruned ``model`` with the consumers' dense weights on the kept
    channels (what selection alone gives, before the refit)."""
    import copy

    import torch

    clone = copy.deepcopy(model)
    modules = dict(clone.named_modules())
    with torch.no_grad():
        for name, (weight, bias, refit) in result.selected_only.items():
            conv = modules[name]
            rows = _rows_of(conv.weight, refit)
            conv.weight.copy_(weight[rows])
            if bias is None:
                conv.bias = None
            else:
                conv.bias.copy_(bias[rows])
    return clone


def forward_order(model: Any, args: tuple[Any, ...]) -> tuple[list[str], set[str]]:
    """Conv/Linear modules in execution order, and convs run on a 1x1 map (squeeze-excite)."""
    import torch
    from torch import nn

    order: list[str] = []
    pooled: set[str] = set()
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, (nn.modules.conv._ConvNd, nn.Linear)):
            def hook(_m: Any, inputs: Any, _out: Any, name: str = name) -> None:
                order.append(name)
                x = inputs[0] if inputs else None
                if (isinstance(x, torch.Tensor) and x.dim() >= 3
                        and int(np.prod(x.shape[2:])) == 1):
                    pooled.add(name)
            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for handle in handles:
            handle.remove()
    return list(dict.fromkeys(order)), pooled
