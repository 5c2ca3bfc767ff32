"""Where a pruned EfficientNet-Lite0 loses its top-1 decisions, unit by unit (issue 34).

Takes the dense model and pruned models saved by ``bench_prune_levers.py --save`` (after
reconstruction + refit) and ``bench_prune_blockwise.py --save`` (after distillation), and
puts ONE pruned unit into the dense model at a time (a unit: an inverted-residual block; the
stem travels with block 0 and the head conv with block 15, since their widths change
together). For each unit it prints the estimated rpi4 milliseconds that unit saves, the top-1
agreement with the dense float model on the suite's 156 held-out crops (Wilson 95%), the
mean KL divergence of the logits (finer than top-1 on low-margin crops), and the points lost
per millisecond saved; then the same cumulatively, units added in forward order, so a reader
sees how single losses compound.

    python tools/benchmarks/bench_prune_where.py rzwork/planned.pt [rzwork/blockwise.pt]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_select import efficientnet, suite_sets, wilson  # noqa: E402 - same sets

UNITS = [("stem+block0", ("_conv_stem", "_bn0", "_blocks.0"))] + [
    (f"block{i}", (f"_blocks.{i}",)) for i in range(1, 15)] + [
    ("block15+head", ("_blocks.15", "_conv_head", "_bn1"))]


def logits(net: object, val: np.ndarray) -> np.ndarray:
    import torch

    net.eval()
    with torch.no_grad():
        return torch.cat([net(torch.from_numpy(val[i:i + 32])) for i in
                          range(0, len(val), 32)]).numpy()


def kl(want: np.ndarray, got: np.ndarray) -> float:
    def log_softmax(z: np.ndarray) -> np.ndarray:
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))

    p, q = log_softmax(want), log_softmax(got)
    return float(np.mean(np.sum(np.exp(p) * (p - q), 1)))


def swapped(dense: object, pruned: object, prefixes: tuple[str, ...]) -> object:
    """The dense model with the modules named by ``prefixes`` taken from ``pruned``."""
    net = copy.deepcopy(dense)
    for name in prefixes:
        parent, _, leaf = name.rpartition(".")
        holder = net.get_submodule(parent) if parent else net
        source = pruned.get_submodule(name)
        if leaf.isdigit():
            holder[int(leaf)] = source
        else:
            setattr(holder, leaf, source)
    return net


def unit_ms(by_module: dict[str, float], prefixes: tuple[str, ...]) -> float:
    return 1e3 * sum(s for m, s in by_module.items()
                     if any(m == p or m.startswith(p + ".") for p in prefixes))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", type=Path, nargs="+", help="--save files (refit, distilled)")
    args = parser.parse_args()
    import torch
    from edgekit.converters.pruning.widths import op_seconds_by_module
    from edgekit.targets import load_profile

    torch.set_num_threads(1)
    dense = efficientnet()
    calib, val = suite_sets()
    example = (torch.from_numpy(calib[:1]),)
    profile = load_profile("rpi4")
    dense_by, dense_total = op_seconds_by_module(dense, example, profile)
    want = logits(dense, val)
    n = len(val)
    print(f"load average {os.getloadavg()[0]:.1f}; dense rpi4 estimate {dense_total * 1e3:.2f} ms; "
          f"held-out {n} crops", flush=True)
    for path in args.models:
        pruned = torch.load(path, weights_only=False)[0]
        pruned_by, pruned_total = op_seconds_by_module(pruned, example, profile)
        print(f"\n### {path.name}: {pruned_total * 1e3:.2f} ms estimated "
              f"({pruned_total / dense_total - 1:+.1%})\n", flush=True)
        print("| unit | ms saved | alone: agreement [95%] | alone: KL | points lost per ms "
              "| cumulative: agreement [95%] | cumulative: KL |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        prefixes_so_far: tuple[str, ...] = ()
        for unit, prefixes in UNITS:
            saved = unit_ms(dense_by, prefixes) - unit_ms(pruned_by, prefixes)
            alone = logits(swapped(dense, pruned, prefixes), val)
            prefixes_so_far += prefixes
            together = logits(swapped(dense, pruned, prefixes_so_far), val)
            cells = []
            for got in (alone, together):
                k = int(np.sum(got.argmax(1) == want.argmax(1)))
                low, high = wilson(k, n)
                cells.append((k, f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]", kl(want, got)))
            lost = 100 * (n - cells[0][0]) / n
            per_ms = f"{lost / saved:.1f}" if saved > 0.005 else "-"
            print(f"| {unit} | {saved:.3f} | {cells[0][1]} | {cells[0][2]:.3f} | {per_ms} "
                  f"| {cells[1][1]} | {cells[1][2]:.3f} |", flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
