"""The training loop the tools share: AdamW + one-cycle schedule over shuffled batches, for a
fixed number of steps (not a time budget, so the same seed gives the same weights on any
machine), with a progress line every 100 steps."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

# the batch's loss and the named parts worth printing (e.g. {"cls": ..., "box": ...})
BatchLoss = Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]


def fit(model: nn.Module, samples: int, steps: int, batch_loss: BatchLoss, *,
        batch: int = 32, lr: float = 3e-3, weight_decay: float = 1e-4,
        generator: torch.Generator | None = None) -> nn.Module:
    """Train ``model`` in place for ``steps`` batches of ``batch`` indices into ``samples``
    samples; ``batch_loss(indices)`` computes the loss. Seed torch before calling, or pass a
    seeded ``generator`` for the shuffles (``batch_loss`` may draw from the same one)."""
    opt = torch.optim.AdamW(model.parameters(), lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps)
    model.train()
    start, step, epoch = time.monotonic(), 0, 0
    while step < steps:
        order = torch.randperm(samples, generator=generator)
        for at in range(0, samples, batch):
            loss, parts = batch_loss(order[at:at + batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0:
                shown = " ".join(f"{k} {v.item():.3f}" for k, v in parts.items())
                print(f"epoch {epoch} step {step} {time.monotonic() - start:.0f}s {shown}", flush=True)
            if step >= steps:
                break
        epoch += 1
    print(f"trained {steps} steps: {time.monotonic() - start:.0f} s wall, "
          f"{time.process_time():.0f} s CPU (one thread; wall > CPU when the machine is shared)")
    return model.eval()


def train_or_load(doc: str, default_steps: int, new_model: Callable[[], nn.Module],
                  train: Callable[[int, int], nn.Module],
                  export: Callable[[nn.Module, Path], None], out: Path, name: str) -> nn.Module:
    """The command line of a ``tools/train_*.py`` script: ``--steps``, ``--seed``, ``--eval-only``.
    Trains (then writes ``out/<name>.pt`` and ``out/<name>.onnx``) or, with ``--eval-only``,
    reloads the weights; returns the model in eval mode for the script's held-out figures."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=default_steps, help="batches of 32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-only", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared
    out.mkdir(exist_ok=True)
    if args.eval_only:
        model = new_model()
        model.load_state_dict(torch.load(out / f"{name}.pt"))
        return model.eval()
    model = train(args.steps, args.seed)
    torch.save(model.state_dict(), out / f"{name}.pt")
    export(model, out / f"{name}.onnx")
    return model
