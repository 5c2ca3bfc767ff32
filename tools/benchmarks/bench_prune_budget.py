"""Pruning to a latency budget that keeps accuracy: uniform vs sensitivity-aware widths.

For each model trained on real data (the digits CNN, digit-recognizer-py's MNIST CNN, MTCNN's
ONet with facenet-pytorch's weights on LFW faces vs photo windows (``face_crops.py``), the
MobileNet-style net of ``train_ptq_nets.py``), the budget search (``build(budgets=...)``)
runs with a latency budget 25% below the dense model's int8 estimate on rpi4 and a 1-point
accuracy budget, once with every layer pruned by the same ratio (``prune_widths="uniform"``)
and once with per-group widths from measured sensitivity and estimated latency share, both
distilled on real unlabelled inputs (``distill_data``) disjoint from the held-out labelled
samples the accuracy is measured on. Printed side by side, with the distillation's held-out
loss curve. A last run asks a pretrained model for an impossible budget and times the
exit 3 through the CLI.

    python tools/benchmarks/bench_prune_budget.py                 # all four, then the impossible budget
    python tools/benchmarks/bench_prune_budget.py --models onet,mobilenet --distill-time 60
    python tools/benchmarks/bench_prune_budget.py --models mobilenet --distill-steps 600  # reproducible

``--distill-steps`` fixes the step count (the build's ``finetune_steps``; ``--distill-time``
then only caps it), so that a loaded machine trains as much as an idle one, only slower.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_TIME = 30.0
REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``


def digits_split(folder: Path, convert: Any = None) -> tuple[Path, Path, Path]:
    """scikit-learn digits: 1,200 for calibration + distillation, 597 held out with labels."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x = (x.reshape(-1, 1, 8, 8) / 16.0).astype(np.float32) if convert is None else convert(x)
    train, held = order[:1200], order[1200:]
    paths = folder / "calib.npz", folder / "distill.npz", folder / "val.npz"
    np.savez(paths[0], x=x[train], y=y[train].astype(np.int64))
    np.savez(paths[1], x=x[train])  # unlabelled
    np.savez(paths[2], x=x[held], y=y[held].astype(np.int64))
    return paths


def mnist_cnn() -> Any:
    import importlib.util

    import torch

    from tests.converters.torch_nets import mnist_cnn_paths

    model_py, weights = mnist_cnn_paths()
    spec = importlib.util.spec_from_file_location("mnist_model", model_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.CNN()
    net.load_state_dict(torch.load(weights, map_location="cpu"))
    return net.eval()


def saved_split(folder: Path, x: np.ndarray, y: np.ndarray, x_held: np.ndarray,
               y_held: np.ndarray) -> tuple[Path, Path, Path]:
    """Calibration (with labels), the same inputs unlabelled for distillation, held-out set."""
    paths = folder / "calib.npz", folder / "distill.npz", folder / "val.npz"
    np.savez(paths[0], x=x, y=y)
    np.savez(paths[1], x=x)
    np.savez(paths[2], x=x_held, y=y_held)
    return paths


def dense_estimate_ms(module: Any, example: Any, folder: Path) -> float:
    import torch
    from edgekit.converters.estimate import estimate
    from edgekit.targets import load_profile

    path = folder / "dense.onnx"
    torch.onnx.export(module, (example,), str(path), dynamo=False, opset_version=17)
    profile = load_profile("rpi4")
    return estimate(str(path), profile).variants["int8"].latency_s[profile.threads] * 1e3


def run_budget(name: str, make: Any, example: Any, paths: tuple[Path, Path, Path],
               folder: Path, distill_time: float | None, distill_steps: int | None = None) -> None:
    from edgekit.converters import build

    from edgekit.errors import BudgetError

    dense_ms = dense_estimate_ms(make(), example, folder)
    budget = round(dense_ms * 0.75, 4)
    print(f"\n== {name}: rpi4 int8 estimate {dense_ms:.3f} ms -> budget {budget:.3f} ms (-25%), "
          "accuracy budget 1 pt on held-out real data")
    print(f"{'widths':>12} {'exit':>5} {'ratio':>6} {'latency ms':>11} {'top-1 dense':>12} "
          f"{'pruned float':>13} {'int8':>7} {'drop pts':>9} {'seconds':>8}")
    curves = {}
    for mode in ("uniform", "sensitivity"):
        started = time.perf_counter()
        try:
            result = build(make(), example, target="rpi4", calib=str(paths[0]), val=str(paths[2]),
                           output=folder / f"{mode}.edgekit", formats=["onnx"], method="minmax",
                           budgets={"latency_ms": budget, "accuracy_drop": 1.0}, quiet=True,
                           prune_widths=mode, distill_data=str(paths[1]),
                           distill_time=distill_time, finetune_steps=distill_steps)
        except BudgetError as exc:
            print(f"{mode:>12} {3:>5} {'-':>6} {'-':>11} {'-':>12} {'-':>13} {'-':>7} {'-':>9} "
                  f"{time.perf_counter() - started:>8.1f}\n             {str(exc)[:400]}")
            continue
        m = result.manifest
        pruning = m.get("pruning", {})
        val = m["validation"]
        acc = pruning.get("accuracy", {})
        print(f"{mode:>12} {0:>5} {pruning.get('ratio', 0):>6g} "
              f"{m['budgets']['figures']['latency_ms']:>11.3f} {val['accuracy_float']:>12.2%} "
              f"{acc.get('pruned_float', val['accuracy_float']):>13.2%} "
              f"{val['accuracy_int8']:>7.2%} {val['accuracy_drop']:>9.2f} "
              f"{time.perf_counter() - started:>8.1f}")
        curves[mode] = pruning.get("recovery", {}).get("distillation", {})
        plan = pruning.get("width_plan", {}).get("groups", {})
        if plan:
            print("             widths: " + ", ".join(
                f"{k} {v['channels']}->{v['width']}" + (f" [{v['protected']}]" if v['protected']
                                                        else "")
                for k, v in plan.items() if v["width"] != v["channels"] or v["protected"]))
    for mode, dist in curves.items():
        if dist.get("curve"):
            points = " ".join(f"{s}:{v:.4f}" for s, v in dist["curve"][:: max(1, len(
                dist["curve"]) // 8)])
            print(f"  distillation ({mode}, {dist['samples']} samples + {dist['held_out']} "
                  f"held out, {', '.join(dist['augment']) or 'no augmentation'}): held-out loss "
                  f"{dist['loss_before']:.4f} -> {dist['loss_after']:.4f} in {dist['steps']} "
                  f"steps (the best of them kept), stopped: {dist['stopped']}\n    curve {points}")


def impossible(folder: Path) -> None:
    """A pretrained model (the MNIST CNN from digit-recognizer-py) asked for 5% of its latency."""
    from tests.converters.torch_nets import mnist_cnn_paths, write_mnist_digits

    model_py, weights = mnist_cnn_paths()
    calib = write_mnist_digits(folder / "mnist.npz")
    dense_ms = dense_estimate_ms(mnist_cnn(), __import__("torch").zeros(1, 1, 28, 28), folder)
    budget = dense_ms * 0.05
    cmd = [str(Path(sys.executable).parent / "edgekit"), "build", f"{model_py}:CNN", "--weights",
           str(weights), "--input-shape", "1x1x28x28", "--calib", str(calib), "--target", "rpi4",
           "--max-latency-ms", f"{budget:.4f}", "-o", str(folder / "never.edgekit")]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    print(f"\n== impossible budget: pretrained MNIST CNN, --max-latency-ms {budget:.4f} (5% of "
          f"{dense_ms:.3f}): exit {done.returncode} in {seconds:.1f} s")
    print("   " + done.stderr.strip().splitlines()[0][:400] if done.stderr.strip() else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="digits,mnist,onet,mobilenet")
    ap.add_argument("--distill-time", type=float, default=None,
                    help=f"distillation seconds (default {DEFAULT_TIME:g} without --distill-steps)")
    ap.add_argument("--distill-steps", type=int, default=None,
                    help="distillation steps (then --distill-time is only a cap)")
    ap.add_argument("--skip-impossible", action="store_true")
    args = ap.parse_args()
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
          f"{os.cpu_count()} CPUs, torch threads {__import__('torch').get_num_threads()}")
    if args.distill_steps is None and args.distill_time is None:
        args.distill_time = DEFAULT_TIME
    import torch

    from tests.converters.torch_nets import mnist_like
    from tools.benchmarks.bench_prune import digits_module

    wanted = args.models.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "digits" in wanted:
            sub = folder / "digits"
            sub.mkdir()
            run_budget("digits CNN (trained here, examples/raspberrypi)", digits_module,
                       torch.zeros(1, 1, 8, 8), digits_split(sub), sub, args.distill_time,
                       args.distill_steps)
        if "mnist" in wanted:
            sub = folder / "mnist"
            sub.mkdir()
            run_budget("MNIST CNN (digit-recognizer-py's trained weights)", mnist_cnn,
                       torch.zeros(1, 1, 28, 28), digits_split(sub, mnist_like), sub,
                       args.distill_time, args.distill_steps)
        if "onet" in wanted:
            from tools.fixtures.face_crops import face_crops, mtcnn_onet

            sub = folder / "onet"
            sub.mkdir()
            run_budget("MTCNN ONet (facenet-pytorch's trained weights; 48x48 LFW faces vs "
                       "non-face photo windows)", mtcnn_onet, torch.zeros(1, 3, 48, 48),
                       saved_split(sub, *face_crops()), sub, args.distill_time,
                       args.distill_steps)
        if "mobilenet" in wanted:
            from tools.fixtures import train_ptq_nets

            sub = folder / "mobilenet"
            sub.mkdir()
            run_budget("MobileNetV2-style (tools/fixtures/train_ptq_nets.py: trained here on real digits "
                       "at 32x32; 797 held out)", lambda: train_ptq_nets.trained("mobilenet"),
                       torch.zeros(1, 1, 32, 32), saved_split(sub, *train_ptq_nets.digits_32()),
                       sub, args.distill_time, args.distill_steps)
        if not args.skip_impossible:
            impossible(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
