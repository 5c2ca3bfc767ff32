"""How far an int8 model's outputs move when its float layers sum in another order: the
model's own share of the cross-ISA tolerance (``tolerance.py``).

Its int8 layers give the same bytes on both sides (an exact int32 sum on Arm, exact enough in
float32 on the host's unfused path: EfficientNet-Lite0 all-int8 matched bit for bit on the
emulated A72). A float layer the guard kept (a Conv, Gemm or MatMul whose weight is not
behind a DequantizeLinear) sums in another order on Arm, and where its result lands near a
rounding tie of the QuantizeLinear after it, one step flips; inside a deep net that flip can
grow on its way to the output: EfficientNet-Lite0 with a float stem Conv landed 96.9-98.5%
within one step on the emulated A72 where the zoo's depth rule asked 98%.

``jittered`` scales the result of each float layer, before its QuantizeLinear, by
``1 +- sqrt(K) x 2^-24`` (K: the terms each element sums; the typical float32 rounding error
of such a sum, Higham and Mary's probabilistic bound; an independent random sign per element,
fixed seed), and ``jitter_moves`` runs the test vectors through both models on the host's
exact path: what moves there is what another summation order moves. That stem Conv: 3.4% of
the logits beyond one step, at most 3, on 8 held-out photos, against 96.9% within one step,
max 3, on the A72. The host and the board can each be that far from a third order, so
``tolerance.py`` allows twice it (the triangle inequality).
"""

from __future__ import annotations

from typing import Any

import numpy as np

UNIT_ROUNDOFF = 2.0 ** -24  # float32
SEED = 0
_REDUCING = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
_POOLING = {"GlobalAveragePool", "ReduceMean", "AveragePool", "ReduceSum"}


def reduction_length(node: Any, inits: dict[str, Any], shapes: dict[str, tuple[int, ...]],
                     producer: dict[str, Any]) -> int:
    """Terms each output element of ``node`` sums (1 for elementwise ops)."""
    def weight_shape(name: str) -> tuple[int, ...] | None:
        dq = producer.get(name)
        source = dq.input[0] if dq is not None and dq.op_type == "DequantizeLinear" else name
        return tuple(inits[source].dims) if source in inits else shapes.get(name)

    if node.op_type in ("Conv", "ConvTranspose"):
        w = weight_shape(node.input[1])
        return int(np.prod(w[1:])) if w else 1
    if node.op_type in ("Gemm", "MatMul"):
        a = shapes.get(node.input[0])
        return int(a[-1]) if a else 1
    if node.op_type in _POOLING:
        x = shapes.get(node.input[0])
        if node.op_type == "AveragePool":
            kernel = next((list(at.ints) for at in node.attribute if at.name == "kernel_shape"),
                          [1])
            return int(np.prod(kernel))
        return int(np.prod(x[2:])) if x and len(x) > 2 else 1
    return 1


def float_layer(start: Any, producer: dict[str, Any]) -> Any:
    """The float compute layer (Conv, Gemm, MatMul with a weight not behind a
    DequantizeLinear) whose result reaches ``start``'s output through float ops only, or
    None: an int8 layer's result is the same on both kernel sets (its sum is exact in int32
    on Arm, exact enough in float32 here: EfficientNet-Lite0 all-int8 matched bit for bit on
    the emulated A72)."""
    node, hops = start, 0
    while node is not None and hops < 8:
        if node.op_type in _REDUCING:
            weight = producer.get(node.input[1]) if len(node.input) > 1 else None
            return node if weight is None or weight.op_type != "DequantizeLinear" else None
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") or not node.input:
            return None
        node, hops = producer.get(node.input[0]), hops + 1
    return None


def jittered(model: Any) -> Any:
    """A copy of the QDQ ``model`` with the input of each QuantizeLinear after a float layer
    scaled by ``1 +- sqrt(K) x 2^-24`` (see the module doc); None when there is no float
    layer."""
    import onnx
    from onnx import helper, numpy_helper

    found = {o: n for n in model.graph.node for o in n.output}
    if not any(n.op_type == "QuantizeLinear" and n.input and
               float_layer(found.get(n.input[0]), found) is not None for n in model.graph.node):
        return None  # all int8: nothing to nudge (and no shape inference to pay)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    try:
        inferred = onnx.shape_inference.infer_shapes(copy).graph
        shapes = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
                  for vi in [*inferred.input, *inferred.value_info]
                  if all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
    except Exception:  # noqa: BLE001 - shapes only refine K; without them K falls back to 1
        shapes = {}
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    rng = np.random.default_rng(SEED)
    nodes = []
    for node in graph.node:
        source = producer.get(node.input[0]) if node.input else None
        layer = float_layer(source, producer) if node.op_type == "QuantizeLinear" else None
        if layer is not None:
            k = max(2, reduction_length(layer, inits, shapes, producer))
            # an independent sign per element where the shape is known (errors of separate
            # sums do not share a direction), one per tensor otherwise
            shape = shapes.get(node.input[0]) or ()
            signs = rng.choice([-1.0, 1.0], size=shape[1:]) if shape else rng.choice([-1.0, 1.0])
            factor = 1.0 + signs * np.sqrt(k) * UNIT_ROUNDOFF
            name = f"{node.input[0]}_edgekit_jitter"
            graph.initializer.append(numpy_helper.from_array(
                np.asarray(factor, np.float32), f"{name}_factor"))
            nodes.append(helper.make_node("Mul", [node.input[0], f"{name}_factor"], [name],
                                          name=name))
            node.input[0] = name
        nodes.append(node)
    if len(nodes) == len(graph.node):
        return None
    del graph.node[:]
    graph.node.extend(nodes)
    return copy


def jitter_moves(model: Any, feeds: dict[str, np.ndarray], outputs: list[str],
                 batched: bool = True) -> dict[str, np.ndarray]:
    """Per output, |jittered - recorded| on ``feeds`` (one sample at a time along axis 0, or
    as they are when not ``batched``: inputs with samples on another axis) in the output's
    own units, both on the host's exact int8 path."""
    from ..runner import session

    nudged = jittered(model)
    if nudged is None:
        return {}
    base = session(model.SerializeToString(), threads=1, exact_int8=True)
    moved = session(nudged.SerializeToString(), threads=1, exact_int8=True)
    names = [n for n in outputs if n in {o.name for o in base.get_outputs()}]
    count = len(next(iter(feeds.values()))) if batched else 1
    found: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for i in range(count):
        sample = {k: v[i:i + 1] for k, v in feeds.items()} if count > 1 else feeds
        for n, a, b in zip(names, base.run(names, sample), moved.run(names, sample), strict=True):
            if np.issubdtype(np.asarray(a).dtype, np.number):
                found[n].append(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))
    return {n: np.concatenate([v.reshape(-1) for v in rows]) for n, rows in found.items() if rows}
