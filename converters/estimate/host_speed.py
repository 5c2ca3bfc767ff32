"""Is int8 faster than float on this machine, as edgekit's onnxruntime backend will run it?

Only for builds whose target is this machine (``host``): on a board the estimator speaks.
Small nets can lose at int8 here: the per-op profile of the digits CNN on an AVX2 EPYC
without VNNI (onnxruntime 1 thread) showed QuantizeLinear at the input and NCHW<->NHWC
Transposes around each QLinearConv costing as much as the tiny convolutions save, and, when
the model must run unfused for exactness (8-bit weights on a CPU whose fused kernels
saturate, ``edgekit.device.cpu``), float convolutions wrapped in Quantize/Dequantize pairs. Those
costs are the runtime's, not the model's; the build reports them instead of hiding them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.runner import session

ROUNDS = 6  # interleaved blocks
BLOCK_S = 0.03  # seconds per block, about


def measure(float_path: str | Path, int8_path: str | Path, feeds: dict[str, np.ndarray],
            fused: bool) -> dict[str, Any]:
    """Median time per call of each model at 1 thread (thread CPU time: other processes
    on the machine do not count), interleaved. ``fused``: the int8 model runs fused (7-bit
    weights or a CPU that does not saturate), else unfused as the backend would."""
    f, q = paired({"float": session(float_path, threads=1),
                   "int8": session(int8_path, threads=1, exact_int8=not fused)}, feeds, ROUNDS)
    return {"float_ms": round(f * 1e3, 4), "int8_ms": round(q * 1e3, 4),
            "int8_speedup": round(f / q, 3), "int8_kernels": "fused" if fused else "unfused"}


def paired(runs: dict[str, Any], feeds: dict[str, np.ndarray], rounds: int) -> list[float]:
    """Median seconds per call of each session, in ``runs`` order: blocks of ~``BLOCK_S``,
    interleaved, the order reversed every round, at 1 thread in thread CPU time."""
    calls = {}
    for name, sess in runs.items():
        sess.run(None, feeds)
        t = time.thread_time()
        sess.run(None, feeds)
        calls[name] = max(2, int(BLOCK_S / max(1e-6, time.thread_time() - t)))
    times: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(rounds):
        for name in list(runs)[:: 1 if r % 2 == 0 else -1]:
            t = time.thread_time()
            for _ in range(calls[name]):
                runs[name].run(None, feeds)
            times[name].append((time.thread_time() - t) / calls[name])
    return [float(np.median(times[k])) for k in runs]


def summary_line(speed: dict[str, Any]) -> str:
    line = (f"  speed on this host (onnxruntime, 1 thread): int8 {speed['int8_ms']:.3g} ms vs "
            f"float {speed['float_ms']:.3g} ms ({speed['int8_speedup']:.2f}x, "
            f"{speed['int8_kernels']} int8 kernels)")
    if speed["int8_speedup"] < 1.0:
        line += (": the runtime is slower at int8 for this model here (quantize/dequantize "
                 "and layout transposes outweigh the small convolutions)")
    return line
