"""SmoothQuant (Xiao et al. 2023): move per-channel activation outliers into the next layer's
weights, an exact rewrite of the float model.

A transformer's LayerNorm and GELU outputs have a few channels tens of times wider than the
rest (Moonshine's encoder: the widest channel of an MLP's GELU output is 10-60x the median
one). Their int8 scale is per tensor, so the outliers set the step and the other channels get
a few levels. Where the tensor ``X`` is made by a ``Mul`` by a per-channel constant
(LayerNorm's gamma) and read only by matrix products with constant weights ``W``
(``MatMul``, ``Gemm``; through a ``Reshape`` that keeps the channel axis last), dividing the
constant by ``s`` per channel and multiplying row ``k`` of every ``W`` by ``s_k`` computes the
same function: ``(X / s) @ (diag(s) W) = X @ W``. Weights are quantized per output channel,
so a row scaled up costs the weights little; the activation's channels come closer together.

``s_k = max|X_k|^alpha / max|W_k|^(1 - alpha)`` with the maxima of channel ``k`` over the
calibration data and over every reading layer's row ``k`` (SmoothQuant's rule; alpha 0.5 is its
default, as in Intel Neural Compressor's ONNX SmoothQuant that onnxruntime's quantizer calls).
Dead channels keep ``s = 1``. ``Shape`` readers are allowed (the shape does not change).

A Mul by a scalar is not a site: GELU's final ``* 0.5`` is one, and the .tflite writer fuses
``x * 0.5 * (1 + erf(x / sqrt 2))`` into one int8 GELU lookup (``tflite/ops/gelu.py``), exact
from its int8 input; a per-channel divisor there would break that fusion and leave the chain's
int8 pieces, which lose more than the outliers (Moonshine: measured in
docs/measurements/moonshine-int8.md).

A study, not a build stage: on Moonshine it did not help (4.9% of transcripts kept against
9.8% without it, docs/measurements/moonshine-int8.md), so the build never runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ALPHA = 0.5
MIN_RANGE = 1e-6  # a channel or weight row narrower than this is dead: left alone
PRODUCERS = ("Mul",)
SHAPE_ONLY = ("Shape",)


@dataclass(frozen=True)
class Site:
    """One smoothable tensor: made by ``producer`` (a Mul whose input ``const_index`` is a
    constant), read by the matrix products ``readers`` (MatMul / Gemm node names)."""

    tensor: str
    producer: str
    const_index: int
    readers: tuple[str, ...]


def _consumers(graph: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _attr(node: Any, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _last_dim(model: Any, tensor: str) -> int | None:
    for info in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        if info.name == tensor:
            dims = info.type.tensor_type.shape.dim
            return int(dims[-1].dim_value) if dims and dims[-1].HasField("dim_value") else None
    return None


def _weight_readers(model: Any, tensor: str, consumers: dict[str, list[Any]],
                    inits: dict[str, Any]) -> list[Any] | None:
    """The MatMul/Gemm nodes reading ``tensor`` as their data input with a constant weight
    whose rows are its channels, or None when any other reader would see the change."""
    readers: list[Any] = []
    for node in consumers.get(tensor, []):
        if node.op_type in SHAPE_ONLY:
            continue
        if node.op_type == "Reshape":
            channels = _last_dim(model, tensor)
            if channels is None or _last_dim(model, node.output[0]) != channels:
                return None
            through = _weight_readers(model, node.output[0], consumers, inits)
            if through is None:
                return None
            readers += through
            continue
        if node.op_type not in ("MatMul", "Gemm") or node.input[0] != tensor \
                or node.input[1] not in inits or len(inits[node.input[1]].dims) != 2:
            return None
        if node.op_type == "Gemm" and _attr(node, "transA", 0):
            return None
        readers.append(node)
    return readers or None


def find_sites(model: Any) -> list[Site]:
    """Mul-by-constant outputs read only by matrix products with constant weights."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    consumers = _consumers(graph)
    outputs = {o.name for o in graph.output}
    sites = []
    for node in graph.node:
        if node.op_type not in PRODUCERS or node.output[0] in outputs:
            continue
        consts = [i for i, name in enumerate(node.input) if name in inits]
        if len(consts) != 1 or int(np.prod(inits[node.input[consts[0]]].dims)) <= 1:
            continue
        readers = _weight_readers(model, node.output[0], consumers, inits)
        if readers:
            sites.append(Site(node.output[0], node.name, consts[0], tuple(r.name for r in readers)))
    return sites


def channel_maxima(model: Any, tensors: Sequence[str], feeds: Sequence[dict[str, np.ndarray]]
                   ) -> dict[str, np.ndarray]:
    """max |x| per channel (last axis) of each tensor over the feeds, on onnxruntime."""
    from edgekit.converters.core.expose import exposed_bytes, unoptimized

    session = unoptimized(exposed_bytes(model, tensors))
    tops: dict[str, np.ndarray] = {}
    for feed in feeds:
        for name, value in zip(tensors, session.run(list(tensors), feed), strict=True):
            top = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            tops[name] = np.maximum(tops[name], top) if name in tops else top
    return tops


def _weight_rows(node: Any, weight: np.ndarray) -> np.ndarray:
    """The weight with one row per input channel: [K, N]."""
    return weight.T if node.op_type == "Gemm" and _attr(node, "transB", 0) else weight


def smoothing_scales(act_top: np.ndarray, weight_top: np.ndarray, alpha: float) -> np.ndarray:
    """SmoothQuant's per-channel divisor of the activation; 1 where either side is dead."""
    live = (act_top > MIN_RANGE) & (weight_top > MIN_RANGE)
    scales = np.ones_like(act_top, dtype=np.float64)
    scales[live] = act_top[live] ** alpha / weight_top[live] ** (1 - alpha)
    return scales


def _own_initializer(graph: Any, name: str, array: np.ndarray, readers: int) -> str:
    """Write ``array`` as ``name``, or as a new initializer when other nodes share ``name``."""
    from edgekit.converters.graph.names import Names
    from onnx import numpy_helper

    target = name if readers <= 1 else Names(graph).fresh(name + "_smoothed")
    tensor = numpy_helper.from_array(array, target)
    for i, init in enumerate(graph.initializer):
        if init.name == target:
            graph.initializer[i].CopyFrom(tensor)
            return target
    graph.initializer.append(tensor)
    return target


def smooth(model: Any, feeds: Sequence[dict[str, np.ndarray]], alpha: float = ALPHA) -> dict[str, Any]:
    """Smooth every site of ``model`` in place; what was done (for the manifest)."""
    from onnx import numpy_helper

    graph = model.graph
    sites = find_sites(model)
    if not sites:
        return {"sites": 0, "alpha": alpha}
    tops = channel_maxima(model, [s.tensor for s in sites], feeds)
    nodes = {n.name: n for n in graph.node}
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    spreads = []
    for site in sites:
        readers = [nodes[r] for r in site.readers]
        rows = [_weight_rows(r, arrays[r.input[1]]) for r in readers]
        channels = tops[site.tensor].shape[0]
        if any(w.shape[0] != channels for w in rows):
            continue
        weight_top = np.max([np.abs(w).max(axis=1) for w in rows], axis=0)
        scales = smoothing_scales(tops[site.tensor].astype(np.float64), weight_top, alpha)
        before = tops[site.tensor] / max(float(np.median(tops[site.tensor])), MIN_RANGE)
        after = tops[site.tensor] / scales
        spreads.append((float(before.max()), float(after.max() / max(np.median(after), MIN_RANGE))))
        producer = nodes[site.producer]
        const_name = producer.input[site.const_index]
        const = arrays[const_name].astype(np.float64)
        divided = (np.broadcast_to(const, np.broadcast_shapes(const.shape, (channels,))) / scales)
        producer.input[site.const_index] = _own_initializer(
            graph, const_name, divided.astype(arrays[const_name].dtype), uses[const_name])
        for reader, w in zip(readers, rows, strict=True):
            scaled = w.astype(np.float64) * scales[:, None]
            if reader.op_type == "Gemm" and _attr(reader, "transB", 0):
                scaled = scaled.T
            name = reader.input[1]
            reader.input[1] = _own_initializer(graph, name, scaled.astype(arrays[name].dtype),
                                               uses[name])
    return {"sites": len(spreads), "alpha": alpha,
            "spread_before": round(float(np.median([b for b, _ in spreads])), 1) if spreads else None,
            "spread_after": round(float(np.median([a for _, a in spreads])), 1) if spreads else None}
