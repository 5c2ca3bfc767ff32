"""Channel selection by reconstruction and least-squares refit of the consuming layer.

Magnitude keeps the channels with the largest weights; on a pretrained network that is a
poor guide to what the next layer needs (issue 34: EfficientNet-Lite0 at -20% latency lost
43 points of top-1 agreement). Here, for every group whose removed channels are read by one
1x1 convolution and nothing else (the expansion channels of an inverted residual block:
expand 1x1 -> BN -> act -> depthwise -> BN -> act -> project 1x1, where the projection is
linear in the depthwise block's output), the channels to keep are those from which the
projection's *dense* output is rebuilt best, and the projection's weights and bias are then
refit to it by least squares (He, Zhang & Sun 2017; ThiNet, Luo et al. 2017):

* ``X`` (channels x positions): the projection's input on calibration samples in the
  model pruned so far (groups are handled in forward order, so each fit sees the
  already-pruned predecessors' activations and errors do not accumulate), at every
  position, kept as Gram matrices (``Moments``); ``Y``: the dense model's projection
  output on the dense input at the same positions.
* Backward elimination, Optimal-Brain-Surgeon style: with ``H = X Xᵀ + ridge`` and ``W``
  the least-squares fit, removing channel ``c`` and refitting the rest costs exactly
  ``|W[:, c]|² / H⁻¹[c, c]`` (ridge-pulled towards the dense weights); the cheapest channel goes, ``W`` and ``H⁻¹`` are updated in
  closed form, until the group's width (set by ``widths``) is reached. A constant row
  carries the bias and is never removed. Quadratic in the channel count per removal.
  Output rows are weighed by the scale of the BatchNorm after the projection (what the
  next layer sees), which changes which channels go but not each row's refit.
* The projection gets the refit weights and a bias (added if it had none), so the
  BatchNorm after it sees the dense statistics again and needs no re-estimation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

RIDGE = 0.05  # of the mean diagonal of X Xᵀ: the pull towards the dense weights
BN_WEIGHTED = True  # weigh the consumer's output rows by the BatchNorm scale after it
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


@dataclass
class Moments:
    """Second moments over every calibration position (not a sample of rows: 64 photos give
    200 704 positions at 56x56, and the Gram matrices are all the fit needs), each with a
    constant row last: ``h`` of the pruned model's consumer input, ``cross`` of the pruned
    against the dense one, ``dense`` of the dense one."""
    h: np.ndarray
    cross: np.ndarray
    dense: np.ndarray


def _flat(tensor: Any) -> Any:
    """(N, C, *spatial) -> (C + 1, positions) float64 with a row of ones (the bias)."""
    import torch

    flat = tensor.transpose(0, 1).reshape(tensor.shape[1], -1).double()
    return torch.cat([flat, torch.ones(1, flat.shape[1], dtype=flat.dtype)])


def _moments(pruned: Any, dense: Any, pruned_conv: Any, dense_conv: Any,
             data: list[Any]) -> Moments:
    """Gram matrices of the consumer's input in both models, batch by batch in lockstep:
    each forward stops at the consumer."""
    import torch

    h = cross = gram = None
    for i in range(0, len(data[0]), BATCH):
        batch = [d[i:i + BATCH] for d in data]
        with torch.no_grad():
            with _captured(pruned_conv, "input", stop=True) as got, contextlib.suppress(_Stop):
                pruned(*batch)
            with _captured(dense_conv, "input", stop=True) as want, contextlib.suppress(_Stop):
                dense(*batch)
        xp, xd = _flat(got[0]), _flat(want[0])
        parts = (xp @ xp.T, xp @ xd.T, xd @ xd.T)
        h, cross, gram = parts if h is None else (h + parts[0], cross + parts[1],
                                                   gram + parts[2])
    return Moments(h.numpy(), cross.numpy(), gram.numpy())


def eliminate(x: np.ndarray, y: np.ndarray, keep: int,
              prior: np.ndarray | None = None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Channels of ``x`` (C x rows) to keep so that ``y`` (out x rows) is rebuilt best by a
    least-squares fit with a bias, ridge-pulled towards ``prior`` (out x C+1: the dense
    weights and bias; zeros without); returns (kept indices, weight out x keep, bias out)."""
    xb = np.vstack([x, np.ones((1, x.shape[1]))])
    prior = np.zeros((y.shape[0], x.shape[0] + 1)) if prior is None else prior
    kept, w, _ = eliminate_gram(xb @ xb.T, y @ xb.T, keep, prior)
    return kept, w[:, :-1], w[:, -1]


def eliminate_gram(h: np.ndarray, target: np.ndarray, keep: int, prior: np.ndarray,
                   scale: np.ndarray | None = None,
                   ridge_share: float | None = None) -> tuple[list[int], np.ndarray, list[float]]:
    """Backward elimination on the moments: ``h`` (C+1 square, the constant row last) is the
    input's Gram matrix, ``target`` (out x C+1) the dense output against the input, ``prior``
    the dense weights and bias the ridge pulls towards. ``scale`` weighs each output row
    (the scale of the BatchNorm after the consumer: its output is what the next layer
    sees, so a channel it amplifies costs more to get wrong); each row's fit is its own, so
    it changes which channels go, not the refit. Returns the kept channels, the refit
    (out x keep+1, the bias last) and the objective's increase after each removal.

    The pull matters: a late layer of EfficientNet-Lite0 has 1152 inputs and 64 photos give
    3136 positions at 7x7, so a free fit learns the calibration photos, not the layer."""
    channels = h.shape[0] - 1
    scale = np.ones(target.shape[0]) if scale is None else scale
    h = h.copy()
    share = RIDGE if ridge_share is None else ridge_share
    ridge = share * float(np.mean(np.diag(h)[:channels]))
    h[np.arange(channels + 1), np.arange(channels + 1)] += ridge
    weighted = (target + ridge * prior) * scale[:, None]
    hinv = np.linalg.inv(h)
    w = weighted @ hinv
    removed = np.zeros(channels, dtype=bool)
    path: list[float] = []
    for _ in range(channels - keep):
        # the update below zeroes a removed channel's row and column of H⁻¹ and of W
        cost = np.sum(w[:, :-1] ** 2, axis=0) / np.maximum(np.diag(hinv)[:-1], 1e-30)
        cost[removed] = np.inf
        j = int(np.argmin(cost))
        path.append(float(cost[j]))
        col = hinv[:, j].copy()
        w -= np.outer(w[:, j], col / col[j])
        hinv -= np.outer(col, col / col[j])
        removed[j] = True
    kept = np.flatnonzero(~removed).tolist()
    # a direct solve on the survivors: the closed-form updates drift over many removals
    idx = [*kept, channels]
    w = np.linalg.solve(h[np.ix_(idx, idx)], weighted[:, idx].T).T / scale[:, None]
    return kept, w, path


def fit_error(weight: np.ndarray, idx: list[int], dense_w: np.ndarray, m: Moments,
              scale: np.ndarray) -> float:
    """Relative error of ``weight`` (out x len(idx), on the pruned input's rows ``idx``)
    against the dense output, BatchNorm-scaled: ||Y - W X||² / ||Y - mean||²."""
    yy = np.einsum("ij,jk,ik->i", dense_w, m.dense, dense_w)
    rows = m.dense[-1, -1]
    mean = dense_w @ m.dense[:, -1] / rows
    spread = yy - rows * mean ** 2
    cross = dense_w @ m.cross[idx].T  # out x len(idx)
    err = yy - 2 * np.sum(weight * cross, 1) + np.einsum(
        "ij,jk,ik->i", weight, m.h[np.ix_(idx, idx)], weight)
    s2 = scale ** 2
    return float(np.sum(s2 * err) / max(float(np.sum(s2 * spread)), 1e-30))


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


def norm_scales(model: Any, args: tuple[Any, ...]) -> dict[str, np.ndarray]:
    """Conv name -> |gamma| / sqrt(var + eps) of the BatchNorm run right after it."""
    import torch
    from torch import nn

    norm = nn.modules.batchnorm._BatchNorm
    # (name, input, output) in run order: a BatchNorm counts when it reads the conv's very
    # output (onnx2torch graphs run a conv, then a BatchNorm on something else)
    ran: list[tuple[str, Any, Any]] = []
    handles = [m.register_forward_hook(lambda _m, i, o, n=n: ran.append((n, i[0], o)))
               for n, m in model.named_modules()
               if isinstance(m, (nn.modules.conv._ConvNd, norm))]
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for handle in handles:
            handle.remove()
    modules = dict(model.named_modules())
    found = {}
    for (first, _, made), (second, read, _) in zip(ran, ran[1:], strict=False):
        bn = modules[second]
        if isinstance(bn, norm) and not isinstance(modules[first], norm) and read is made:
            gamma = (bn.weight.detach().double() if bn.weight is not None
                     else torch.ones(bn.num_features, dtype=torch.float64))
            found[first] = (gamma.abs() / torch.sqrt(bn.running_var.double() + bn.eps)).numpy()
    return found


def _dense_weights(conv: Any, rows: list[int]) -> np.ndarray:
    """out x (C+1): the dense conv's weights on its surviving output ``rows``, bias last."""
    w = conv.weight.detach().double().reshape(conv.out_channels, -1).numpy()
    b = conv.bias.detach().double().numpy() if conv.bias is not None else np.zeros(len(w))
    return np.hstack([w, b[:, None]])[rows]


def prune_by_reconstruction(pruned: Any, dense: Any, pending: list[tuple[Any, int]],
                            calib: list[np.ndarray], order: list[str],
                            args: tuple[Any, ...] = ()) -> Reconstruction:
    """Prune each pending (group, keep) of ``pruned`` in place by reconstruction, in the
    forward ``order`` of their consumers, refitting each consumer; ``dense`` is untouched."""
    import torch
    from torch import nn

    names = {m: n for n, m in pruned.named_modules()}
    work = [(g, k, consumer_of(g)) for g, k in pending]
    rank = {n: i for i, n in enumerate(order)}
    work.sort(key=lambda t: rank.get(names[t[2]], len(rank)))
    data = [torch.from_numpy(np.ascontiguousarray(a[:SAMPLES])) for a in calib]
    scales = norm_scales(dense, args or tuple(d[:1] for d in data)) if BN_WEIGHTED else {}
    result = Reconstruction()
    dense_modules = dict(dense.named_modules())
    pruned.eval()
    dense.eval()
    for group, keep, conv in work:
        name = names[conv]
        rows = _surviving_outputs(conv, dense_modules[name])
        m = _moments(pruned, dense, conv, dense_modules[name], data)
        dense_w = _dense_weights(dense_modules[name], rows)
        # the pruned conv's input is the dense one's channels (this group cuts them), so
        # the dense weights are the prior and selection-only's weights
        target = dense_w @ m.cross.T
        # (no BatchNorm after it: every output row weighs the same, indexed like the dense ones)
        scale = scales.get(name, np.ones(dense_modules[name].out_channels))[rows]
        kept, weight, _ = eliminate_gram(m.h, target, keep, dense_w, scale)
        idx = [*kept, m.h.shape[0] - 1]
        fit = LayerFit(name, (m.h.shape[0] - 1, keep),
                       fit_error(dense_w[:, idx], idx, dense_w, m, scale),
                       fit_error(weight, idx, dense_w, m, scale))
        if fit.error_refit > fit.error_selected:  # ridge can cost a little: never worse
            weight = dense_w[:, idx]
            fit.error_refit = fit.error_selected
        result.layers.append(fit)
        drop = sorted(set(range(m.h.shape[0] - 1)) - set(kept))
        group.prune(idxs=drop)
        shape = conv.weight.shape
        refit_w = torch.from_numpy(weight[:, :-1]).to(conv.weight.dtype).reshape(shape)
        # a later group may cut this conv's outputs: rows are matched through the refit
        result.selected_only[name] = (
            torch.from_numpy(dense_w[:, kept]).to(conv.weight.dtype).reshape(shape),
            None if conv.bias is None else conv.bias.detach().clone(), refit_w.clone())
        with torch.no_grad():
            conv.weight.copy_(refit_w)
            if conv.bias is None:
                conv.bias = nn.Parameter(torch.zeros(conv.out_channels, dtype=conv.weight.dtype))
            conv.bias.copy_(torch.from_numpy(weight[:, -1]).to(conv.weight.dtype))
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
