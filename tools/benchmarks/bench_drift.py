"""The drift watch's cost (edgekit/numerics/drift.py), side by side in one process, as ratios.

    python tools/benchmarks/bench_drift.py [--vision A.edgekit] [--rounds N] [--threads 1]

On a 224x224 MobileNetV2-like net (random weights: speed only; ``common.
build_vision``), batch 1: ``predict`` of a model with the watch / the same artifact loaded
without it (``detach``), for

1. the .tflite with an input inside the calibrated range (the write's min/max find nothing
   to clip: the watch costs one add; its outputs are counted on timed runs);
2. the .tflite with an input of which about half the values are outside the range (the
   write clips anyway; the watch counts them per channel on a strided sample: its worst
   case, every run);
3. the .onnx on onnxruntime, in range (inputs counted on sampled runs).

Both sides of a pair run the same session, the watch attached or detached before each call.

Then what the watch is for, on a trained model with real inputs: the committed digits CNN
(``common.build_small``, calibrated on scikit-learn digits scaled to [0, 1]) on
all 540 digits with their pixel values multiplied by a gain (a camera's exposure moving):
per gain, the share of input values the watch finds outside the calibrated range, whether it
warns, and top-1 against the labels with its 95% Wilson interval.

The bar is <= 1.01 (1% of predict). Each pair runs in alternating blocks; a ratio is the
median of per-block ratios (1 thread: thread CPU time, else wall time), with its 90%
bootstrap interval (``common.paired``). Run it a few times on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

import edgekit  # noqa: E402
from tools.benchmarks.common import build_small, build_vision, paired, ratio_text, verdict  # noqa: E402

BAR = 1.01


def switched(model: Any, on: bool) -> Any:
    """``predict`` of ``model`` with its drift watch attached (``on``) or detached: the
    same session on both sides of a pair (two sessions of one model differ by ~1% here
    on their own). Each call first sets the watch's few references, on both sides alike."""
    watch = model._drift  # noqa: SLF001 - the bench switches the watch off on one side
    session, backend = model.session, model.session.backend
    counters = watch.inputs if on else {}

    def predict(x: np.ndarray) -> Any:
        model._drift = session.drift = watch if on else None
        backend.watch_inputs(counters)
        return model.predict(x)

    return predict


def inputs(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """(an input inside the calibrated range, one with about half its values outside)."""
    spec = model.spec.inputs[0]
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
    record = spec.calibration
    low, high = (record.low, record.high) if record else (-1.0, 1.0)
    rng = np.random.default_rng(0)
    inside = rng.uniform(low, high, shape).astype(np.float32)
    centre = (low + high) / 2
    outside = (centre + (inside - centre) * 2.0).astype(np.float32)  # half past the ends
    return inside, outside


def rows(vision: Path, threads: int, rounds: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for backend, cases in (("litert", ("in range", "half outside")),
                           ("onnxruntime", ("in range",))):
        model = edgekit.load(vision, backend=backend, threads=threads)
        watched, bare = switched(model, True), switched(model, False)
        inside, outside = inputs(model)
        for case in cases:
            x = inside if case == "in range" else outside
            r = paired(lambda x=x, w=watched: w(x), lambda x=x, b=bare: b(x), rounds, threads)
            watched(x)
            share = model.stats()["drift"]["inputs"][model.inputs[0].name]["share"]
            out.append((f"{model.format} predict, {case} (clipped share {share:.3f}) "
                        f"watch / none ({threads}t)", r))
        model.close()
    return out


def own_work(vision: Path, rounds: int) -> list[str]:
    """The watch's own work per predict, timed in place in this thread's CPU time (quiet
    where the paired end-to-end ratio carries the shared machine's noise): the .tflite input
    write with / without its counter on the half-outside input (past the first, exact runs),
    plus ``observe`` of the outputs, over predict's own time."""
    model = edgekit.load(vision, backend="litert", threads=1)
    _, outside = inputs(model)
    plan = model.backend._in[0]  # noqa: SLF001 - the write is what the watch rides on
    counter = model._drift.inputs[model.inputs[0].name]  # noqa: SLF001
    counter.write_runs = 10_000  # past the exact phase: the steady state
    target = np.empty(plan.shape, plan.dtype)
    results = [model.predict(outside)]
    feeds = {model.inputs[0].name: outside}

    def per_call(fn: Any, n: int = 50) -> float:
        start = time.thread_time()
        for _ in range(n):
            fn()
        return (time.thread_time() - start) / n

    on, off, observe, predict = [], [], [], []
    for _ in range(rounds):
        plan.watch = counter
        on.append(per_call(lambda: plan.write(outside, target)))
        plan.watch = None
        off.append(per_call(lambda: plan.write(outside, target)))
        observe.append(per_call(lambda: model._drift.observe(feeds, results), 400))  # noqa: SLF001
        predict.append(per_call(lambda: model.predict(outside), 10))
    model.close()
    extra = float(np.median(on) - np.median(off) + np.median(observe))
    base = float(np.median(predict))
    return [f"tflite, half outside, in place: write +{1e6 * (np.median(on) - np.median(off)):.1f} "
            f"us, observe {1e6 * np.median(observe):.1f} us per predict of {1e3 * base:.3f} ms: "
            f"(predict + watch) / predict = {(base + extra) / base:.4f}"]


GAINS = (1.0, 1.1, 1.25, 1.5, 2.0)


def accuracy_rows(digits: Path) -> list[str]:
    """Per exposure gain on the real digits: clipped share, warning, top-1 [95% CI]."""
    from scipy.stats import binomtest

    with np.load(REPO / "examples/raspberrypi/digits.npz") as npz:
        x, y = npz["x"].astype(np.float32), npz["y"]
    lines = [f"{'gain':>5} {'clipped share':>14} {'warns':>6} {'top-1 (n=' + str(len(y)) + ')':>14}"
             "  95% interval"]
    for gain in GAINS:
        with edgekit.load(digits, backend="litert", threads=1) as model:
            hits = sum(int(np.argmax(model.predict(x[i:i + 1] * gain)) == y[i])
                       for i in range(len(y)))
            share = model.stats()["drift"]["inputs"][model.inputs[0].name]["share"]
            warns = bool(model.drift_warnings())
        ci = binomtest(hits, len(y)).proportion_ci(method="wilson")
        lines.append(f"{gain:>5.2f} {share:>14.4f} {'yes' if warns else 'no':>6} "
                     f"{hits / len(y):>14.4f}  [{ci.low:.3f}, {ci.high:.3f}]")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vision", type=Path, help="a 224 px artifact with .tflite and .onnx "
                        "(default: build_vision into a temp folder)")
    parser.add_argument("--digits", type=Path, help="the digits CNN artifact (default: "
                        "build_small into a temp folder)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        vision = args.vision or build_vision(Path(tmp) / "vision.rpi4.edgekit")
        results = rows(vision, args.threads, args.rounds)
        in_place = own_work(vision, args.rounds)
        digits = args.digits or build_small(Path(tmp) / "digits.rpi4.edgekit")
        accuracy = accuracy_rows(digits)
    ok = True
    for name, r in results:
        passed = r["ratio"] <= BAR
        ok &= passed
        print(f"{name:<78} {ratio_text(r)}  {r['a_ms']:.3f} / {r['b_ms']:.3f} ms  "
              f"<= {BAR}  {verdict(passed, r, BAR)}")
    print("\n".join(in_place + accuracy))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
