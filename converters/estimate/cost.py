"""Per-target latency and energy model.

Per op (one kernel call after fusion), at ``T`` threads::

    time = overhead(T)
         + max(macs / (mac_rate[kind, dtype] * S(T)), weight_bytes / (bandwidth * B(T)))
         + elements / (element_rate[dtype] * S(T))
    S(T) = 1 + (T - 1) * parallel_efficiency        compute scales with the threads
                                                    (depthwise and elementwise kernels, bound
                                                    by memory, use parallel_efficiency_memory)
    B(T) = 1 + (T - 1) * bandwidth_scaling          DRAM traffic scales less (shared bus)
    overhead(T) = op_overhead + (T - 1) * thread_overhead   dispatch, and waking the pool
MAC kernels always split across the pool; an elementwise op splits only when that is
faster than running it on one thread (runtimes size their work chunks to that end).

Conv, depthwise and gemm kernels run their multiply-accumulates (or, when the weights are
larger than the arithmetic, stream them from memory: batch-1 fully connected layers; not
when all the model's weights fit in the last-level cache, ``cache_mb``, where repeated
inferences find them), then
a separate pass over their output (bias, activation, requantization, layout) at the
elementwise rate. Elementwise ops are that pass alone (``elements`` = element operations).
Kernels do these passes one after the other, so the times add. Each inference adds a
fixed ``run_overhead`` (the runtime's call into the graph, binding inputs and outputs).

Energy per inference is ``power(T) * latency`` with
``power(T) = idle_w + T * (full_load_w - idle_w) / cores``.

Rates come from the profile's ``[cost_model]`` (published figures, or scaled from a board
that has them) or, for ``method = "benchmark"``, from ``edgekit calibrate-host``'s cache
(read by ``host_rates.py``, which sits above this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from edgekit.targets import PowerModel
from edgekit.targets.schema import COST_DTYPES as DTYPES
from edgekit.targets.schema import COST_KINDS, COST_MODEL_KEYS, COST_RATE_KEYS, rate_key

from edgekit.errors import TargetError

from .ops import KINDS, Op

# [cost_model] numeric keys: defined once, in the profile schema the loader validates with
RATE_KEYS = list(COST_RATE_KEYS)
MODEL_KEYS = list(COST_MODEL_KEYS)
assert tuple(KINDS) == COST_KINDS, "estimator op kinds and [cost_model] kinds differ"

PER_KIND = "parallel_efficiency_of_"  # + "conv_f32" ...: measured per kernel kind (host)
# LiteRT runs a 16x8 conv / fully-connected layer (int16 activations, int8 weights: the accuracy
# guard's int16 rung) on its reference kernel whenever the bias is int64, as the 16x8 spec and
# the .tflite writer (tflite/sixteen.py) make it ("Fallback to reference kernel when bias_type is
# int64 as there is no optimized kernel for int64 bias yet", tensorflow/lite/kernels/conv.cc):
# scalar loops, one thread. Measured with LiteRT 2.3 on this 2-core EPYC, one thread, YOLOv8n
# (nudenet 320n) .tflite: int8 all through 25-52 ms for 1013 M MACs (XNNPACK); model.0-4 at 16x8
# (195 M MACs) 694 ms, model.0-9 (394 M MACs) 1506 ms: about 0.27 GMAC/s against 20-40 at int8,
# ~100x (docs/measurements/guard.md). Those layers cost their int8 time x REFERENCE_16X8, one thread.
# A 16x8 FULLY_CONNECTED whose accumulator fits int32 is written with an int32 bias and runs the
# optimized kernel (tflite/sixteen.py, the one rule: ``graph._mark_int32_bias`` asks it): as int8.
REFERENCE_16X8 = 100.0

__all__ = ["DTYPES", "MODEL_KEYS", "PER_KIND", "RATE_KEYS", "CostModel", "power_w", "rate_key"]


@dataclass(frozen=True)
class CostModel:
    values: dict[str, float]  # MODEL_KEYS -> number, in the units their names say
    method: str  # published | scaled | benchmark
    source: str
    per_kind: dict[str, float] = field(default_factory=dict)  # "conv_f32" -> efficiency

    @classmethod
    def from_profile(cls, profile: Any, host_rates: dict[str, Any] | None = None) -> CostModel:
        """The profile's cost model. A ``method = "benchmark"`` profile (``host``) takes its
        rates from ``host_rates``, an entry of the host-rate cache (``host_rates.py``)."""
        cost = profile.cost_model
        section: dict[str, Any] = (
            {} if cost is None else {"method": cost.method, "source": cost.source, **cost.rates})
        if not section:
            raise TargetError(
                f"target {profile.name!r} has no [cost_model] section; the estimator needs one "
                f"with keys {', '.join(MODEL_KEYS)}"
            )
        method = section.get("method", "")
        if method == "benchmark":
            if host_rates is None:
                raise TargetError(f"target {profile.name!r} is costed from this machine's "
                                  "measured rates; run `edgekit calibrate-host` first")
            section = {**section, **host_rates["rates"]}
            source = f"{section.get('source', '')} (cache {host_rates['path']})".strip()
        else:
            source = section.get("source", "")
        missing = [k for k in MODEL_KEYS if k not in section]
        if missing:
            raise TargetError(
                f"target {profile.name!r}: [cost_model] lacks {', '.join(missing)} "
                f"(method {method!r})"
            )
        per_kind = {k[len(PER_KIND):]: float(v) for k, v in section.items()
                    if k.startswith(PER_KIND)}
        return cls({k: float(section[k]) for k in MODEL_KEYS}, method, source, per_kind)

    def op_seconds(self, op: Op, threads: int, cached: bool = False) -> float:
        if op.int16 and not op.int32_bias:  # the 16x8 reference kernel: one thread, x REFERENCE_16X8
            one = replace(op, int16=False)
            return self.op_seconds(one, 1, cached) + (REFERENCE_16X8 - 1) * op.macs / (
                self.values[rate_key(op.kind, "int8")] * 1e9)
        v = self.values
        extra = max(threads, 1) - 1
        overhead = v["op_overhead_us"] * 1e-6
        if op.kind == "alias":
            return overhead
        if op.kind != "elementwise":  # MAC kernels always split across the pool
            overhead += extra * v["thread_overhead_us"] * 1e-6
        speedup = self.speedup(op, threads)
        element_rate = v[rate_key("elementwise", op.dtype)] * 1e9 * speedup
        if op.kind == "elementwise":  # split only when that pays for waking the pool
            alone = op.macs / (element_rate / speedup)
            split = op.macs / element_rate + extra * v["thread_overhead_us"] * 1e-6
            return overhead + min(alone, split)
        mac_rate = v[rate_key(op.kind, op.dtype)] * 1e9 * speedup
        bandwidth = v["bandwidth_gbs"] * 1e9 * (1 + extra * v["bandwidth_scaling"])
        streaming = 0.0 if cached else op.weight_bytes / bandwidth
        compute = max(op.macs / mac_rate, streaming)
        return overhead + compute + op.out_elems / element_rate

    def speedup(self, op: Op, threads: int) -> float:
        """S(T) for this op's kind. A host calibration measures each kernel kind (a kernel
        may even slow down when split); profiles give one figure for compute-bound and one
        for memory-bound (depthwise, elementwise) kernels."""
        memory_bound = op.kind in ("depthwise", "elementwise")
        default = self.values["parallel_efficiency_memory" if memory_bound
                              else "parallel_efficiency"]
        efficiency = self.per_kind.get(f"{op.kind}_{DTYPES[op.dtype]}", default)
        return max(1 + (max(threads, 1) - 1) * efficiency, 0.3)

    def latency(self, ops: list[Op], threads: int) -> float:
        """Seconds per inference at batch 1 (the fixed cost of one run call included)."""
        cached = self.cached(ops)
        return self.values["run_overhead_us"] * 1e-6 + sum(
            self.op_seconds(op, threads, cached) for op in ops)

    def cached(self, ops: list[Op]) -> bool:
        """True when every weight fits in the last-level cache together."""
        return sum(op.weight_bytes for op in ops) <= self.values["cache_mb"] * 2**20

    def latency_by_kind(self, ops: list[Op], threads: int) -> dict[str, float]:
        result: dict[str, float] = {}
        cached = self.cached(ops)
        for op in ops:
            result[op.kind] = result.get(op.kind, 0.0) + self.op_seconds(op, threads, cached)
        return result

    def ram_bytes(self, weight_bytes: int, activation_bytes: int) -> int:
        """Peak resident memory while loading and running: weights (held ``weight_copies``
        times at the peak of loading), the activation arena and the runtime itself."""
        v = self.values
        return int(weight_bytes * v["weight_copies"] + activation_bytes
                   + v["runtime_overhead_mb"] * 2**20)


def power_w(profile: Any, threads: int) -> float:
    """Board power with ``threads`` cores busy (the runtime's ``PowerModel``: one formula)."""
    return PowerModel.from_profile(profile).watts(threads)
