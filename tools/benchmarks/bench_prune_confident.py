"""Top-1 agreement of pruned EfficientNet-Lite0 models split by the dense model's confidence.

Most of the suite's 156 held-out crops are not ImageNet objects (retina, gravel, text): the
dense model's top-1 probability is below 0.5 on 128 of them, and a ranking that close flips
under any perturbation. This prints, for each model saved by ``bench_prune_levers.py --save``
or ``bench_prune_curve.py --save-prefix``, the agreement on the crops where the dense model's
top-1 probability is at least ``--confident`` and on the rest (Wilson 95%).

    python tools/benchmarks/bench_prune_confident.py rzwork/e2e_cut0.05.pt rzwork/e2e21.pt
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_select import HELDOUT, efficientnet, suite_sets, wilson  # noqa: E402 - same sets
from bench_prune_where import logits  # noqa: E402

from tools.realzoo.vision_sets import imagenet_objects  # noqa: E402


def cell(same: np.ndarray) -> str:
    k, n = int(same.sum()), len(same)
    low, high = wilson(k, n)
    return f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", type=Path, nargs="+")
    parser.add_argument("--confident", type=float, default=0.5)
    parser.add_argument("--scale", choices=("meanstd", "inception"), default="meanstd",
                        help="input scaling: the suite's ImageNet mean/std or the model's own "
                             "(x - 127) / 128 (the saved models were refit on mean/std)")
    parser.add_argument("--heldout", choices=HELDOUT, default="crops",
                        help="held-out set: the suite's crops or the object photos")
    args = parser.parse_args()
    import torch

    dense = efficientnet()
    _, val = suite_sets(args.heldout, args.scale)
    want = logits(dense, val)
    prob = np.exp(want - want.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    sure = prob.max(1) >= args.confident
    top = prob.max(1)
    print(f"dense top-1 probability: median {np.median(top):.3f} (quartiles "
          f"{np.percentile(top, 25):.3f}, {np.percentile(top, 75):.3f}); >= {args.confident:g} "
          f"on {int(sure.sum())} of {len(val)} crops")
    # the object photos' first crop of each photo is its ImageNet centre crop: one per photo
    centre = (np.r_[True, np.diff(imagenet_objects()[1]) != 0] if args.heldout == "objects"
              else np.zeros(len(val), bool))
    extra = " centre crops (one per photo) |" if centre.any() else ""
    print(f"| model | dense top-1 >= {args.confident:g} | dense top-1 < {args.confident:g} | all |"
          + extra)
    print("| --- | --- | --- | --- |" + (" --- |" if extra else ""))
    for path in args.models:
        same = logits(torch.load(path, weights_only=False)[0], val).argmax(1) == want.argmax(1)
        print(f"| {path.name} | {cell(same[sure])} | {cell(same[~sure])} | {cell(same)} |"
              + (f" {cell(same[centre])} |" if extra else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
