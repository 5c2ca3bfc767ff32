"""Benchmark the .tflite int8 path: LiteRT int8 vs onnxruntime int8 vs fp32, 1 and 2 threads.

    python tools/benchmarks/bench_tflite.py [--model mobilenetv2_like|digits] [--rounds 30]

Builds the model with the real pipeline (``edgekit.converters.build``, formats tflite+onnx;
synthetic calibration for the random-weight MobileNetV2-size net, the real digits for the
digits CNN) and reads the int8 ONNX and .tflite from the artifact. fp32 baselines: the
float ONNX on onnxruntime and the same writer's float .tflite on LiteRT. Every engine runs
through edgekit's own backends (so quantize/transpose costs count), batch 1, interleaved
round by round in this one process; medians and ratios are what to read.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``
import zoo  # noqa: E402


def build_artifact(model: str, work: Path) -> tuple[Path, Path, np.ndarray, dict[str, float]]:
    """(float onnx, artifact, one input sample, the build's timings) for a zoo model name
    or 'digits'."""
    from edgekit.converters import build

    if model == "digits":
        src, npz = zoo.digits_paths()
        x = zoo.digits_data()[0][:1]
        calib = str(npz)
    else:
        src = work / f"{model}.onnx"
        zoo.export_onnx(zoo.MODELS[model][0](), zoo.example_input(model), src)
        x = zoo.example_input(model, seed=1).numpy()
        calib = "synthetic"
    out = work / f"{model}.edgekit"
    result = build(str(src), target="rpi4", calib=calib, output=out, method="minmax",
                   quiet=True, formats=["tflite", "onnx"])
    return Path(src), out, x, result.timings


def engines(src: Path, artifact_path: Path, threads: int) -> tuple[dict, dict, float]:
    """name -> backend instance, name -> model bytes, float .tflite conversion seconds."""
    import onnx
    from edgekit.converters.tflite import convert

    from edgekit.artifact.archive import read_artifact
    from edgekit.backends import BackendOptions, TensorSpec
    from edgekit.backends.litert import LiteRTBackend
    from edgekit.backends.onnxruntime import OnnxRuntimeBackend

    artifact = read_artifact(artifact_path)
    manifest = artifact.manifest
    entry = next(m for m in manifest["models"] if m["format"] == "tflite")
    ins = [TensorSpec.from_manifest(i) for i in manifest["inputs"]]
    outs = [TensorSpec.from_manifest(o) for o in manifest["outputs"]]
    start = time.perf_counter()
    fp32 = convert(onnx.load(str(src)))  # an unquantized graph: every op written as float
    seconds = time.perf_counter() - start
    fp32_entry = {"inputs": fp32.inputs, "outputs": fp32.outputs}
    opts = BackendOptions(threads=threads)
    blobs = {
        "tflite-int8": artifact.read(entry["path"]),
        "tflite-fp32": fp32.data,
        "onnx-int8": artifact.read("model.onnx"),
        "onnx-fp32": src.read_bytes(),
    }
    made = {
        "tflite-int8": LiteRTBackend(blobs["tflite-int8"], ins, outs, opts, entry=entry),
        "tflite-fp32": LiteRTBackend(blobs["tflite-fp32"], ins, outs, opts, entry=fp32_entry),
        "onnx-int8": OnnxRuntimeBackend(blobs["onnx-int8"], ins, outs, opts),
        "onnx-fp32": OnnxRuntimeBackend(blobs["onnx-fp32"], ins, outs, opts),
    }
    return made, blobs, seconds


def interleaved(backends: dict, feeds: dict, rounds: int, per_round: int) -> dict[str, float]:
    """Median ms per inference; every round runs each engine ``per_round`` times, the
    starting engine rotating so no engine always follows the same one."""
    names = list(backends)
    for b in backends.values():  # warm-up: first runs pack weights / plan kernels
        for _ in range(3):
            b.run(feeds)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            start = time.perf_counter()
            for _ in range(per_round):
                backends[n].run(feeds)
            times[n].append((time.perf_counter() - start) * 1e3 / per_round)
    return {n: statistics.median(v) for n, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenetv2_like",
                        choices=[*zoo.MODELS, "digits"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--per-round", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args(argv)
    from edgekit.artifact.archive import read_artifact

    with tempfile.TemporaryDirectory(prefix="bench-tflite-") as tmp:
        start = time.perf_counter()
        src, art, x, timings = build_artifact(args.model, Path(tmp))
        build_s = time.perf_counter() - start
        manifest = read_artifact(art).manifest
        # stage times are not in the artifact (deterministic builds): BuildResult.timings
        convert_s = timings.get("stages.convert_tflite", float("nan"))
        check = manifest["validation"].get("tflite", {})
        feeds = {manifest["inputs"][0]["name"]: x.astype(np.float32)}
        print(f"model {args.model}: build {build_s:.1f} s, of which convert_tflite "
              f"{convert_s:.2f} s (writer + LiteRT-vs-ONNX check on "
              f"{check.get('samples', 0)} samples)")
        out_name = manifest["outputs"][0]["name"]
        if out_name in check:
            print(f"parity tflite vs onnx int8: {check[out_name]['within_1_step']:.2%} of "
                  f"output elements within 1 step (max {check[out_name]['max_steps']:.1f})")
        rows = {}
        for threads in (int(t) for t in args.threads.split(",")):
            backends, blobs, fp32_s = engines(src, art, threads)
            rows[threads] = interleaved(backends, feeds, args.rounds, args.per_round)
        print(f"(float .tflite written by the same writer in {fp32_s:.2f} s)\n")
        print(f"{'engine':<13}{'size MB':>9}" + "".join(f"{f'{t} thr ms':>11}" for t in rows))
        for name in blobs:
            cells = "".join(f"{rows[t][name]:>11.2f}" for t in rows)
            print(f"{name:<13}{len(blobs[name]) / 1e6:>9.2f}{cells}")
        print()
        for t, r in rows.items():
            print(f"{t} thread(s): tflite-int8 is {r['tflite-fp32'] / r['tflite-int8']:.2f}x "
                  f"tflite-fp32, {r['onnx-fp32'] / r['tflite-int8']:.2f}x onnx-fp32, "
                  f"{r['onnx-int8'] / r['tflite-int8']:.2f}x onnx-int8")
        sizes = {k: len(v) for k, v in blobs.items()}
        print(f"sizes: tflite-int8 is {sizes['onnx-fp32'] / sizes['tflite-int8']:.2f}x smaller "
              f"than onnx-fp32, {sizes['onnx-int8'] / sizes['tflite-int8']:.2f}x vs onnx-int8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
