"""Artifacts, timing loops and paired ratios with their intervals, shared by the benchmarks
(``bench_runtime.py``, ``bench_runtime_power.py``, ``bench_fastpath.py``, ``bench_peers.py``,
``bench_drift.py``, ``bench_predict_vs_old.py``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``


def build_small(out: Path) -> Path:
    from edgekit.converters import build

    onnx, npz = REPO / "examples/raspberrypi/digits_cnn.onnx", REPO / "examples/raspberrypi/digits.npz"
    build(str(onnx), target="rpi4", calib=str(npz), output=out, quiet=True,
          formats=["onnx", "tflite"])
    return out


def build_vision(out: Path) -> Path:
    """MobileNetV2-like at 224x224, 1000 classes (random weights: speed only), both formats."""
    import torch
    import zoo
    from edgekit.converters import build

    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    onnx = zoo.export_onnx(zoo.mobilenetv2_like(num_classes=1000), x, out.with_suffix(".onnx"))
    build(str(onnx), target="rpi4", calib="synthetic", output=out, quiet=True,
          formats=["onnx", "tflite"], calib_samples=8)
    return out


def build_medium(out: Path) -> Path:
    """MobileNetV2-like (zoo, random weights: speed only) at 128x128: large enough that a
    second thread pays off here (about 1.5x), small enough to build in seconds."""
    import torch
    import zoo
    from edgekit.converters import build

    x = torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    onnx = zoo.export_onnx(zoo.mobilenetv2_like(num_classes=100), x, out.with_suffix(".onnx"),
                           dynamic_batch=True)
    build(str(onnx), target="rpi4", calib="synthetic", output=out, quiet=True,
          formats=["onnx"], calib_samples=16)
    return out


def one_input(model: Any, rows: int = 1) -> np.ndarray:
    from edgekit.commands.bench import bench_feeds

    return next(iter(bench_feeds(model, rows).values()))


def closed_loop(model: Any, x: np.ndarray, seconds: float) -> tuple[int, float]:
    """Back-to-back predict calls for ``seconds``; (samples, elapsed)."""
    n, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        model.predict(x)
        n += 1
    return n * x.shape[0], time.perf_counter() - start


def interleaved(models: dict[str, Any], x: np.ndarray, rounds: int, slice_s: float
                ) -> dict[str, float]:
    """Throughput (samples/s) of each model over alternating slices. The order rotates each
    round and slices are 100 ms apart: an idle onnxruntime pool spin-waits ~40 ms of CPU,
    which would be billed to the next slice."""
    done = {k: [0, 0.0] for k in models}
    names = list(models)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(0.1)
            n, s = closed_loop(models[name], x, slice_s)
            done[name][0] += n
            done[name][1] += s
    return {k: n / s for k, (n, s) in done.items()}


def bare_call(model: Any, x: np.ndarray) -> Any:
    """The runtime's own call with nothing of edgekit's around it: onnxruntime's native run
    of the float feed; for .tflite the interpreter with an input quantized beforehand."""
    backend = model.backend
    if model.format == "onnx":
        feeds = {model.inputs[0].name: x}
        if backend.native_call is not None:  # the C run itself, as predict calls it
            native, names, options = backend.native_call
            return lambda: native(names, feeds, options)
        run = backend.run
        return lambda: run(feeds)
    interpreter = backend.interpreter
    plan, out = backend._in[0], backend._out[0].index  # noqa: SLF001 - the raw call needs them
    ready = plan.quantize(x)

    def raw() -> None:
        interpreter.set_tensor(plan.index, ready)
        interpreter.invoke()
        interpreter.get_tensor(out)

    return raw


# -- timing ------------------------------------------------------------------------------
def paired(a: Callable[[], Any], b: Callable[[], Any], rounds: int, threads: int,
           seconds: float = 0.15) -> dict[str, float]:
    """Median per-call time of a and b and the median of per-block ratios a/b. At 1 thread
    in this thread's CPU time (both runtimes then run on the caller's thread: that is all
    the work, and other processes holding the core do not count); else wall time."""
    clock = time.thread_time if threads == 1 else time.perf_counter
    for _ in range(3):
        a()
        b()
    t = time.perf_counter()
    a()
    b()
    calls = max(2, int(seconds / max(1e-6, (time.perf_counter() - t) / 2)))
    ta: list[float] = []
    tb: list[float] = []
    for r in range(rounds):
        pair = ((a, ta), (b, tb))
        for fn, out in pair if r % 2 == 0 else pair[::-1]:
            start = clock()
            for _ in range(calls):
                fn()
            out.append((clock() - start) / calls)
    ratios = np.array(ta) / np.array(tb)
    return {"a_ms": float(np.median(ta)) * 1e3, "b_ms": float(np.median(tb)) * 1e3,
            "ratio": float(np.median(ratios)), "ci": median_ci(ratios)}


def median_ci(values: np.ndarray, level: float = 0.9) -> tuple[float, float]:
    """A bootstrap confidence interval of the median of ``values`` (per-block ratios):
    whether a ratio a little past its bar is a miss or noise around a tie. Seeded, so a
    printed table can be re-derived from its blocks."""
    from scipy.stats import bootstrap

    res = bootstrap((values,), np.median, confidence_level=level, method="percentile",
                    n_resamples=2000, rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def ratio_text(r: dict[str, Any]) -> str:
    """``1.0461 [1.031, 1.060]``: the median ratio (four decimals: a 0.9996 that misses a
    1.00 bar does not print as 1.000) and its 90% interval."""
    lo, hi = r["ci"]
    return f"{r['ratio']:.4f} [{lo:.3f}, {hi:.3f}]"


def verdict(ok: bool, r: dict[str, Any], bar: float) -> str:
    """PASS / FAIL on the median; ``(tie)`` when the bar lies inside the interval."""
    lo, hi = r["ci"]
    return ("PASS" if ok else "FAIL") + (" (tie)" if lo <= bar <= hi else "")
