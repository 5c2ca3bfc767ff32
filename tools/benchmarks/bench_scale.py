"""Builds at scale on Ray, measured on this machine.

1. Throughput: a small matrix (the digits CNN x target profiles) built as Ray tasks, one
   build per task, on a local cluster of 1 worker and then of 2; builds per minute of each
   and their ratio, measured side by side in one run.
2. Search candidates as tasks: one budget search (the digits CNN, ``--method auto`` at one prune
   ratio: four candidates, the search's largest independent batch) with ``--executor local``
   and then ``ray`` (2 workers); seconds of each, their ratio, and whether the artifacts are
   byte-identical (``--only search``).
3. Merged calibration: 10,000 samples calibrated by onnxruntime's calibrators in one process,
   chunk by chunk, and by ``sharded_calibration`` on Ray shards; the ranges must be equal
   (exact comparison, every tensor and field), for minmax, percentile (signed and |x|
   histograms) and entropy.

    python tools/benchmarks/bench_scale.py [--cells 6] [--samples 10000] [--shards 4]
    python tools/benchmarks/bench_scale.py --only throughput     # the 1-vs-2-worker ratio alone

Needs the [ray] extra. Run on an idle machine: the figures are wall-clock.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DIGITS_ONNX = ROOT / "examples" / "raspberrypi" / "digits_cnn.onnx"
DIGITS_NPZ = ROOT / "examples" / "raspberrypi" / "digits.npz"
TARGETS = ("rpi4", "rpi5", "rpi-zero2w", "rpi3", "generic-aarch64", "host")


@dataclass(frozen=True)
class BuildCell:
    """One cell of the matrix: a whole build in one task, in its own temp folder."""

    target: str

    def __call__(self, out_dir: str) -> str:
        from edgekit.converters import build

        out = Path(out_dir) / f"digits.{self.target}.edgekit"
        result = build(str(DIGITS_ONNX), target=self.target, calib=str(DIGITS_NPZ),
                       output=out, quiet=True, formats=["onnx"])
        return result.manifest["models"][0]["sha256"]


def _warm(_: int) -> int:
    """Start a worker and import what a build imports, outside the timing; the sleep keeps
    one worker busy so the next item starts the other."""
    import edgekit.converters  # noqa: F401
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    time.sleep(1.0)
    return os.getpid()


def warm(executor: object, workers: int) -> None:
    executor.map(_warm, list(range(workers)), label="warm-up", quiet=True)


def _run_cell(item: tuple[BuildCell, str]) -> str:
    cell, out_dir = item
    return cell(out_dir)


def throughput(cells: int) -> dict[int, float]:
    from edgekit.converters.executor.ray_executor import RayExecutor

    targets = [TARGETS[i % len(TARGETS)] for i in range(cells)]
    rates: dict[int, float] = {}
    digests: dict[int, list[str]] = {}
    for workers in (1, 2):
        executor = RayExecutor(None, num_cpus=workers)
        try:
            warm(executor, workers)
            with tempfile.TemporaryDirectory() as out:
                began = time.perf_counter()
                digests[workers] = executor.map(_run_cell, [(BuildCell(t), out) for t in targets],
                                                label=f"{workers} worker(s)", quiet=True)
                seconds = time.perf_counter() - began
        finally:
            executor.close()
        rates[workers] = cells / seconds * 60
        print(f"  {workers} Ray worker(s): {cells} builds in {seconds:.1f} s = "
              f"{rates[workers]:.1f} builds/min (load average {os.getloadavg()[0]:.1f})")
    same = digests[1] == digests[2]
    print(f"  2 workers / 1 worker: {rates[2] / rates[1]:.2f}x; same models both runs: {same}")
    return rates


def search_candidates() -> bool:
    from edgekit.converters import build
    from edgekit.converters.executor.shards import executor_for

    executor_for("ray")  # the cluster starts outside the timing
    warm(executor_for("ray"), 2)
    seconds: dict[str, float] = {}
    artifacts: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as out:
        for kind in ("local", "ray"):
            began = time.perf_counter()
            result = build(str(DIGITS_ONNX), target="host", calib=str(DIGITS_NPZ), quiet=True,
                           output=Path(out) / f"{kind}.edgekit", formats=["onnx"],
                           method="auto", budgets={"storage_mb": 0.06, "accuracy_drop": 8.0},
                           calib_samples=64, val_samples=128, prune_ratios=[0.75],
                           executor=kind)
            seconds[kind] = time.perf_counter() - began
            artifacts[kind] = result.path.read_bytes()
            print(f"  --executor {kind:<5}: {len(result.manifest['search']['candidates'])} "
                  f"candidate(s) recorded, {seconds[kind]:.1f} s "
                  f"(load average {os.getloadavg()[0]:.1f})")
    executor_for("ray").close()
    same = artifacts["local"] == artifacts["ray"]
    print(f"  local / ray: {seconds['local'] / seconds['ray']:.2f}x; same artifact bytes: {same}")
    return same


def merged_calibration(samples: int, shards: int) -> bool:
    from edgekit.converters.context import Dataset
    from edgekit.converters.executor.ray_executor import RayExecutor
    from edgekit.converters.inputs.sharded import Recipe, calibrate_sharded
    from edgekit.converters.stages.calibrate import CHUNK_SAMPLES, PERCENTILE_OPTIONS
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    with np.load(DIGITS_NPZ) as npz:
        base = npz["x"]
    rng = np.random.default_rng(0)
    x = base[rng.integers(0, len(base), samples)]
    x = (x * rng.uniform(0.5, 2.0, (samples, 1, 1, 1))).astype(np.float32)  # ranges grow
    data = Dataset({"image": x})
    cases = {("minmax", False): {"symmetric": False},
             ("percentile", False): {**PERCENTILE_OPTIONS, "symmetric": False},
             ("percentile", True): {**PERCENTILE_OPTIONS, "symmetric": True},
             # the entropy search is quadratic in bins: 128 keeps this run short
             ("entropy", False): {"num_bins": 128, "num_quantized_bins": 32, "symmetric": False}}
    enums = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
             "entropy": CalibrationMethod.Entropy}
    executor = RayExecutor(None)
    warm(executor, executor.workers)
    all_equal = True
    try:
        with tempfile.TemporaryDirectory() as tmp:
            def as_json(ranges: object) -> dict:
                save_tensors_data(ranges, Path(tmp) / "r.json")
                return json.loads((Path(tmp) / "r.json").read_text())

            for (method, symmetric), extra in cases.items():
                began = time.perf_counter()
                with contextlib.redirect_stdout(io.StringIO()):
                    one = create_calibrator(DIGITS_ONNX, None, calibrate_method=enums[method],
                                            augmented_model_path=str(Path(tmp) / "aug.onnx"),
                                            extra_options=extra)
                    for start in range(0, samples, CHUNK_SAMPLES):
                        stop = min(start + CHUNK_SAMPLES, samples)
                        one.collect_data(_Reader([data.feeds(i, i + 1) for i in range(start, stop)]))
                    want = as_json(one.compute_data())
                single = time.perf_counter() - began
                began = time.perf_counter()
                recipe = Recipe(DIGITS_ONNX.read_bytes(), False, CHUNK_SAMPLES, {method: extra})
                got = as_json(calibrate_sharded(executor, recipe, data, [method], shards,
                                                quiet=True)[method])
                sharded = time.perf_counter() - began
                equal = got == want
                all_equal &= equal
                print(f"  {method:<10} symmetric={symmetric!s:<5} tensors {len(want['data'])}: "
                      f"one process {single:.1f} s, {shards} shards on Ray {sharded:.1f} s, "
                      f"{'EQUAL' if equal else 'DIFFERENT'}")
    finally:
        executor.close()
    return all_equal


class _Reader:
    def __init__(self, items: list[dict]) -> None:
        self._items = iter(items)

    def get_next(self) -> dict | None:
        return next(self._items, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=6, help="builds in the matrix")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--only", choices=("throughput", "search", "calibration"),
                        help="run one of the three measurements")
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # other processes' load moves these figures: the 1-minute load average says how much
    print(f"machine: {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.1f}")
    ok = True
    if args.only in (None, "throughput"):
        print(f"matrix throughput (digits CNN x {args.cells} target cells, one build per task):")
        throughput(args.cells)
    if args.only in (None, "search"):
        print("search candidates as Ray tasks (digits CNN, --method auto, one prune ratio):")
        ok &= search_candidates()
    if args.only in (None, "calibration"):
        print(f"merged calibration ({args.samples} samples, exact equality with one process):")
        ok &= merged_calibration(args.samples, args.shards)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
