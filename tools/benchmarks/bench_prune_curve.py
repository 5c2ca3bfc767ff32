"""What each latency cut costs a pretrained EfficientNet-Lite0 (issue 34): agreement vs cut.

Measures the reconstruction curves once (``--end-to-end``: each group's in the model output's
error, ``recon_plan.to_output_error``), then for each ``--cuts`` share of the dense rpi4
estimate: plans the widths, prunes by reconstruction + least-squares refit, and prints the
pruned float model's top-1 agreement with the dense float model on the suite's 156 held-out
crops (Wilson 95%), optionally its int8 artifact's (``--int8``: ``edgekit build --target
rpi4`` on the 64 calibration photos, run through ``edgekit.load``), with seconds and load.

    python tools/benchmarks/bench_prune_curve.py --cuts 0.05,0.10 [--end-to-end] [--int8]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_levers import int8_agreement  # noqa: E402 - the same build and runtime
from bench_prune_select import HELDOUT, efficientnet, suite_sets, wilson  # noqa: E402 - the same sets


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def cell(share: float, n: int) -> str:
    k = round(share * n)
    low, high = wilson(k, n)
    return f"{k}/{n} = {share:.1%} [{low:.1%}, {high:.1%}]"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuts", default="0.05,0.10,0.21")
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--int8", action="store_true")
    parser.add_argument("--save-prefix", type=Path, default=None,
                        help="torch.save each pruned model to PREFIX<cut>.pt")
    parser.add_argument("--heldout", choices=HELDOUT, default="crops",
                        help="held-out set: the suite's crops or the object photos")
    args = parser.parse_args()
    import torch
    from edgekit.converters.pruning import prune_structured
    from edgekit.converters.pruning.for_build import agreement
    from edgekit.converters.pruning.recon_plan import (
        measure_reconstruction,
        plan_by_reconstruction,
    )
    from edgekit.converters.pruning.widths import op_seconds_by_module
    from edgekit.targets import load_profile

    net = efficientnet()
    calib, val = suite_sets(args.heldout)
    example = (torch.from_numpy(calib[:1]),)
    profile = load_profile("rpi4")
    start = time.perf_counter()
    measured = measure_reconstruction(net, example, [calib], profile, args.end_to_end)
    groups, dense_s = measured
    print(f"load {load()}; dense rpi4 estimate {dense_s * 1e3:.2f} ms; {len(groups)} groups "
          f"measured ({'end to end' if args.end_to_end else 'local'}) in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    for group in sorted(groups, key=lambda g: g.order):
        probe = getattr(group, "end_to_end", None)
        print(f"  {group.name}: {group.channels} ch, {group.latency_s * 1e3:.3f} ms"
              + (f", output error {probe[1]:.4f} alone at {probe[0]}" if probe else ""),
              flush=True)
    print("| cut asked | estimate | pruned float (refit) | int8 artifact | seconds | load |")
    print("| --- | --- | --- | --- | --- | --- |")
    reference = None
    for cut in (float(c) for c in args.cuts.split(",")):
        began = time.perf_counter()
        plan = plan_by_reconstruction(net, example, [calib], profile, dense_s * (1 - cut),
                                      measured)
        thinned = {g.name: f"{g.channels}->{plan.widths[g.name]}" for g in groups
                   if plan.widths[g.name] < g.channels}
        print(f"cut {cut:g}: thinned {thinned}", flush=True)
        with contextlib.redirect_stdout(None):
            pruned, _ = prune_structured(net, example, 0.0, plan.widths, calib=[calib])
        estimate = op_seconds_by_module(pruned, example, profile)[1]
        share, reference = agreement(pruned, net, [val], reference)
        if args.save_prefix:
            torch.save((pruned, [], 0.0), f"{args.save_prefix}{cut:g}.pt")
        int8 = (cell(int8_agreement(pruned, example, calib, val, reference), len(val))
                if args.int8 else "")
        print(f"| -{cut:.0%} | {estimate * 1e3:.2f} ms ({estimate / dense_s - 1:+.1%}) "
              f"| {cell(share, len(val))} | {int8} | {time.perf_counter() - began:.0f} "
              f"| {load()} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
