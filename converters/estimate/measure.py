"""Measure onnxruntime latency and peak memory on this machine (calibration and benchmarks).

Latency: the fastest of repeated ``session.run`` calls after warm-up, sessions configured as edgekit's
onnxruntime backend configures them. Memory: a fresh subprocess records its resident set
after importing onnxruntime and numpy, then loads the model from bytes (as ``edgekit.load``
does), runs it, and reports the peak resident set (``VmHWM``, reset through
``/proc/self/clear_refs`` so import-time peaks do not count) minus that baseline.

    python -m edgekit.converters.estimate.measure model.onnx --threads 2          # memory
    python -m edgekit.converters.estimate.measure --latency --threads 1,2 a.onnx b.onnx
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np


def realtime(priority: int = 10) -> bool:
    """Run this process (and threads it starts later) ahead of ordinary processes.

    On a shared machine other processes' bursts otherwise land inside timed runs; with
    SCHED_FIFO the timings approach an idle machine's. Needs root (or CAP_SYS_NICE); the
    kernel still keeps 5% of each second for everyone else. False when not permitted.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError):
        return False
    return True


def session(model: bytes | str, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = max(1, int(threads))
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=so, providers=["CPUExecutionProvider"])


def random_feeds(sess: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of the session's shapes (symbolic dims as 1) and float types."""
    rng = np.random.default_rng(seed)
    dtypes = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    feeds = {}
    for spec in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
        dtype = dtypes.get(spec.type, np.float32)
        if np.issubdtype(dtype, np.floating):
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[spec.name] = rng.integers(0, 8, shape).astype(dtype)
    return feeds


def time_runs(sess: Any, feeds: dict[str, np.ndarray], min_seconds: float = 0.3,
              min_runs: int = 10, warmup: int = 3) -> float:
    """Fastest ``run`` in seconds: other processes on a shared machine only ever add time, so
    the minimum over many runs is the figure for an otherwise idle machine."""
    for _ in range(warmup):
        sess.run(None, feeds)
    times: list[float] = []
    began = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - began < min_seconds:
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - start)
        if len(times) >= 2000:
            break
    return min(times)


def latency(model: bytes | str, threads: int, min_seconds: float = 0.3) -> float:
    sess = session(model, threads)
    return time_runs(sess, random_feeds(sess), min_seconds=min_seconds)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets VmHWM to the current resident set
        return True
    except OSError:
        return False


def probe(path: str, threads: int, runs: int) -> dict[str, Any]:
    """In this process: baseline RSS, then load + run; returns bytes (call in a fresh process)."""
    import onnxruntime  # noqa: F401  - part of the baseline, as on a device

    with open(path, "rb") as handle:
        size = len(handle.read())  # touch the page cache like a real load; not counted
    resettable = _reset_peak()
    baseline = _status_kb("VmRSS")
    data = open(path, "rb").read()  # noqa: SIM115 - held like edgekit.load holds the artifact
    sess = session(data, threads)
    feeds = random_feeds(sess)
    for _ in range(runs):
        sess.run(None, feeds)
    peak = _status_kb("VmHWM")
    return {"baseline_bytes": baseline * 1024, "peak_bytes": peak * 1024,
            "delta_bytes": (peak - baseline) * 1024, "file_bytes": size,
            "peak_reset": resettable}


def memory(path: str, threads: int = 1, runs: int = 3) -> dict[str, Any]:
    """Peak RSS delta of loading + running ``path`` in a fresh interpreter."""
    cmd = [sys.executable, "-m", "edgekit.converters.estimate.measure", str(path),
           "--threads", str(threads), "--runs", str(runs)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def latencies(paths: list[str], threads: list[int], rounds: int = 5,
              budget: float = 0.15) -> dict[str, dict[int, float]]:
    """Fastest run of each model at each thread count, over interleaved rounds so that a
    burst of load hits every config alike. One session at a time: an idle session's pool
    threads spin after each run and would steal the cores from the next session."""
    best = {p: dict.fromkeys(threads, float("inf")) for p in paths}
    for _ in range(rounds):
        for path in paths:
            for t in threads:
                sess = session(path, t)
                best[path][t] = min(best[path][t], time_runs(sess, random_feeds(sess),
                                                             min_seconds=budget, min_runs=5))
                del sess
    return best


def latency_subprocess(paths: list[str], threads: list[int], rounds: int = 5,
                       budget: float = 0.15, high_priority: bool = False) -> dict:
    """``latencies`` in a fresh interpreter: nothing else loaded (torch's idle thread pools
    in a benchmark's own process measurably disturb two-thread runs)."""
    cmd = [sys.executable, "-m", "edgekit.converters.estimate.measure", "--latency",
           "--threads", ",".join(map(str, threads)), "--rounds", str(rounds),
           "--budget", str(budget), *(["--realtime"] if high_priority else []), *paths]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"latency probe failed ({done.returncode}): {done.stderr[-2000:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return {p: {int(t): v for t, v in row.items()} for p, row in data.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--threads", default="1", help="a count (memory) or counts (latency)")
    parser.add_argument("--runs", type=int, default=3, help="memory: runs after loading")
    parser.add_argument("--latency", action="store_true", help="time the models instead")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.15)
    parser.add_argument("--realtime", action="store_true")
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    if args.realtime:
        realtime()
    if args.latency:
        print(json.dumps(latencies(args.models, threads, args.rounds, args.budget)))
    else:
        print(json.dumps(probe(args.models[0], threads[0], args.runs)))


if __name__ == "__main__":
    main()
