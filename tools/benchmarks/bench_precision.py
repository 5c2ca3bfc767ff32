"""The accuracy guard's precision ladder (int8 -> int16 -> fp16 -> float) on zoo models, both formats.

For each model: export it from ``tools/zoo`` (seeded weights), calibrate and validate on
its seeded example inputs, and run a plain ``edgekit.converters.build`` for the Pi 5 (whose
Cortex-A76 has fp16 arithmetic, so the ladder has every rung) with the ``sqnr`` metric and a
tight accuracy budget (``--budget`` points of (1 - cosine) x 100, written into a copy of the
rpi5 profile), so that int8 misses it and the guard climbs the ladder for real. Printed per
model: each guard attempt (rung, tensors moved, drop, met), the layers' precisions in the
shipped graph, the summary line, and LiteRT against onnxruntime on the same validation inputs
(largest difference in the shared int8 output step; the shipped model of each format).

    python tools/benchmarks/bench_precision.py                          # plain_cnn, mtcnn_pnet
    python tools/benchmarks/bench_precision.py --only resnet18 --budget 0.02 --rung int16

``--rung int16`` / ``--rung fp16`` builds with the other rungs above int8 skipped, to show a
rung on a model whose guard would stop below or above it.

Measured here (2026-12-03, 32 calibration + 32 validation samples, rpi5 profile):
  plain_cnn  --budget 0.0015: int16 tried (drop 0.0031, missed: int8 weights dominate), fp16 met
             with 4 tensors (0.0012); LiteRT vs onnxruntime 7e-8 (fp16 output layer: float).
  mtcnn_pnet --budget 0.09:   int16 tried (0.26, missed: PRelu between the convs stays int8),
             fp16 met with 2 tensors (0.050); LiteRT vs onnxruntime 0.22 int8 output steps.
  resnet18   --budget 0.003:  int8 met (guard not needed); LiteRT vs onnxruntime 1 step.
The int16 rung meets the budget where an activation's range is what int8 loses: the zoo's
digits CNN re-parameterized with outlier channels (tests/converters/test_guard.py and
tests/converters/precision/: int8 9.2 dB -> a16w8 19.4 dB output SQNR, both formats within one
int8 output step of each other).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``
import zoo  # noqa: E402

DEFAULT = ("plain_cnn", "mtcnn_pnet")


def tight_profile(folder: Path, budget: float) -> Path:
    """The rpi5 profile with another accuracy budget (a profile file: ``--target PATH``)."""
    from edgekit.targets import PROFILE_DIR

    text = (PROFILE_DIR / "rpi5.toml").read_text()
    text = re.sub(r"(?m)^accuracy_drop = [0-9.]+", f"accuracy_drop = {budget}", text)
    path = folder / "rpi5-tight.toml"
    path.write_text(text)
    return path


def parity(path: Path, feeds: dict[str, np.ndarray]) -> str:
    """LiteRT vs onnxruntime outputs of the artifact on the same inputs, in output int8 steps."""
    import edgekit

    outs = {}
    for backend in ("litert", "onnxruntime"):
        model = edgekit.load(path, backend=backend, threads=1)
        rows = [model.predict({k: v[i:i + 1] for k, v in feeds.items()}) for i in range(len(next(iter(feeds.values()))))]
        outs[backend] = np.concatenate([r if isinstance(r, np.ndarray) else next(iter(r.values())) for r in rows])
        model.close()
    entry = model.spec.model("tflite").data
    q = next(iter((entry.get("outputs_quantization") or {}).values()), None) or {}
    step = float(q.get("scale") or 0.0)
    diff = float(np.abs(outs["litert"].astype(np.float64) - outs["onnxruntime"]).max())
    return f"max |LiteRT - onnxruntime| = {diff:.4g}" + (f" ({diff / step:.2f} int8 output steps of {step:.4g})" if step else "")


def run(name: str, folder: Path, budget: float, samples: int, guard_time: float, rung: str | None) -> None:
    from edgekit.converters import build
    from edgekit.converters.search import autoguard

    entry = zoo.ENTRIES[name]
    source = entry.write_onnx(folder / f"{name}.onnx")
    data = entry.calib_data(2 * samples, seed=0)
    np.savez(folder / "calib.npz", **{k: v[:samples] for k, v in data.items()})
    np.savez(folder / "val.npz", **{k: v[samples:] for k, v in data.items()})
    if rung:  # only this rung between int8 and float
        autoguard.LADDER = ("int8", rung, "float")
    began = time.perf_counter()
    out = folder / f"{name}.edgekit"
    result = build(str(source), target=str(tight_profile(folder, budget)), calib=str(folder / "calib.npz"),
                   val=str(folder / "val.npz"), output=out, formats=["tflite", "onnx"], metric="sqnr",
                   guard_time=guard_time, accept_accuracy_drop=True, quiet=True)
    m = result.manifest
    print(f"== {name}: built in {time.perf_counter() - began:.0f} s, budget {budget:g} points")
    for a in (m.get("accuracy_guard") or {}).get("attempts", []):
        print(f"   guard: {len(a['float_tensors'])} tensor(s) -> {a['rung']:<5} drop {a['drop']:.4f} "
              f"{'MET' if a['met'] else 'missed'} ({a['seconds']:.1f} s)")
    print(f"   layers: {dict(Counter(entry['precision'] for entry in m['layers']))}")
    print("   " + next((line.strip() for line in result.summary().splitlines() if "accuracy guard" in line),
                      "accuracy guard: not needed"))
    print(f"   float ops in tflite: {len(m['models'][0].get('float_ops') or [])}")
    print("   " + parity(out, {k: v[:16] for k, v in np.load(folder / 'val.npz').items()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(DEFAULT))
    parser.add_argument("--budget", type=float, default=0.05)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--guard-time", type=float, default=300.0)
    parser.add_argument("--rung", choices=["int16", "fp16"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            sub = Path(tmp) / name
            sub.mkdir()
            run(name, sub, args.budget, args.samples, args.guard_time, args.rung)


if __name__ == "__main__":
    main()
