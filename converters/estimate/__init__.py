"""Offline estimator: params, MACs, memory, latency and energy of a model on a target.

Modules, one job each: ``graph`` (the ONNX graph as a runtime executes it, float32 or
int8), ``tflite_graph`` (a ``.tflite``'s ops as that same graph), ``ops`` (fused kernel calls, their work and bytes), ``liveness`` (peak activation
memory), ``cost`` (per-target latency/energy model), ``host_rates`` (host micro-benchmark
and cache of measured rates; not the quantization calibration of ``stages/calibrate.py``), ``measure``
(onnxruntime latency and peak-RSS probes), ``uncosted`` (ops the cost model cannot price,
timed on the host: control flow, other domains), ``estimator`` (the API), ``table`` (the text
report). onnx/onnxruntime are imported inside functions only.

Layers, bottom up (a module imports only from layers below it): ``types`` -> ``quantized``
(rewrites) -> ``graph``, ``tflite_graph`` (readers) -> ``ops``, ``liveness`` -> ``cost`` -> ``host_rates`` (with
``measure``, ``microbench``, which import nothing here; ``uncosted``, which imports ``measure``)
-> ``estimator`` (the orchestrator),
``table``.
"""

from __future__ import annotations

from .cost import MODEL_KEYS, CostModel, power_w
from .estimator import Estimate, Variant, cost_model_for, estimate

__all__ = ["MODEL_KEYS", "CostModel", "Estimate", "Variant", "cost_model_for", "estimate", "power_w"]
