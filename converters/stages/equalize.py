"""Equalize: cross-layer equalization (Nagel et al. 2019, "Data-Free Quantization") of the
float model, so that one int8 scale per activation tensor fits every channel.

A pair ``Conv1 -> act -> Conv2`` where ``act`` is scale-equivariant (``act(x / s) = act(x) / s``
for s > 0: Relu, LeakyRelu, or no activation) computes the same function when output channel
``c`` of Conv1 (weights and bias) is divided by ``s_c`` and input channel ``c`` of Conv2 is
multiplied by it. The activation between them is quantized per tensor, so channels with a
small range get few int8 steps; scaling them up to the widest channel's range gives every
channel the whole grid. When Conv2 is depthwise (one filter per channel) its weights are
quantized per channel, so the rescale costs Conv2 nothing: the ranges are equalized fully
(``s_c = range_c / max range``), measured on calibration data (the data-aware variant).

With headroom: a channel's maximum measured on a few calibration samples underestimates the
maximum it reaches on new inputs (on the trained MobileNet-style digits net, 32 samples: the
median channel's maximum on 797 unseen digits was 1.05-1.24x its calibrated one, the worst
2.3x), while the tensor's range is set by its widest channel alone. Scaling every channel all
the way to that range would clip almost every channel on new inputs (with 32 samples this lost
a digit to onnxruntime's plain min-max); so channels are raised only to ``1 / HEADROOM`` of the
range, and channels already above it are left alone. That gives up at most one bit of the
equalization's gain on the raised channels.

Relu6 (``Clip(0, 6)``) is NOT scale-equivariant: ``clip(x / s, 0, 6) != clip(x, 0, 6) / s``.
AIMET replaces Relu6 by Relu before equalizing, which changes the float model; here such pairs
are left alone and counted (``skipped_clip``), so the float outputs stay equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..context import BuildContext
from ..pipeline import Stage, StageConfig

EQUIVARIANT = ("Relu", "LeakyRelu")
# The channel ranges come from every calibration sample, the ones the tensor's int8 range is
# calibrated on: measured on the first 64 of 256, a raised channel went past the tensor's range
# on the other 192 and widened it for every channel (tools/benchmarks/bench_ptq.py --data mnist --seed 2,
# MobileNet-style: cosine 0.99965 and 90.87% agreement near the boundary, below onnxruntime's
# 0.99972 / 92.45%; on all 256: 0.99976 / 95.56%).
CHUNK = 64  # samples per float run when the batch axis is free (memory, not statistics)
MIN_SCALE = 1e-4  # a dead channel (range ~0) is not blown up by more than this
HEADROOM = 2.0  # raised channels reach 1/HEADROOM of the tensor's range (see above)


@dataclass(frozen=True)
class EqualizeConfig(StageConfig):
    enabled: bool = True


@dataclass(frozen=True)
class Pair:
    first: str  # Conv1 node name
    act: str | None  # the activation node between them, None when Conv1 feeds Conv2 directly
    second: str  # Conv2 node name (depthwise)
    tensor: str  # the activation tensor whose channel ranges are equalized


def _attr(node: Any, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return default


def find_pairs(model: Any) -> tuple[list[Pair], int]:
    """Conv -> (Relu | LeakyRelu | nothing) -> depthwise Conv chains with constant weights and
    single consumers; also the number of chains skipped because a Clip (Relu6) sits between."""
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    shapes = {t.name: list(t.dims) for t in graph.initializer}

    def only_consumer(tensor: str) -> Any:
        found = consumers.get(tensor, [])
        return found[0] if len(found) == 1 and tensor not in outputs else None

    def depthwise(node: Any) -> bool:
        if node.op_type != "Conv" or len(node.input) < 2 or node.input[1] not in inits:
            return False
        w = shapes[node.input[1]]
        return len(w) == 4 and w[1] == 1 and _attr(node, "group", 1) > 1

    pairs: list[Pair] = []
    skipped = 0
    for node in graph.node:
        if node.op_type != "Conv" or len(node.input) < 2 or node.input[1] not in inits:
            continue
        if len(node.input) > 2 and node.input[2] and node.input[2] not in inits:
            continue
        nxt = only_consumer(node.output[0])
        if nxt is None:
            continue
        act, tensor = None, node.output[0]
        if nxt.op_type in EQUIVARIANT or nxt.op_type == "Clip":
            act, tensor = nxt, nxt.output[0]
            nxt = only_consumer(tensor)
        if nxt is None or not depthwise(nxt) or nxt.input[0] != tensor:
            continue
        if act is not None and act.op_type == "Clip":
            skipped += 1
            continue
        pairs.append(Pair(node.name, act.name if act is not None else None, nxt.name, tensor))
    return pairs, skipped


def channel_ranges(model: Any, tensors: list[str], feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Max |value| per channel (axis 1) of each tensor over the feeds, from one float run."""
    from edgekit.converters.core.expose import Probe, ort_defaults

    probe = Probe(model, tensors, opener=ort_defaults)
    ranges = {name: np.zeros(0, np.float64) for name in tensors}
    for feed in feeds:
        for name, v in probe.run(feed).items():
            axes = tuple(i for i in range(v.ndim) if i != 1)
            m = np.abs(v).max(axis=axes).astype(np.float64)
            ranges[name] = m if ranges[name].size == 0 else np.maximum(ranges[name], m)
    return ranges


def equalize(model: Any, feeds: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Rescale every equalizable pair of ``model`` in place; returns what was done."""
    from onnx import numpy_helper

    pairs, skipped = find_pairs(model)
    report: dict[str, Any] = {"pairs": len(pairs), "skipped_clip": skipped}
    if not pairs:
        return report
    nodes = {n.name: n for n in model.graph.node}
    inits = {t.name: t for t in model.graph.initializer}
    ranges = channel_ranges(model, [p.tensor for p in pairs], feeds)
    spread: list[float] = []
    for pair in pairs:
        r = ranges[pair.tensor]
        top = float(r.max())
        if top <= 0:
            continue
        s = np.clip(HEADROOM * r / top, MIN_SCALE, 1.0)
        s[r <= 0] = 1.0
        first, second = nodes[pair.first], nodes[pair.second]
        w1 = numpy_helper.to_array(inits[first.input[1]]).astype(np.float64)
        w2 = numpy_helper.to_array(inits[second.input[1]]).astype(np.float64)
        if w1.shape[0] != s.size or w2.shape[0] % s.size:
            continue
        w1 /= s.reshape(-1, *([1] * (w1.ndim - 1)))
        w2 *= np.repeat(s, w2.shape[0] // s.size).reshape(-1, *([1] * (w2.ndim - 1)))
        _replace(inits[first.input[1]], w1)
        _replace(inits[second.input[1]], w2)
        if len(first.input) > 2 and first.input[2]:
            _replace(inits[first.input[2]], numpy_helper.to_array(inits[first.input[2]]) / s)
        live = r[r > 0]
        spread.append(float(live.max() / np.median(live)))  # after: <= HEADROOM
    # how uneven the channels were: widest range / median range, median over the pairs
    report["median_range_spread_before"] = round(float(np.median(spread)), 3) if spread else None
    return report


def _replace(tensor: Any, values: np.ndarray) -> None:
    """Overwrite an initializer's data in place, keeping its name and dtype (float32)."""
    from onnx import numpy_helper

    tensor.CopyFrom(numpy_helper.from_array(values.astype(np.float32), tensor.name))


class Equalize(Stage):
    name = "equalize"
    Config = EqualizeConfig
    config: EqualizeConfig
    requires = frozenset({"calib", "float_path", "inputs"})
    provides = frozenset({"float_model", "float_path", "quantization"})

    def __init__(self) -> None:
        super().__init__()
        self.done: dict[str, Any] = {}

    def configure(self, ctx: BuildContext) -> EqualizeConfig:
        return EqualizeConfig(ctx.config.equalize)

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return {"enabled": self.config.enabled, **self.done}

    def applies(self, ctx: BuildContext) -> bool:
        return self.config.enabled

    def run(self, ctx: BuildContext) -> None:
        import onnx

        from .calibrate import feeds

        model = onnx.load(str(ctx.float_path))
        batched = not all(isinstance(i["shape"][i.get("batch_axis", 0)], int) for i in ctx.inputs)
        n = len(ctx.calib)
        self.done = equalize(model, [f for s in range(0, n, CHUNK)
                                     for f in feeds(ctx.calib, batched, s, min(n, s + CHUNK))])
        ctx.quantization["equalization"] = self.done
        if not self.done["pairs"]:
            return
        path = ctx.workdir / "float-equalized.onnx"
        onnx.save(model, str(path))
        ctx.float_model, ctx.float_path = model, path
        ctx.report(f"  cross-layer equalization: {self.done['pairs']} conv pair(s) rescaled"
                   + (f", {self.done['skipped_clip']} skipped (Relu6 is not scale-equivariant)"
                      if self.done["skipped_clip"] else ""))
