"""Pruning a pretrained EfficientNet-Lite0 to -20% rpi4 latency: which lever does what.

One run = one recipe at one latency, every figure the top-1 agreement with the dense float
model on the suite's 156 held-out crops (val.npz, photos disjoint from calibration) with a
Wilson 95% interval, and the seconds the recipe took:

* widths: ``uniform`` (every expansion group by ``--ratio``, the rest whole, as
  ``tools/benchmarks/bench_prune_select.py --expansion-only``) or ``reconstruction``
  (``converters/pruning/recon_plan.py``: reconstruction's own error per latency saved, at
  the uniform ratio's estimated latency, so both are compared at equal latency);
* selection: magnitude (+ BatchNorm re-estimated) and reconstruction + least-squares refit;
* distillation after the refit (``--steps``): ``--distill`` augmented crops of the 14 photos
  the held-out set does not use (the 11 calibration photos + 3 more from scikit-image),
  logits only or with feature targets at every refit 1x1 conv (``--features``);
* ``--int8``: the last model exported to ONNX, built by ``edgekit build --target rpi4``
  on the 64 calibration photos, and run through ``edgekit.load`` on the same crops.

    python tools/benchmarks/bench_prune_levers.py [--widths reconstruction] [--ratio 0.17]
        [--cut 0.2] [--end-to-end] [--steps 300] [--features] [--int8] [--ridge 0.05] [--no-bn-weight]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_select import HELDOUT, suite_sets, wilson  # noqa: E402 - the same sets and interval

EXTRA_PHOTOS = ("chessboard_RGB.png", "chessboard_GRAY.png", "microaneurysms.png")


def distill_crops(count: int) -> np.ndarray:
    from tools.realzoo import photos
    from tools.realzoo.datasets import imagenet_nchw

    names = photos.CALIB_PHOTOS + EXTRA_PHOTOS
    assert not set(names) & set(photos.VAL_PHOTOS)
    return imagenet_nchw(photos.crops(names, count, 224, seed=34))


def int8_row(share: float, n: int, load: str = "") -> str:
    """The table row of a pruned model's int8 artifact: k/n, share and its Wilson interval."""
    k = round(share * n)
    low, high = wilson(k, n)
    return (f"| int8 artifact (edgekit build --target rpi4) of the last row | {k}/{n} = "
            f"{share:.1%} | [{low:.1%}, {high:.1%}] | | {load}")


def int8_agreement(model: object, example: tuple, calib: np.ndarray, val: np.ndarray,
                   want: np.ndarray) -> float:
    import warnings

    import torch

    import edgekit

    with tempfile.TemporaryDirectory() as tmp:
        onnx_path, art = Path(tmp) / "pruned.onnx", Path(tmp) / "pruned.edgekit"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, example, str(onnx_path), dynamo=False, opset_version=17,
                              input_names=["image"])
        np.savez(Path(tmp) / "calib.npz", image=calib)
        subprocess.run([str(Path(sys.executable).parent / "edgekit"), "build", "--target",
                        "rpi4", str(onnx_path), "--calib", str(Path(tmp) / "calib.npz"),
                        "-o", str(art), "-q", "--accept-accuracy-drop"], check=True)
        runner = edgekit.load(art, threads=1)
        try:
            got = np.concatenate([np.asarray(runner.predict({"image": val[i:i + 1]}))
                                  .reshape(1, -1) for i in range(len(val))])
        finally:
            runner.close()
    return float(np.mean(got.argmax(1) == want.argmax(1)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--widths", choices=("uniform", "reconstruction"), default="uniform")
    parser.add_argument("--ratio", type=float, default=0.17,
                        help="uniform expansion ratio; its estimate is the latency goal")
    parser.add_argument("--cut", type=float, default=None,
                        help="latency goal as the share of the dense estimate removed "
                             "(replaces --ratio's estimate)")
    parser.add_argument("--end-to-end", action="store_true",
                        help="plan on each group's measured model-output error "
                             "(recon_plan.to_output_error), not its consumer's alone")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--distill-seconds", type=float, default=None)
    parser.add_argument("--distill", type=int, default=512, help="distillation crops")
    parser.add_argument("--features", action="store_true")
    parser.add_argument("--int8", action="store_true")
    parser.add_argument("--dense-int8", action="store_true",
                        help="only the dense model's int8 artifact: the ceiling")
    parser.add_argument("--ridge", type=float, default=None)
    parser.add_argument("--no-bn-weight", action="store_true")
    parser.add_argument("--skip-magnitude", action="store_true")
    parser.add_argument("--save", type=Path, default=None,
                        help="torch.save the refit model here (a later run's --load)")
    parser.add_argument("--load", type=Path, default=None,
                        help="a --save file: skip selection and refit, distil it")
    parser.add_argument("--heldout", choices=HELDOUT, default="crops",
                        help="held-out set: the suite's crops or the object photos")
    args = parser.parse_args()
    import torch
    from bench_prune_select import efficientnet, expansion_groups
    from edgekit.converters.pruning import (
        distill,
        prune_structured,
        reconstruct,
        reestimate_batchnorm,
    )
    from edgekit.converters.pruning.for_build import agreement
    from edgekit.converters.pruning.recon_plan import plan_by_reconstruction
    from edgekit.converters.pruning.structured import kept_channels
    from edgekit.converters.pruning.widths import op_seconds_by_module
    from edgekit.targets import load_profile

    if args.ridge is not None:
        reconstruct.RIDGE = args.ridge
    reconstruct.BN_WEIGHTED = not args.no_bn_weight
    net = efficientnet()
    calib, val = suite_sets(args.heldout)
    example = (torch.from_numpy(calib[:1]),)
    profile = load_profile("rpi4")
    dense_s = op_seconds_by_module(net, example, profile)[1]
    if args.dense_int8:
        with torch.no_grad():
            want = torch.cat([net(torch.from_numpy(val[i:i + 16])) for i in
                              range(0, len(val), 16)]).numpy()
        share = int8_agreement(net, example, calib, val, want)
        k, n = round(share * len(val)), len(val)
        low, high = wilson(k, n)
        print(f"| dense int8 artifact (edgekit build --target rpi4) | {k}/{n} = {share:.1%} "
              f"| [{low:.1%}, {high:.1%}] |", flush=True)
        return 0
    start = time.perf_counter()
    uniform = {n: kept_channels(c, args.ratio) for n, c in expansion_groups(net, example).items()}
    goal = op_seconds_by_module(prune_structured(net, example, 0.0, uniform)[0], example,
                                profile)[1]
    if args.cut is not None:
        goal = dense_s * (1 - args.cut)
    widths = uniform
    if args.load:  # the saved model's widths: estimated below, not planned again
        widths = {n: int(m.out_channels) for n, m in torch.load(
            args.load, weights_only=False)[0].named_modules() if n in uniform}
    elif args.widths == "reconstruction":
        plan = plan_by_reconstruction(net, example, [calib], profile, goal,
                                      end_to_end=args.end_to_end)
        widths = plan.widths
        for group in sorted(plan.groups, key=lambda g: g.order):
            probe = getattr(group, "end_to_end", None)
            print(f"  {group.name}: {group.channels}->{widths[group.name]}, "
                  f"{group.latency_s * 1e3:.3f} ms"
                  + (f", output error {probe[1]:.4f} at {probe[0]} alone" if probe else ""),
                  flush=True)
    plan_s = time.perf_counter() - start
    pruned_s = op_seconds_by_module(prune_structured(net, example, 0.0, widths)[0], example,
                                    profile)[1]
    thinned = {n: f"{c}->{widths[n]}" for n, c in expansion_groups(net, example).items()
               if widths.get(n, c) < c}
    print(f"dense rpi4 int8 estimate {dense_s * 1e3:.2f} ms; goal ("
          + (f"cut {args.cut:g}" if args.cut is not None else
             f"uniform {args.ratio:g} on the expansion groups")
          + f") {goal * 1e3:.2f} ms; {args.widths} widths {pruned_s * 1e3:.2f} ms "
          f"({pruned_s / dense_s:.1%}), planned in {plan_s:.0f} s; ridge {reconstruct.RIDGE}, "
          f"BN-weighted {reconstruct.BN_WEIGHTED}; calib {len(calib)}, held-out {len(val)}",
          flush=True)
    print("thinned:", thinned, flush=True)
    reference = None

    def record(name: str, model: object, seconds: float) -> None:
        nonlocal reference
        share, reference = agreement(model, net, [val], reference)
        k, n = round(share * len(val)), len(val)
        low, high = wilson(k, n)
        print(f"| {name} | {k}/{n} = {share:.1%} | [{low:.1%}, {high:.1%}] | {seconds:.0f} |",
              flush=True)

    print("| method | top-1 agreement with dense float | 95% interval | seconds |")
    print("| --- | --- | --- | --- |")
    if not args.skip_magnitude:
        start = time.perf_counter()
        mag, _ = prune_structured(net, example, 0.0, widths)
        reestimate_batchnorm(mag, [calib])
        record("magnitude + BatchNorm re-estimated", mag, time.perf_counter() - start)
    start = time.perf_counter()
    if args.load:
        rec, consumers, took = torch.load(args.load, weights_only=False)
    else:
        rec, report = prune_structured(net, example, 0.0, widths, calib=[calib])
        took = time.perf_counter() - start
        consumers = [f.consumer for f in report.reconstruction.layers]
        print("refit errors by layer:", [round(f.error_refit, 3)
                                         for f in report.reconstruction.layers], flush=True)
        if args.save:
            torch.save((rec, consumers, took), args.save)
    record("reconstruction + least-squares refit", rec, took)
    final = rec
    if args.steps:
        crops = distill_crops(args.distill)
        start = time.perf_counter()
        features = consumers if args.features else None
        result = distill(rec, net, [crops], args.steps, seed=0, progress=False,
                         seconds=args.distill_seconds, features=features)
        print(f"distillation: {result.distill_steps} steps, loss {result.loss_before} -> "
              f"{result.loss_after}, {result.stopped}", flush=True)
        record(f"reconstruction + refit + distillation ({result.distill_steps} steps, "
               f"{len(crops)} crops{', feature targets' if features else ''})", rec,
               took + time.perf_counter() - start)
    if args.int8:
        print(int8_row(int8_agreement(final, example, calib, val, reference), len(val)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
