"""Benchmark the build: fp32 vs int8 size, build time, batch-1 latency, digits accuracy.

    python tools/bench_build.py [--quick]

Models: the committed digits CNN (real trained weights, real held-out digits) and a
MobileNetV2-size net (tools/zoo, random weights: size and speed only). Latencies are
medians of interleaved runs (fp32, int8, fp32, int8, ...) in this one process, so a noisy
shared machine affects both sides alike; ratios are what to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402


def session(model: bytes | str, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def interleaved_latency(models: dict[str, bytes | str], x: np.ndarray, threads: int,
                        rounds: int) -> dict[str, float]:
    """Median batch-1 latency (ms) per model, runs interleaved round by round."""
    sessions = {k: session(v, threads) for k, v in models.items()}
    name = {k: s.get_inputs()[0].name for k, s in sessions.items()}
    for k, s in sessions.items():  # warm-up
        for _ in range(3):
            s.run(None, {name[k]: x})
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for _ in range(rounds):
        for k, s in sessions.items():
            start = time.perf_counter()
            s.run(None, {name[k]: x})
            times[k].append((time.perf_counter() - start) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def bench(label: str, onnx_path: Path, calib: str, x: np.ndarray, rounds: int,
          out_dir: Path) -> dict[str, float]:
    from edgekit.converters import build

    from edgekit.artifact import read_artifact

    start = time.perf_counter()
    result = build(str(onnx_path), target="rpi4", calib=calib, output=out_dir / f"{label}.edgekit",
                   formats=["onnx"], quiet=True)
    seconds = time.perf_counter() - start
    int8 = read_artifact(result.path).read("model.onnx")
    fp32_bytes = onnx_path.stat().st_size
    row = {"build_s": seconds, "fp32_bytes": fp32_bytes, "artifact_bytes": result.artifact_bytes,
           "size_ratio": fp32_bytes / result.artifact_bytes}
    for threads in (1, 2):
        lat = interleaved_latency({"fp32": str(onnx_path), "int8": int8}, x, threads, rounds)
        row[f"fp32_ms_t{threads}"], row[f"int8_ms_t{threads}"] = lat["fp32"], lat["int8"]
        row[f"speedup_t{threads}"] = lat["fp32"] / lat["int8"]
    val = result.manifest["validation"]
    if "accuracy_int8" in val:
        row["acc_float"], row["acc_int8"] = val["accuracy_float"], val["accuracy_int8"]
        row["val_samples"] = val["samples"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed rounds")
    args = parser.parse_args()
    rounds = 20 if args.quick else 100
    print(f"machine: {os.uname().machine}, {os.cpu_count()} CPUs; rounds={rounds} (interleaved medians)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        digits_onnx, digits_npz = zoo.digits_paths()
        x_digits, _ = zoo.digits_data()
        rows = {"digits CNN": bench("digits", digits_onnx, str(digits_npz), x_digits[:1], rounds, out)}
        import torch

        net = zoo.mobilenetv2_like()
        mnv2 = zoo.export_onnx(net, torch.zeros(1, 3, 224, 224), out / "mnv2.onnx")
        rows["MobileNetV2-size"] = bench("mnv2", mnv2, "synthetic",
                                         np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32),
                                         max(10, rounds // 5), out)
    for label, r in rows.items():
        print(f"\n{label}")
        print(f"  size: fp32 {r['fp32_bytes'] / 1e6:.3f} MB -> artifact {r['artifact_bytes'] / 1e6:.3f} MB "
              f"= {r['size_ratio']:.2f}x smaller")
        print(f"  build time: {r['build_s']:.1f} s")
        for t in (1, 2):
            print(f"  latency b1, {t} thread(s): fp32 {r[f'fp32_ms_t{t}']:.3f} ms, int8 "
                  f"{r[f'int8_ms_t{t}']:.3f} ms = {r[f'speedup_t{t}']:.2f}x")
        if "acc_int8" in r:
            print(f"  accuracy on {r['val_samples']} held-out real digits: float {r['acc_float']:.2%}, "
                  f"int8 {r['acc_int8']:.2%} (drop {100 * (r['acc_float'] - r['acc_int8']):.2f} points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
