"""Is the pruned EfficientNet-Lite0 blocked by data or by method? Distil it on crops of photos
from the held-out distribution (an oracle) and compare with distilling on the suite's
calibration photos, same steps, same crops per run (issue 34, pruning.md round 7).

The 14 object photos (``photos.OBJECT_PHOTOS``, 12 judged crops each in
``vision_sets.imagenet_objects``) are split 7/7 by alternate index (each half has cheetahs,
a street scene, a landscape). ``--train`` picks what the student sees:

* ``half``: crops of one half's photos, judged on the other half's 84 judged crops; then the
  halves swap, so every judged crop is scored by a student that never saw its photo (oracle:
  the user's own photos of the deployment's scenes);
* ``calib``: crops of the suite's 11 calibration photos (``photos.CALIB_PHOTOS``), judged on
  all 168 crops (what a user without in-domain photos has);
* ``scenes``: other crops (another seed) of all 14 photos, judged on the 168 crops (the
  deployment's own scenes: a fixed camera sees the same places, other framings);
* ``eval``: the 168 judged crops themselves (the upper bound of the pruned architecture:
  no generalization asked).

Training crops are random squares of 40-100% of the short side, half mirrored (the
``photos.crops`` recipe), ImageNet mean/std, resized to 224; the dense model's logits on them
are cached once. Loss: KL divergence of the softmax at temperature ``--temperature`` (Hinton
et al. 2015); the model stays in eval mode (BatchNorm statistics frozen: the refit consumers
were fit on them; no drop-connect or dropout), Adam with cosine decay. The stem and the
first ``--frozen`` blocks (kept whole or barely thinned by the end-to-end plan) are frozen and
their output cached per crop, so a step runs the tail only (2 shared cores: a full step took
about 8 s). Prints the loss curve and the judged agreement (Wilson 95%) every ``--evals``-th
of the steps.

    python tools/benchmarks/bench_prune_oracle.py rzwork/e2e21.pt --train half --steps 300
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_select import efficientnet, wilson  # noqa: E402 - same model, same interval
from bench_prune_where import logits  # noqa: E402

from tools.realzoo import photos  # noqa: E402
from tools.realzoo.datasets import imagenet_nchw  # noqa: E402
from tools.realzoo.vision_sets import imagenet_objects  # noqa: E402

HALVES = (tuple(range(0, 14, 2)), tuple(range(1, 14, 2)))  # photo indices of each half


def crops_of(images: list[np.ndarray], count: int, seed: int, size: int = 224) -> np.ndarray:
    """``count`` random squares (40-100% of the short side, half mirrored), cycling over
    ``images``: ImageNet-normalized NCHW float32."""
    return imagenet_nchw(photos.square_crops(images, count, size, seed))


def cell(same: np.ndarray) -> str:
    k, n = int(same.sum()), len(same)
    low, high = wilson(k, n)
    return f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]"


def prefix(net: object, x: np.ndarray, frozen: int) -> object:
    """The stem and blocks ``[:frozen]`` of an EfficientNet on ``x``, no gradient: a tensor."""
    import torch

    net.eval()
    parts = []
    with torch.no_grad():
        for i in range(0, len(x), 32):
            h = net._swish(net._bn0(net._conv_stem(torch.from_numpy(x[i:i + 32]))))
            for block in net._blocks[:frozen]:
                h = block(h)
            parts.append(h)
    return torch.cat(parts)


def tail(net: object, h: object, frozen: int) -> object:
    """Blocks ``[frozen:]``, head, pool and classifier (eval mode: no drop-connect, dropout)."""
    for block in net._blocks[frozen:]:
        h = block(h)
    h = net._swish(net._bn1(net._conv_head(h)))
    return net._fc(net._avg_pooling(h).flatten(1))


def distil(student: object, x: np.ndarray, teacher_logits: np.ndarray, steps: int, lr: float,
           batch: int, temperature: float, judge: tuple[np.ndarray, np.ndarray],
           evals: int, seed: int, frozen: int) -> np.ndarray:
    """Train ``student``'s tail in place; prints the curve; returns the judged crops'
    agreement (bool per judged crop) at the end."""
    import torch
    import torch.nn.functional as F

    judge_x, judge_top = judge
    gen = torch.Generator().manual_seed(seed)
    hs, ts = prefix(student, x, frozen), torch.from_numpy(teacher_logits)
    judge_h = prefix(student, judge_x, frozen)
    for module in [student._conv_stem, student._bn0, *student._blocks[:frozen]]:
        module.requires_grad_(False)
    params = [p for p in student.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    every = max(1, steps // evals)
    started, running = time.perf_counter(), []

    def judged() -> np.ndarray:
        with torch.no_grad():
            out = torch.cat([tail(student, judge_h[i:i + 32], frozen)
                             for i in range(0, len(judge_h), 32)])
        return out.numpy().argmax(1) == judge_top

    print(f"  step 0: judged {cell(judged())}", flush=True)
    student.eval()  # BatchNorm keeps the statistics the refit used
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        idx = torch.randint(0, len(hs), (batch,), generator=gen)
        out = tail(student, hs[idx], frozen)
        loss = F.kl_div(F.log_softmax(out / temperature, 1),
                        F.log_softmax(ts[idx] / temperature, 1),
                        log_target=True, reduction="batchmean") * temperature ** 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running.append(float(loss.detach()))
        if (step + 1) % every == 0 or step + 1 == steps:
            same = judged()
            print(f"  step {step + 1}: train KL {np.mean(running):.4f} (mean of last "
                  f"{len(running)}), judged {cell(same)}, {time.perf_counter() - started:.0f} s",
                  flush=True)
            running = []
    return judged()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", type=Path, help="a pruned model saved by bench_prune_levers")
    parser.add_argument("--train", choices=("half", "calib", "scenes", "eval"), required=True)
    parser.add_argument("--photos", type=int, default=7,
                        help="half: train on the first N photos of each half (2, 4, 7)")
    parser.add_argument("--crops", type=int, default=256, help="training crops per run")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--evals", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frozen", type=int, default=5,
                        help="blocks kept frozen after the stem (their output cached)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dense = efficientnet()
    val, source = imagenet_objects()
    want = logits(dense, val).argmax(1)
    names = list(photos.OBJECT_PHOTOS)
    if args.train == "half":
        runs = [(HALVES[a][:args.photos], HALVES[1 - a]) for a in (0, 1)]
    else:
        runs = [((), tuple(range(14)))]
    same_all = np.zeros(len(val), bool)
    judged_all = np.zeros(len(val), bool)
    for train_photos, judge_photos in runs:
        if args.train == "half":
            x = crops_of([photos.object_photo(names[i]) for i in train_photos], args.crops, 7)
            what = f"{args.crops} crops of photos {[names[i] for i in train_photos]}"
        elif args.train == "scenes":
            x = crops_of([photos.object_photo(n) for n in names], args.crops, 7)
            what = f"{args.crops} other crops of the {len(names)} judged photos"
        elif args.train == "calib":
            x = crops_of([photos.photo(n) for n in photos.CALIB_PHOTOS], args.crops, 7)
            what = f"{args.crops} crops of the {len(photos.CALIB_PHOTOS)} calibration photos"
        else:
            x, what = val, f"the {len(val)} judged crops themselves (upper bound)"
        mask = np.isin(source, judge_photos)
        print(f"{args.model.name}: distil on {what}; judge {int(mask.sum())} crops of "
              f"{len(judge_photos)} photos; {args.steps} steps of {args.batch}, lr {args.lr:g}, "
              f"T {args.temperature:g}, stem + {args.frozen} blocks frozen", flush=True)
        student = torch.load(args.model, weights_only=False)[0]
        teacher = logits(dense, x)
        started = time.perf_counter()
        same = distil(student, x, teacher, args.steps, args.lr, args.batch, args.temperature,
                      (val[mask], want[mask]), args.evals, seed=0,
                      frozen=args.frozen)
        same_all[mask], judged_all[mask] = same, True
        print(f"  done in {time.perf_counter() - started:.0f} s", flush=True)
    centre = np.r_[True, np.diff(source) != 0] & judged_all
    print(f"RESULT {args.model.name} train={args.train} photos={args.photos} steps={args.steps}: "
          f"judged {cell(same_all[judged_all])}; centre crops {cell(same_all[centre])}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
