"""Block-wise feature distillation of a pruned model (issue 34).

End-to-end distillation of a pretrained 4.6 M-parameter network from a few hundred
unlabelled crops moves too slowly on a shared 2-core host (EfficientNet-Lite0: 29 steps of
batch 32 in 600 s, the held-out loss never below its start). Here each pruned unit (the
module around a refit 1x1 conv: an inverted residual block, or the conv itself at the model's
top level) is trained alone to reproduce the dense unit's output:

* in forward order, the unit's input is taken from the *pruned* model (earlier units
  already trained), its target from the dense model on the dense input, so a unit also
  learns to undo what its predecessors still get wrong (as the least-squares refit does);
* both are cached for all crops once per unit: every training step is one unit's forward
  and backward, no backward path through the rest of the network;
* BatchNorm keeps its statistics (eval mode; its scale and shift train), the loss is the
  mean squared error over the target's variance; a held-out share of the crops guards each
  unit: when its held-out loss does not fall, the unit keeps its weights.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BATCH = 32
HELD_OUT = 0.125
LEARNING_RATE = 1e-4


@dataclass
class UnitFit:
    unit: str
    steps: int
    loss_before: float  # held-out, relative to the target's variance
    loss_after: float
    kept: bool  # the trained weights were kept (held-out loss fell)

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "steps": self.steps, "loss_before": round(self.loss_before, 6),
                "loss_after": round(self.loss_after, 6), "kept": self.kept}


@dataclass
class BlockwiseReport:
    units: list[UnitFit] = field(default_factory=list)
    seconds: float = 0.0
    samples: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"units": [u.to_dict() for u in self.units], "seconds": round(self.seconds, 1),
                "samples": self.samples}


def units_of(consumers: list[str]) -> list[str]:
    """The module around each refit consumer: its parent, or itself at the top level."""
    found = []
    for name in consumers:
        parent = name.rpartition(".")[0]
        found.append(parent or name)
    return list(dict.fromkeys(found))


class _Stop(Exception):
    pass


@contextlib.contextmanager
def _call_of(module: Any, stop: str) -> Iterator[list[Any]]:
    """Captures (args, kwargs, output) of ``module``'s call; the forward ends ``stop``
    ("before" or "after") it: the rest of the network is not needed."""
    found: list[Any] = []

    def pre(_m: Any, args: Any, kwargs: Any) -> None:
        found.append([args, kwargs, None])
        if stop == "before":
            raise _Stop

    def post(_m: Any, _args: Any, _kwargs: Any, output: Any) -> None:
        found[-1][2] = output
        raise _Stop

    handles = [module.register_forward_pre_hook(pre, with_kwargs=True),
               module.register_forward_hook(post, with_kwargs=True)]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


def _unit_inputs(model: Any, name: str, data: Any) -> tuple[Any, dict[str, Any]]:
    """The input of ``model``'s unit ``name`` over every sample (each forward stops there),
    and its keyword arguments."""
    import torch

    unit = dict(model.named_modules())[name]
    xs, kwargs = [], {}
    with torch.no_grad():
        for i in range(0, len(data), BATCH):
            with _call_of(unit, "before") as got, contextlib.suppress(_Stop):
                model(data[i:i + BATCH])
            xs.append(got[0][0][0])
            kwargs = got[0][1]
    return torch.cat(xs), kwargs


def _run(unit: Any, x: Any, kwargs: dict[str, Any]) -> Any:
    import torch

    with torch.no_grad():
        return torch.cat([unit(x[i:i + BATCH], **kwargs) for i in range(0, len(x), BATCH)])


def _chained(student: Any, units: list[str],
             batch: Any) -> tuple[list[bool], dict[str, dict[str, Any]]]:
    """For each unit: is the next unit's input this unit's output, the very tensor? Then the
    next unit's inputs are this unit's outputs after training, one unit's forward instead
    of the whole prefix again. Also each unit's keyword arguments."""
    import torch

    modules = dict(student.named_modules())
    calls: dict[str, list[Any]] = {}
    handles = []
    for name in units:
        def pre(_m: Any, args: Any, kwargs: Any, name: str = name) -> None:
            calls.setdefault(name, [args[0] if args else None, None, kwargs])

        def post(_m: Any, _args: Any, output: Any, name: str = name) -> None:
            calls[name][1] = output
        handles += [modules[name].register_forward_pre_hook(pre, with_kwargs=True),
                    modules[name].register_forward_hook(post)]
    try:
        with torch.no_grad():
            student(batch)
    finally:
        for handle in handles:
            handle.remove()
    chained = [a in calls and b in calls and calls[b][0] is calls[a][1]
               for a, b in zip(units, units[1:], strict=False)] + [False]
    return chained, {n: c[2] for n, c in calls.items()}


def _surviving(unit: Any, dense_unit: Any, channels: int) -> list[int]:
    """The dense output channels the pruned ``unit`` still has (a later group may have cut
    them), found by the running means of the unit's last BatchNorm: pruning copies them,
    and the refit changes the conv before it, not them."""
    from torch import nn

    from .reconstruct import _rows_of

    norms = [m for m in unit.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms or norms[-1].num_features == channels:
        return list(range(channels))
    dense_norms = [m for m in dense_unit.modules()
                   if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    return _rows_of(norms[-1].running_mean[:, None], dense_norms[-1].running_mean[:, None])


def _loss(unit: Any, x: Any, y: Any, kwargs: dict[str, Any], var: Any) -> Any:
    return ((unit(x, **kwargs) - y) ** 2).mean() / var


def distill_blockwise(student: Any, teacher: Any, inputs: np.ndarray, units: list[str],
                      epochs: int = 4, seconds: float | None = None, seed: int = 0,
                      lr: float = LEARNING_RATE) -> BlockwiseReport:
    """Train each of ``units`` of ``student`` in place towards ``teacher``'s, in order."""
    import torch

    report = BlockwiseReport(samples=len(inputs))
    start = time.perf_counter()
    data = torch.from_numpy(np.ascontiguousarray(inputs))
    order = np.random.default_rng(seed).permutation(len(data))
    held = int(len(data) * HELD_OUT)
    held_idx, train_idx = torch.from_numpy(order[:held]), torch.from_numpy(order[held:])
    gen = torch.Generator().manual_seed(seed)
    student.eval()
    teacher.eval()
    share = None if seconds is None else seconds / max(len(units), 1)
    chained, unit_kwargs = _chained(student, units, data[:2])
    x = dense_x = None
    for name, passes_on in zip(units, chained, strict=True):
        unit_start = time.perf_counter()
        unit = dict(student.named_modules())[name]
        dense_unit = dict(teacher.named_modules())[name]
        if x is None:  # else: this unit's inputs are the previous unit's outputs
            x, kwargs = _unit_inputs(student, name, data)
            dense_x, _ = _unit_inputs(teacher, name, data)
        kwargs = unit_kwargs.get(name, {})
        dense_y = _run(dense_unit, dense_x, kwargs)
        y = dense_y[:, _surviving(unit, dense_unit, dense_y.shape[1])]
        var = y.var().clamp_min(1e-12)
        with torch.no_grad():
            before = float(_loss(unit, x[held_idx], y[held_idx], kwargs, var))
        saved = copy.deepcopy(unit.state_dict())
        opt = torch.optim.Adam([p for p in unit.parameters() if p.requires_grad], lr=lr)
        steps = 0
        for _ in range(epochs):
            perm = train_idx[torch.randperm(len(train_idx), generator=gen)]
            for i in range(0, len(perm) - 1, BATCH):
                idx = perm[i:i + BATCH]
                loss = _loss(unit, x[idx], y[idx], kwargs, var)
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
                if share is not None and time.perf_counter() - unit_start > share:
                    break
            if share is not None and time.perf_counter() - unit_start > share:
                break
        with torch.no_grad():
            after = float(_loss(unit, x[held_idx], y[held_idx], kwargs, var))
        kept = after < before
        if not kept:
            unit.load_state_dict(saved)
        report.units.append(UnitFit(name, steps, before, after if kept else before, kept))
        x, dense_x = (_run(unit, x, kwargs), dense_y) if passes_on else (None, None)
        del y, dense_y
    for p in student.parameters():
        p.grad = None
    report.seconds = time.perf_counter() - start
    return report
