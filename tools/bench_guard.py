"""The default-on accuracy guard on every tools/zoo.py model: budget met, or exit 3, within --guard-time.

For each zoo model (random weights, seeded): export to ONNX, calibrate and validate on seeded
standard-normal arrays saved as .npz (real data to the build, so the budget is enforced),
then ``edgekit build --target rpi4 --guard-time T`` through the CLI of this interpreter.
Prints the exit code, wall time against the bound, and the guard's manifest section. A plain
build must end in exit 0 with the budget met, or exit 3 with no artifact: never a shipped miss.

    python tools/bench_guard.py                      # every zoo model, --guard-time 180
    python tools/bench_guard.py --only mobilenetv2_like --guard-time 120 --metric sqnr

Measured here (2026-12-03, 64 standard-normal samples): mobilenetv2_like exit 0 in 92 s (top1
agreement drop 0.00) and in 52 s with --metric sqnr (drop 0.01): int8 met the budget, so the
guard did not run; a random-weight zoo model on noise does not exercise the guard's bound.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import zoo  # noqa: E402


def bench(name: str, guard_time: float, samples: int, folder: Path, metric: str | None) -> None:
    factory, shape = zoo.MODELS[name]
    source = zoo.export_onnx(factory(), zoo.example_input(name), folder / f"{name}.onnx")
    rng = np.random.default_rng(0)
    np.savez(folder / "calib.npz", x=rng.standard_normal((samples, *shape[1:])).astype(np.float32))
    np.savez(folder / "val.npz", x=rng.standard_normal((samples, *shape[1:])).astype(np.float32))
    out = folder / f"{name}.edgekit"
    command = [str(Path(sys.executable).parent / "edgekit"), "build", str(source), "--target", "rpi4",
               "--calib", str(folder / "calib.npz"), "--val", str(folder / "val.npz"), "--format", "onnx",
               "--guard-time", str(guard_time), "-o", str(out), "--json"]
    command += ["--metric", metric] if metric else []
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    print(f"== {name}: exit {done.returncode} in {seconds:.0f} s (guard bound {guard_time:g} s); "
          f"artifact written: {out.exists()}")
    if done.returncode == 0:
        manifest = json.loads(done.stdout)
        metric = manifest["validation"]["metric"]
        print(f"   metric {metric['name']}: drop {metric['drop']:.2f} points")
        guard = manifest.get("accuracy_guard")
        print(f"   guard: {json.dumps({k: guard[k] for k in ('met', 'tensors_ranked', 'timed_out')}) if guard else 'not needed'}")
    else:
        print("\n".join("   | " + line for line in done.stderr.strip().splitlines()[-8:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(zoo.MODELS))
    parser.add_argument("--guard-time", type=float, default=180.0)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--metric", help="passed to the build (sqnr: the budget bounds (1 - cosine) x 100)")
    args = parser.parse_args()
    for name in [args.only] if args.only else list(zoo.MODELS):
        with tempfile.TemporaryDirectory() as tmp:
            bench(name, args.guard_time, args.samples, Path(tmp), args.metric)


if __name__ == "__main__":
    main()
