"""Pruned vs dense latency on this machine, side by side, measured in one run.

For each model, the dense build and builds pruned at each ratio go through the real
pipeline (``edgekit.converters.build(..., prune=r)``: torch-pruning, label-free recovery,
re-export, int8 calibration); then the float and int8 ONNX models run in onnxruntime here
(fastest of repeated batch-1 runs, as ``edgekit.converters.estimate.measure`` times them).
The digits CNN uses its trained weights and real held-out digits, so its accuracy column
is real; the MobileNetV2-like model has random weights: latency only.

A last table times one conv stack at channel counts around 64 (int8): counts that are not
multiples of 8 pay for the padded SIMD lanes without using them.

    python tools/benchmarks/bench_prune.py                 # digits + MobileNetV2-like @ 160x160
    python tools/benchmarks/bench_prune.py --threads 2 --ratios 0.25,0.5
    python tools/benchmarks/bench_prune_budget.py          # a latency budget
                                                # 25% under dense, uniform vs sensitivity widths,
                                                # distillation curves, an impossible budget's exit 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``


def digits_module() -> Any:
    """The example DigitsCNN with the trained weights of examples/raspberrypi/digits_cnn.onnx."""
    import importlib.util

    import onnx
    import torch
    from onnx import numpy_helper

    script = REPO / "examples" / "raspberrypi" / "train_digits.py"
    spec = importlib.util.spec_from_file_location("train_digits", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.DigitsCNN()
    inits = onnx.load(str(script.with_name("digits_cnn.onnx"))).graph.initializer
    model.load_state_dict({i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
                           for i in inits if i.name in model.state_dict()})
    return model.eval()


def time_model(model: bytes, threads: int) -> float:
    from edgekit.converters.estimate.measure import random_feeds, session, time_runs

    sess = session(model, threads)
    return time_runs(sess, random_feeds(sess), min_seconds=0.5, min_runs=20)


def one_build(module: Any, example: Any, calib: str, ratio: float, folder: Path,
              steps: int | None) -> dict[str, Any]:
    from edgekit.converters import build

    out = folder / f"r{ratio:g}.edgekit"
    result = build(module, example, target="host", calib=calib, output=out, formats=["onnx"],
                   method="minmax", prune=ratio or None, quiet=True, finetune_steps=steps)
    with zipfile.ZipFile(out) as archive:
        int8 = archive.read("model.onnx")
    m = result.manifest
    est = m.get("estimate", {}).get("variants", {}).get("int8", {}).get("latency_ms", {})
    return {"int8": int8, "manifest": m, "artifact_bytes": out.stat().st_size, "est_ms": est}


def float_model(module: Any, example: Any, path: Path) -> bytes:
    import torch

    torch.onnx.export(module, (example,), str(path), dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    return path.read_bytes()


def bench_model(name: str, make: Any, example: Any, calib: str, ratios: list[float],
                threads: int, steps: int | None) -> None:
    from edgekit.converters.pruning import prune_structured

    print(f"\n== {name}: dense vs pruned, onnxruntime on this machine, {threads} thread(s)")
    head = (f"{'ratio':>6} {'params':>9} {'float ms':>9} {'int8 ms':>9} {'int8 est':>9} "
            f"{'int8 vs dense':>14} {'artifact kB':>12} {'top-1 dense -> pruned -> int8':>30}")
    print(head)
    dense_int8 = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for ratio in [0.0, *ratios]:
            module = make()
            pruned = prune_structured(module, (example,), ratio)[0] if ratio else module
            f_ms = time_model(float_model(pruned, example, folder / "f.onnx"), threads) * 1e3
            built = one_build(make(), example, calib, ratio, folder, steps)
            q_ms = time_model(built["int8"], threads) * 1e3
            dense_int8 = dense_int8 or q_ms
            m = built["manifest"]
            params = m.get("pruning", {}).get("params_after") or sum(
                p.numel() for p in module.parameters())
            val = m["validation"]
            pruned_acc = m.get("pruning", {}).get("accuracy", {})
            dense_acc = pruned_acc.get("dense_float", val.get("accuracy_float"))
            acc = (f"{dense_acc:.1%} -> {val['accuracy_float']:.1%} -> {val['accuracy_int8']:.1%}"
                   if "accuracy_int8" in val and not val.get("note") else "(random weights)")
            est = built["est_ms"].get(str(threads))
            print(f"{ratio:>6g} {params:>9,} {f_ms:>9.4f} {q_ms:>9.4f} "
                  f"{(f'{est:.4f}' if est else '-'):>9} {q_ms / dense_int8:>13.2f}x "
                  f"{built['artifact_bytes'] / 1e3:>12.1f} {acc:>30}")


def bench_widths(threads: int) -> None:
    """int8 conv stack at 56..64 channels: time per channel shows the multiple-of-8 effect."""
    import torch
    from edgekit.converters import build
    from torch import nn

    print(f"\n== channel counts (3 x conv3x3 at 56x56, int8, {threads} thread(s))")
    print(f"{'channels':>9} {'int8 ms':>9} {'ms per 64 ch^2':>15}")
    example = torch.randn(1, 16, 56, 56)
    with tempfile.TemporaryDirectory() as tmp:
        for width in (56, 57, 60, 63, 64):
            torch.manual_seed(0)
            net = nn.Sequential(nn.Conv2d(16, width, 3, padding=1), nn.ReLU(),
                                nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                nn.Conv2d(width, width, 3, padding=1)).eval()
            out = Path(tmp) / f"w{width}.edgekit"
            build(net, example, target="host", calib="synthetic", output=out, formats=["onnx"],
                  method="minmax", quiet=True)
            with zipfile.ZipFile(out) as archive:
                q_ms = time_model(archive.read("model.onnx"), threads) * 1e3
            print(f"{width:>9} {q_ms:>9.4f} {q_ms * (64 / width) ** 2:>15.4f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ratios", default="0.25,0.5,0.75")
    ap.add_argument("--skip-mobilenet", action="store_true")
    args = ap.parse_args()
    ratios = [float(r) for r in args.ratios.split(",")]
    import torch
    import zoo

    digits_npz = REPO / "examples" / "raspberrypi" / "digits.npz"
    bench_model("digits CNN (trained, real held-out digits)", digits_module,
                torch.zeros(1, 1, 8, 8), str(digits_npz), ratios, args.threads, None)
    if not args.skip_mobilenet:
        bench_model("MobileNetV2-like width 1.0 @ 160x160 (random weights, no fine-tune)",
                    lambda: zoo.mobilenetv2_like(num_classes=1000, width=1.0).eval(),
                    torch.randn(1, 3, 160, 160), "synthetic", ratios, args.threads, 0)
    bench_widths(args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
