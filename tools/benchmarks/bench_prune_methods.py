"""The README's pruning models, side by side at equal latency: magnitude vs reconstruction vs
reconstruction + distillation (issue 34).

For each model trained on real data (the digits CNN, digit-recognizer-py's MNIST CNN, MTCNN's
ONet with facenet-pytorch's weights, the MobileNetV2-style net of ``train_ptq_nets.py``), one
width plan removing ``--cut`` of the dense rpi4 int8 estimate (reconstruction's plan where the
groups it handles reach the goal, else magnitude masks' sensitivity plan, as the build does),
then at those same widths (so the same estimated latency):

* magnitude: L2-magnitude channels, BatchNorm re-estimated on the calibration inputs;
* magnitude + distillation (``--steps`` fixed, so a loaded machine trains as much);
* reconstruction: channels by how well the next 1x1 conv is rebuilt, that conv refit by least
  squares (groups without a 1x1 reader fall back to magnitude);
* reconstruction + distillation (the same steps).

Prints held-out top-1 accuracy and agreement with the dense float model, with N and a Wilson
95% interval, and the seconds each method took (wall time: read them within one run).

    python tools/benchmarks/bench_prune_methods.py [--models digits,mnist,onet,mobilenet]
        [--cut 0.25] [--steps 300]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools"), str(Path(__file__).resolve().parent)]

from bench_prune_select import wilson  # noqa: E402 - the same interval


def cell(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]"


def scores(net: Any, x: np.ndarray) -> np.ndarray:
    import torch

    net.eval()
    with torch.no_grad():
        out = [net(torch.from_numpy(x[i:i + 256])) for i in range(0, len(x), 256)]
    return torch.cat([o[0] if isinstance(o, (tuple, list)) else o for o in out]).numpy()


def models(wanted: list[str]) -> list[tuple[str, Callable[[], Any], tuple, tuple]]:
    """(name, factory, example args, (x_calib, x_held, y_held))."""
    import torch
    from bench_prune_budget import mnist_cnn
    from sklearn.datasets import load_digits

    found = []
    if "digits" in wanted or "mnist" in wanted:
        x, y = load_digits(return_X_y=True)
        order = np.random.default_rng(0).permutation(len(x))
        train, held = order[:1200], order[1200:]
    if "digits" in wanted:
        from tools.benchmarks.bench_prune import digits_module

        d = (x.reshape(-1, 1, 8, 8) / 16.0).astype(np.float32)
        found.append(("digits CNN", digits_module, (torch.zeros(1, 1, 8, 8),),
                      (d[train], d[held], y[held])))
    if "mnist" in wanted:
        from tests.converters.torch_nets import mnist_like

        m = mnist_like(x)
        found.append(("MNIST CNN (digit-recognizer-py weights)", mnist_cnn,
                      (torch.zeros(1, 1, 28, 28),), (m[train], m[held], y[held])))
    if "onet" in wanted:
        from tools.fixtures.face_crops import face_crops, mtcnn_onet

        xc, _, xh, yh = face_crops()
        found.append(("MTCNN ONet (facenet-pytorch weights)", mtcnn_onet,
                      (torch.zeros(1, 3, 48, 48),), (xc, xh, yh)))
    if "mobilenet" in wanted:
        from tools.fixtures import train_ptq_nets

        xc, _, xh, yh = train_ptq_nets.digits_32()
        found.append(("MobileNetV2-style (train_ptq_nets, digits 32x32)",
                      lambda: train_ptq_nets.trained("mobilenet"), (torch.zeros(1, 1, 32, 32),),
                      (xc, xh, yh)))
    return found


def plan(net: Any, example: tuple, calib: np.ndarray, cut: float) -> tuple[dict[str, int], str]:
    from edgekit.converters.pruning.recon_plan import (
        measure_reconstruction,
        plan_by_reconstruction,
    )
    from edgekit.converters.pruning.widths import measure_groups, op_seconds_by_module, plan_widths
    from edgekit.targets import load_profile

    profile = load_profile("rpi4")
    dense_s = op_seconds_by_module(net, example, profile)[1]
    goal = dense_s * (1 - cut)
    measured = measure_reconstruction(net, example, [calib], profile)
    if measured[0]:
        recon = plan_by_reconstruction(net, example, [calib], profile, goal, measured)
        if recon.reachable and recon.predicted_latency_s <= goal * 1.01:
            return recon.widths, "reconstruction"
    groups, dense_s = measure_groups(net, example, [calib], profile)
    return plan_widths(groups, dense_s, goal).widths, "magnitude-mask sensitivity"


def run(name: str, make: Callable[[], Any], example: tuple, data: tuple, cut: float,
        steps: int) -> None:
    from edgekit.converters.pruning import distill, prune_structured, reestimate_batchnorm
    from edgekit.converters.pruning.widths import op_seconds_by_module
    from edgekit.targets import load_profile

    calib, held, labels = data
    dense = make().eval()
    profile = load_profile("rpi4")
    dense_s = op_seconds_by_module(dense, example, profile)[1]
    started = time.perf_counter()
    widths, how = plan(dense, example, calib, cut)
    plan_s = time.perf_counter() - started
    want = scores(dense, held).argmax(1)
    n = len(held)
    print(f"\n== {name}: dense rpi4 int8 estimate {dense_s * 1e3:.3f} ms, cut {cut:.0%}; widths "
          f"by {how} in {plan_s:.0f} s; {len(calib)} calibration, {n} held out; dense top-1 "
          f"{cell(int((want == labels).sum()), n)}; load {os.getloadavg()[0]:.1f}", flush=True)
    print("| method | est. latency | top-1 accuracy | agreement with dense float | seconds |")
    print("| --- | --- | --- | --- | --- |")

    def row(method: str, model: Any, seconds: float) -> None:
        got = scores(model, held).argmax(1)
        est = op_seconds_by_module(model, example, profile)[1]
        print(f"| {method} | {est * 1e3:.3f} ms ({est / dense_s:.0%}) | "
              f"{cell(int((got == labels).sum()), n)} | {cell(int((got == want).sum()), n)} | "
              f"{seconds:.1f} |", flush=True)

    for select in ("magnitude", "reconstruction"):
        began = time.perf_counter()
        with contextlib.redirect_stdout(None):
            if select == "magnitude":
                pruned, _ = prune_structured(dense, example, 0.0, widths)
                reestimate_batchnorm(pruned, [calib])
                label = "magnitude + BatchNorm re-estimated"
            else:
                pruned, report = prune_structured(dense, example, 0.0, widths, calib=[calib])
                refit = len(report.reconstruction.layers) if report.reconstruction else 0
                label = (f"reconstruction + least-squares refit ({refit} 1x1 consumer(s) "
                         "refit, other groups by magnitude)")
        took = time.perf_counter() - began
        row(label, pruned, took)
        student = copy.deepcopy(pruned)
        began = time.perf_counter()
        result = distill(student, dense, [calib], steps, seed=0, progress=False)
        row(f"{select} + distillation ({result.distill_steps} steps, held-out loss "
            f"{result.loss_before:.4f} -> {result.loss_after:.4f})", student,
            took + time.perf_counter() - began)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="digits,mnist,onet,mobilenet")
    parser.add_argument("--cut", type=float, default=0.25,
                        help="share of the dense rpi4 int8 estimate removed")
    parser.add_argument("--steps", type=int, default=300, help="distillation steps")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs", flush=True)
    for name, make, example, data in models(args.models.split(",")):
        run(name, make, example, data, args.cut, args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
