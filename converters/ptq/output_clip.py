"""A graph output's range narrowed to the values its decode can tell apart.

A detector that leaves its decode to the user (``--postprocess``) often outputs raw score
logits, and the anchors far from any object are very sure: MediaPipe BlazeFace's
``classificators`` span [-465, 3.5] on photos, so one int8 step of that output is 1.84
logits, and every face float scores in (0.5, ~0.71) lands on logit 0, a score of exactly 0.5,
which the decode (``score > 0.5``) drops: int8 kept 91.5% of float's faces on held-out crops
(docs/measurements/blazeface-int8.md). No decision of such a decode depends on how far below
-16 a logit is (a score under 1.2e-7), so a Clip there changes no detection while the
output's grid gets 24x finer (faces kept 99.4%).

Which bound is free is not guessed from the op types: each candidate is tried on the float
outputs of the calibration data and kept only when the user's decode returns the same
detections, boxes and scores, on every sample, and only on the far side of an output whose
other side stays within the bound (``free_bounds``: a score head, not box offsets). The Clip goes after each
layer that computes the output (``output_layers``: through reshapes, transposes and concats,
which move values and compute nothing), where the quantizer and the .tflite writer merge it
into that layer's output range: no op is added to the int8 model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# |bound| candidates, tightest first: a logit of 8 is a score of 0.99966, of 16 one of 1 - 1.1e-7
BOUNDS = (8.0, 12.0, 16.0, 24.0, 32.0, 64.0)
MOVES = frozenset({"Reshape", "Transpose", "Concat", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
COMPUTES = frozenset({"Conv", "Gemm", "MatMul"})
Decode = Callable[[list[np.ndarray]], Sequence[Any]]


def output_layers(model: Any) -> dict[str, list[str]]:
    """Per graph output, the outputs of the Conv/Gemm/MatMul layers whose values it carries
    unchanged (only ``MOVES`` between); outputs reached any other way are left out."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    found: dict[str, list[str]] = {}
    for out in graph.output:
        todo, leaves, ok = [out.name], [], True
        while todo and ok:
            node = producer.get(todo.pop())
            if node is None:
                ok = False
            elif node.op_type in COMPUTES:
                leaves.append(node.output[0])
                ok = readers.get(node.output[0], 0) <= 1  # read only on the way to this output
            elif node.op_type in MOVES:
                todo.extend(node.input[:1] if node.op_type != "Concat" else node.input)
            else:
                ok = False
        if ok and leaves:
            found[out.name] = list(dict.fromkeys(leaves))  # a Concat may join one layer twice
    return found


def same_detections(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal decodes (``metrics.detection.Detections`` per image): the same boxes, scores and
    classes (float32 noise allowed)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.boxes.shape != y.boxes.shape or not np.array_equal(x.classes, y.classes):
            return False
        if not (np.allclose(x.boxes, y.boxes, rtol=1e-6, atol=1e-6)
                and np.allclose(x.scores, y.scores, rtol=1e-6, atol=1e-6)):
            return False
    return True


def free_bounds(outputs: list[np.ndarray], index: int, decode: Decode) -> tuple[float | None, float | None]:
    """The tightest (low, high) from ``BOUNDS`` that output ``index`` can be clipped to without
    changing ``decode``'s detections on any sample; None where no candidate is free or needed."""
    from edgekit.converters.metrics.detection import CONF
    from edgekit.converters.metrics.detection import decode as decoded  # the metric's own reading

    values = outputs[index]
    reference = decoded(outputs, decode, CONF)

    def free(low: float | None, high: float | None) -> bool:
        clipped = list(outputs)
        clipped[index] = np.clip(values, low, high)
        return same_detections(reference, decoded(clipped, decode, CONF))

    # one-sided: a bound only where the other side of the output stays inside it (score
    # logits of rare objects: [-465, 3.5]); an output spread both ways (box offsets, landmarks:
    # [-115, 221]) may carry values the decode uses past any bound on other inputs
    top, bottom = float(values.max()), float(values.min())
    low = next((-b for b in BOUNDS if bottom < -b and top <= b and free(-b, None)), None)
    high = next((b for b in BOUNDS if top > b and bottom >= -b and free(low, b)), None)
    return low, high


def insert_clips(model: Any, layers: dict[str, tuple[float | None, float | None]]) -> int:
    """A Clip after each layer output in ``layers`` (name -> (low, high)), in place: its
    readers read the clipped tensor; a graph output keeps its name (the layer's output is
    renamed instead). Returns the number of Clips added."""
    from onnx import helper, numpy_helper

    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    finals = {o.name for o in graph.output}
    # name -> (the layer's own output, the clipped tensor)
    plan = {name: ((f"{name}_edgekit_raw", name) if name in finals else (name, f"{name}_edgekit_narrowed"))
            for name in layers}
    reads = {name: clipped for name, (_, clipped) in plan.items() if name not in finals}
    nodes = []
    for node in graph.node:
        node.input[:] = [reads.get(i, i) for i in node.input]
        node.output[:] = [plan[o][0] if o in plan else o for o in node.output]
        nodes.append(node)
        for name, (raw, clipped) in plan.items():
            if raw not in node.output:
                continue
            low, high = layers[name]
            if opset < 11:  # Clip's bounds are attributes before opset 11
                bounds = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
                nodes.append(helper.make_node("Clip", [raw], [clipped], name=f"{name}_edgekit_clip", **bounds))
                continue
            inputs = [raw]
            for what, value in (("low", low), ("high", high)):
                if value is None:
                    inputs.append("")
                    continue
                init = f"{name}_edgekit_clip_{what}"
                graph.initializer.append(numpy_helper.from_array(np.asarray(value, np.float32), init))
                inputs.append(init)
            while inputs[-1] == "":
                inputs.pop()
            nodes.append(helper.make_node("Clip", inputs, [clipped], name=f"{name}_edgekit_clip"))
    del graph.node[:]
    graph.node.extend(nodes)
    return len(layers)
