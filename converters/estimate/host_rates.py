"""Host rates for the ``host`` cost model (not quantization calibration, which is
``stages/calibrate.py``): about half a minute of onnxruntime micro-benchmarks, cached per machine.

What is measured (models in ``microbench``), each at 1 and 2 threads, in two whole passes
keeping each figure's best (a burst of load from another process spoils one pass only):

* per-op rates from chains of identical ops (long minus short chain, so fixed costs and
  the float <-> int8 conversions at the ends cancel): elementwise Add, dense 3x3 conv, an
  RGB stem conv, depthwise 3x3 conv, MatMul, in float32 and int8 QDQ (which onnxruntime
  fuses into QLinearAdd / QLinearConv / QLinearMatMul); the 2-thread speedup of each kind;
* the per-op dispatch cost on a varied chain of small ops (MatMul, Sigmoid, Softmax,
  LayerNorm, Reshape...), the fixed cost of a run, weight streaming from memory (a batch-1
  MatMul over 64 MB of weights), the last-level cache size (sysfs);
* in fresh subprocesses: the resident memory of a session and per weight byte.

The cache lives in ``$XDG_CACHE_HOME/edgekit`` (default ``~/.cache/edgekit``), keyed by CPU
model, core count and onnxruntime version; ``edgekit calibrate-host`` refreshes it.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.cache import user_cache_dir

from .cost import PER_KIND, CostModel
from .graph import read_graph
from .measure import memory, random_feeds, session, time_runs
from .microbench import chain, gemv, mixed_chain
from .ops import build_ops

CACHE_NAME = "host_cost_model.json"
CHAIN = 4  # ops in the long chain; rates come from (t[CHAIN] - t[1]) / (CHAIN - 1)


def cache_path() -> Path:
    return user_cache_dir() / CACHE_NAME


def host_key() -> str:
    import onnxruntime

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu} | {os.cpu_count()} cpus | onnxruntime {onnxruntime.__version__}"


def _per_op(op: str, int8: bool, threads: int, rng: np.random.Generator,
            rounds: int = 3) -> tuple[float, int, int]:
    """Seconds of one op in a chain (fixed costs cancelled), its work and output elements.

    Long and short chains are timed alternately for a few rounds, keeping each one's best:
    a burst of load from another process then spoils one round, not the figure.
    """
    long_model, work, elements = chain(op, CHAIN, int8, rng)
    short_model = chain(op, 1, int8, rng)[0]
    budget = 0.05 if op in ("conv", "gemm") else 0.03
    return max(_best_of([long_model, short_model], threads, budget, rounds, CHAIN - 1), 1e-9), \
        work, elements


def _best_of(models: list[bytes], threads: int, budget: float, rounds: int,
             divisor: int = 1) -> float:
    """(best time of models[0] - best time of models[1]) / divisor, or models[0]'s best.

    One session at a time, closed before the next opens: an idle session's pool threads
    spin for a while after each run and would steal the cores from the next one.
    """
    best = [float("inf")] * len(models)
    for _ in range(rounds):
        for index, model in enumerate(models):
            sess = session(model, threads)
            best[index] = min(best[index], time_runs(sess, random_feeds(sess),
                                                     min_seconds=budget))
            del sess
    return (best[0] - (best[1] if len(best) > 1 else 0.0)) / divisor


def last_level_cache_mb() -> float:
    """Size of this CPU's largest cache level, from sysfs (0 when it does not say)."""
    best = 0.0
    for size in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = size.read_text().strip().upper()
        units = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}
        try:
            best = max(best, float(text.rstrip("KMG")) * units.get(text[-1:], 1 / 2**20))
        except ValueError:
            continue
    return best


def copy_gbs() -> float:
    """Single-thread numpy copy bandwidth (read + write) of a 64 MB buffer, best of five."""
    src = np.ones(8 * 2**20, np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best / 1e9


def _memory_figures(rng: np.random.Generator) -> dict[str, float]:
    """Session overhead (a tiny model) and resident bytes per weight byte (conv stacks whose
    weights dwarf their activations: 16 layers of 3x3, 9 MB float32 or 9 MB int8)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, model in (("tiny", gemv(8, 8)),
                            ("f32", chain("conv", 16, False, rng, channels=128, size=4)[0]),
                            ("i8", chain("conv", 16, True, rng, channels=256, size=4)[0])):
            paths[name] = Path(tmp, f"{name}.onnx")
            paths[name].write_bytes(model)
        delta = {k: min(memory(str(p))["delta_bytes"] for _ in range(2)) for k, p in paths.items()}
    weights = {"f32": 16 * 128 * 128 * 9 * 4, "i8": 16 * 256 * 256 * 9}
    copies = {k: max(delta[k] - delta["tiny"], 0) / weights[k] for k in weights}
    return {"runtime_overhead_mb": delta["tiny"] / 2**20,
            "weight_copies": float(np.mean(list(copies.values()))),
            "_copies": copies}


def _dispatch_costs(values: dict[str, float]) -> dict[str, float]:
    """Per-op overhead from the varied chain: measured time per step minus the modelled
    work of its ops (rates measured above), shared among its kernel calls."""
    import onnx

    steps = 9
    models = [mixed_chain(steps), mixed_chain(1)]
    ops = [build_ops(read_graph(onnx.load_model_from_string(m))) for m in models]
    per_kind = {k[len(PER_KIND):]: v for k, v in values.items() if k.startswith(PER_KIND)}
    work_only = CostModel({**values, "op_overhead_us": 0.0, "thread_overhead_us": 0.0,
                           "run_overhead_us": 0.0}, "benchmark", "", per_kind)
    measured = _best_of(models, 1, 0.05, 5, steps - 1)
    work = (work_only.latency(ops[0], 1) - work_only.latency(ops[1], 1)) / (steps - 1)
    op_overhead = max((measured - work) / len(ops[1]), values["op_overhead_us"] * 1e-6)
    return {"op_overhead_us": op_overhead * 1e6}


def calibrate(report: Any = None, passes: int = 2) -> dict[str, Any]:
    """Run every micro-benchmark (about half a minute) and return the cost-model values.

    Order matters: the per-op overhead comes first, then the elementwise rate, because each
    MAC rate is net of the op's overhead and of its output pass at that rate.
    """
    say = report or (lambda _m: None)
    rng = np.random.default_rng(0)
    two_threads = (os.cpu_count() or 1) > 1
    raw: dict[str, Any] = {}
    kinds = ("tiny", "elementwise", "conv", "stem", "depthwise", "gemm", "small_gemm")
    best: dict[tuple[str, str, int], float] = {}
    shapes: dict[str, tuple[int, int]] = {}
    # whole passes over every benchmark, keeping each one's best: a burst of load from
    # another process then spoils one pass of one benchmark, not the figure
    for _ in range(passes):
        for op in kinds:
            for tag in ("f32",) if op in ("tiny", "small_gemm") else ("f32", "i8"):
                for threads in (1, 2) if two_threads else (1,):
                    seconds, work, elements = _per_op(op, tag == "i8", threads, rng)
                    key = (op, tag, threads)
                    best[key] = min(best.get(key, float("inf")), seconds)
                    shapes[op] = (work, elements)

    def measure(op: str, tag: str) -> tuple[float, float, int, int]:
        one = best[(op, tag, 1)]
        two = best.get((op, tag, 2), one)
        work, elements = shapes[op]
        raw[f"{op}_{tag}"] = {"work": work, "elements": elements, "seconds_1t": one,
                              "seconds_2t": two}
        return one, two, work, elements

    overhead = measure("tiny", "f32")[0]
    values: dict[str, float] = {"op_overhead_us": overhead * 1e6}
    speedups: dict[str, float] = {}
    for op in kinds[1:-1]:
        for tag in ("f32", "i8"):
            one, two, work, elements = measure(op, tag)
            speedups[f"{op}_{tag}"] = one / two
            if op == "elementwise":
                values[f"elementwise_gops_{tag}"] = work / max(one - overhead, one * 0.1) / 1e9
                rate = values[f"elementwise_gops_{tag}"]
            else:
                net = one - overhead - elements / (values[f"elementwise_gops_{tag}"] * 1e9)
                if op == "stem":  # take off the 1x1 conv that returns to 3 channels
                    net -= overhead + (work / 9 / values[f"conv_gmacs_{tag}"]
                                       + elements * 3 / 16 / values[f"elementwise_gops_{tag}"]
                                       ) / 1e9
                values[f"{op}_gmacs_{tag}"] = rate = work / max(net, one * 0.1) / 1e9
            unit = "Gop/s" if op == "elementwise" else "GMAC/s"
            say(f"  {op:12s} {tag:4s} {rate:8.2f} {unit}   x{one / two:.2f} at 2 threads")
    # speedup S(2) = 1 + efficiency, for compute-bound and for memory-bound kernels; the
    # median shrugs off one kernel that did not split

    def efficiency_of(kinds: tuple[str, ...]) -> float:
        found = [v for k, v in speedups.items() if k.rsplit("_", 1)[0] in kinds]
        return min(max(float(np.median(found)) - 1, 0.0), 1.0)

    efficiency = efficiency_of(("conv", "stem", "gemm"))
    streaming = gemv(4096, 4096)
    stream1 = _best_of([streaming], 1, 0.1, 3)
    stream2 = _best_of([streaming], 2, 0.1, 3) if two_threads else stream1
    single = _best_of([chain("tiny", 1, False, rng)[0]], 1, 0.05, 3)
    values.update(
        bandwidth_gbs=4096 * 4096 * 4 / stream1 / 1e9,
        parallel_efficiency=efficiency,
        parallel_efficiency_memory=efficiency_of(("depthwise", "elementwise")),
        bandwidth_scaling=min(max(stream1 / stream2 - 1, 0.0), 1.0),
        thread_overhead_us=0.0,
        run_overhead_us=max(single - overhead, 0.0) * 1e6,
        runtime_overhead_mb=0.0, weight_copies=0.0, cache_mb=last_level_cache_mb(),
    )
    for name, factor in speedups.items():  # S(2) = 1 + efficiency, per kernel kind
        values[f"{PER_KIND}{name}"] = min(max(factor - 1, -0.7), 1.5)
    values.update(_dispatch_costs(values))
    # waking the pool: a small MatMul split in two costs more than half its single-thread time
    small1, small2, _, _ = measure("small_gemm", "f32")
    values["thread_overhead_us"] = max(small2 - overhead - (small1 - overhead) / (
        1 + values[f"{PER_KIND}gemm_f32"]), 0.0) * 1e6
    raw["copy_gbs"] = copy_gbs()
    raw["speedups_2t"] = speedups
    say(f"  weight streaming {values['bandwidth_gbs']:.1f} GB/s (x{stream1 / stream2:.2f} at 2 "
        f"threads; numpy copy {raw['copy_gbs']:.1f} GB/s), parallel efficiency "
        f"{efficiency:.2f} (memory-bound {values['parallel_efficiency_memory']:.2f}), op "
        f"overhead {values['op_overhead_us']:.2f} us (+{values['thread_overhead_us']:.2f} us "
        f"per MAC kernel and extra thread), run overhead "
        f"{values['run_overhead_us']:.1f} us")
    memory_figures = _memory_figures(rng)
    raw["weight_copies"] = memory_figures.pop("_copies")
    values.update(memory_figures)
    say(f"  runtime overhead {values['runtime_overhead_mb']:.1f} MB, weights held "
        f"x{values['weight_copies']:.2f} (float32 x{raw['weight_copies']['f32']:.2f}, int8 "
        f"x{raw['weight_copies']['i8']:.2f}) at the peak")
    return {"rates": values, "raw": raw}


def is_cached() -> bool:
    """True when this machine already has a cached calibration."""
    try:
        return host_key() in json.loads(cache_path().read_text())
    except (OSError, json.JSONDecodeError):
        return False


def load_or_calibrate(run: bool = True, force: bool = False,
                      report: Any = None) -> dict[str, Any]:
    """Cached host rates for this machine; calibrates (and caches) when missing."""
    from edgekit.errors import TargetError

    path = cache_path()
    key = host_key()
    cache: dict[str, Any] = {}
    if path.is_file():
        try:
            cache = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            cache = {}
    if key in cache and not force:
        return {**cache[key], "path": str(path), "key": key}
    if not run:
        raise TargetError(
            f"no host calibration for {key!r} in {path}; run `edgekit calibrate-host`"
        )
    start = time.perf_counter()
    result = calibrate(report)
    entry = {"rates": result["rates"], "raw": result["raw"],
             "seconds": round(time.perf_counter() - start, 2),
             "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    cache[key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".host_cost_model.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(cache, handle, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return {**entry, "path": str(path), "key": key}
