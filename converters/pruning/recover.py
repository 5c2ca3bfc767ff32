"""Recover a pruned torch model's accuracy without labels: the step budget and BatchNorm.

Two steps, both label-free:

1. **Distillation** (``distill.py``): a short fine-tune of the pruned model (student) to reproduce the dense
   model's (teacher) outputs on the calibration inputs, MSE on every output scaled by the
   teacher's variance. Measured on the digits CNN (no BatchNorm, 284 held-out digits):
   pruning 50% / 62.5% of the channels dropped top-1 from 100% to 71.5% / 19.4%; 400
   distillation steps on 256 unlabelled calibration digits brought it back to 99.6% / 98.2%
   (200 steps at lr 1e-3: 98.6% / 93.3%). tools/benchmarks/bench_prune.py prints current figures.
2. **BatchNorm re-estimation**: removing channels shifts every later layer's input
   statistics, so BatchNorm running mean/var are recomputed as plain averages over the
   calibration batches (momentum None) with the rest of the model in eval mode.

The step count scales down with the model's work so a big model does not fine-tune for
hours on a CPU: ``steps = min(max_steps, budget_macs / (3 * macs_per_sample * batch))``
(forward + backward ~ 3x a forward pass).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .distill import BATCH

DEFAULT_STEPS = 400
# ~1 minute of training on one desktop core at ~10-20 effective GMAC/s
TRAIN_BUDGET_MACS = 1e12
SMALL_MODEL_MACS = 50e6  # below this per sample, one thread: syncing threads costs more


def steps_for(macs_per_sample: float, max_steps: int = DEFAULT_STEPS) -> int:
    if macs_per_sample <= 0:
        return max_steps
    return int(max(0, min(max_steps, TRAIN_BUDGET_MACS / (3 * macs_per_sample * BATCH))))


def reestimate_batchnorm(model: Any, inputs: list[np.ndarray]) -> int:
    """Recompute every BatchNorm's running statistics on ``inputs``; returns how many."""
    import torch
    from torch import nn

    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return 0
    data = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    model.eval()
    momenta = []
    for norm in norms:
        momenta.append(norm.momentum)
        norm.reset_running_stats()
        norm.momentum = None  # cumulative average over the batches, not an EMA
        norm.train()
    with torch.no_grad():
        for i in range(0, len(data[0]), BATCH):
            if len(data[0][i:i + BATCH]) > 1:  # batch statistics need two samples or more
                model(*[d[i:i + BATCH] for d in data])
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum
    model.eval()
    return len(norms)


def macs_per_sample(model: Any, args: tuple[Any, ...]) -> float:
    """Multiply-accumulates of Conv/Linear layers for one sample (forward hooks, one pass)."""
    import torch
    from torch import nn

    total = [0.0]

    def hook(module: Any, _inputs: Any, output: Any) -> None:
        if not isinstance(output, torch.Tensor) or output.dim() == 0:
            return
        per_out = (module.in_channels // module.groups * int(np.prod(module.kernel_size))
                   if isinstance(module, nn.modules.conv._ConvNd) else module.in_features)
        total[0] += output.numel() / max(1, output.shape[0]) * per_out

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.modules.conv._ConvNd, nn.Linear))]
    try:
        with torch.no_grad():
            model(*args)
    finally:
        for handle in handles:
            handle.remove()
    return total[0]
