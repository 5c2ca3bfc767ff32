"""Block-wise feature distillation after reconstruction + refit (issue 34), on EfficientNet-Lite0.

Starts from a pruned, refit model saved by ``bench_prune_levers.py --save`` (planned widths,
17.39 ms of the dense 22.02 ms rpi4 estimate), trains each refit unit alone towards the dense
unit's output on ``--distill`` unlabelled crops of the 14 photos the held-out set does not use
(``converters/pruning/blockwise.py``), optionally at a lower crop resolution (``--size``:
convolutions do not care, and a 160-pixel crop costs half a 224-pixel one), then optionally
distils the logits end to end (``--steps``, ``--distill-seconds``). Prints top-1 agreement
with the dense float model on the suite's 156 held-out crops (224 px), Wilson 95% interval,
the steps and seconds, and the load average at start and end.

    python tools/benchmarks/bench_prune_blockwise.py --load rzwork/planned.pt [--epochs 4]
        [--size 160] [--distill 512] [--seconds 900] [--steps 0] [--int8] [--save F]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_levers import EXTRA_PHOTOS, int8_agreement, int8_row  # noqa: E402 - same sets and build
from bench_prune_select import efficientnet, suite_sets, wilson  # noqa: E402


def crops(count: int, size: int) -> np.ndarray:
    from tools.realzoo import photos
    from tools.realzoo.datasets import imagenet_nchw

    names = photos.CALIB_PHOTOS + EXTRA_PHOTOS
    assert not set(names) & set(photos.VAL_PHOTOS)
    return imagenet_nchw(photos.crops(names, count, size, seed=34))


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load", type=Path, required=True, help="bench_prune_levers --save file")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--size", type=int, default=224, help="distillation crop side")
    parser.add_argument("--distill", type=int, default=512, help="distillation crops")
    parser.add_argument("--seconds", type=float, default=None, help="block-wise time budget")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--steps", type=int, default=0, help="end-to-end logit steps after")
    parser.add_argument("--distill-seconds", type=float, default=None)
    parser.add_argument("--int8", action="store_true")
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    import torch
    from edgekit.converters.pruning import distill
    from edgekit.converters.pruning.blockwise import distill_blockwise, units_of
    from edgekit.converters.pruning.for_build import agreement

    net = efficientnet()
    calib, val = suite_sets()
    model, consumers, _ = torch.load(args.load, weights_only=False)
    reference = None

    def record(name: str, seconds: float) -> None:
        nonlocal reference
        share, reference = agreement(model, net, [val], reference)
        k, n = round(share * len(val)), len(val)
        low, high = wilson(k, n)
        print(f"| {name} | {k}/{n} = {share:.1%} | [{low:.1%}, {high:.1%}] | {seconds:.0f} "
              f"| {load()} |", flush=True)

    print(f"load average at start {load()}; {args.distill} crops at {args.size} px, "
          f"held-out {len(val)} at 224 px", flush=True)
    print("| model | top-1 agreement with dense float | 95% interval | seconds | load 1/5/15 |")
    print("| --- | --- | --- | --- | --- |")
    record("reconstruction + refit (loaded)", 0)
    data = crops(args.distill, args.size)
    units = units_of(consumers)
    start = time.perf_counter()
    report = distill_blockwise(model, net, data, units, epochs=args.epochs,
                               seconds=args.seconds, lr=args.lr)
    steps = sum(u.steps for u in report.units)
    print("units (held-out relative loss before -> after, steps): " + ", ".join(
        f"{u.unit} {u.loss_before:.3f}->{u.loss_after:.3f} ({u.steps}{'' if u.kept else ', reverted'})"
        for u in report.units), flush=True)
    took = time.perf_counter() - start
    record(f"+ block-wise distillation ({len(units)} units, {steps} steps of batch 32, "
           f"{args.epochs} epochs max, {args.size} px, lr {args.lr:g})", took)
    if args.steps:
        began = time.perf_counter()
        result = distill(model, net, [crops(args.distill, 224)], args.steps, seed=0,
                         seconds=args.distill_seconds)
        took += time.perf_counter() - began
        print(f"logits: {result.distill_steps} steps, loss {result.loss_before} -> "
              f"{result.loss_after}, {result.stopped}", flush=True)
        record(f"+ logit distillation ({result.distill_steps} steps)", took)
    if args.save:
        torch.save((model, consumers, took), args.save)
    if args.int8:
        example = (torch.from_numpy(calib[:1]),)
        share = int8_agreement(model, example, calib, val, reference)
        print(int8_row(share, len(val), f"{load()} |"), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
