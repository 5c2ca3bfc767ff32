"""Rank the guard's candidates by what each does to the task: restored alone, on a subset.

The int8 model is onnxruntime's QDQ graph. Restoring one quantized tensor to float is a graph
edit, not a rebuild: an activation's readers take the float tensor the QuantizeLinear read
(the Q/DQ pair bypassed); a weight's readers take its float initializer. Each restored model
runs on a fixed subset of the validation samples (those int8 gets most wrong first, so that
a flip the restore fixes is seen) and is scored with the build's task metric; the continuous
output SQNR breaks ties. A candidate helps when the task figure falls.

Which tensors are candidates (the work budget is candidates x samples, never seconds):

* the **head**: every quantized tensor within ``HEAD_DEPTH`` nodes of a graph output (a
  detector's class-score branch, a segmentation head, the classifier), where round 2's
  ranking, ordered by SQNR near the input, never looked;
* the rest by **local SQNR** (``guard.local_sqnr``: one float run, each tensor against itself on
  its int8 grid), lowest first, up to ``CANDIDATES`` in all.

``ceiling`` restores every candidate at once: the most the guard's ladder could win with them
(float is its top rung). When even that misses the budget, the guard stops at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.runner import run_dataset, session

from ..context import Dataset
from .guard import FUSED_ACTIVATIONS, Q_SUFFIX, Sensitivity, fix_set, local_sqnr, sqnr_db

CANDIDATES = 24   # tensors restored one at a time
SUBSET = 8        # validation samples each is scored on (the worst first)
HEAD_DEPTH = 8    # nodes from a graph output that count as the head
SEGMENTS = 6      # contiguous stretches of the graph's activations, each one candidate
Score = Callable[[list[np.ndarray], list[np.ndarray]], float]  # (float outputs, int8 outputs) -> points


@dataclass(frozen=True)
class Restorable:
    tensor: str       # the float model's tensor name
    kind: str         # "activation" | "weight"
    dq_output: str    # the DequantizeLinear output its readers use in the QDQ model
    source: str       # what they read instead: the float activation, or the float weight's name
    # the float model's activation node (Relu, Clip) onnxruntime folded into the QuantizeLinear's
    # clamp: bypassing the pair must apply it again
    reapply: str = ""


def restorables(qdq: Any, float_model: Any) -> dict[str, Restorable]:
    """Every quantized tensor of the QDQ model that one edit can restore."""
    producer = {o: n for n in qdq.graph.node for o in n.output}
    float_producer = {o: n for n in float_model.graph.node for o in n.output}
    inits = {i.name for i in qdq.graph.initializer}
    # biases (int32, scale from input x weight) add no measurable noise: weights of rank >= 2 only
    floats = {i.name for i in float_model.graph.initializer if len(i.dims) >= 2}
    found: dict[str, Restorable] = {}
    for node in qdq.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        source = node.input[0]
        if source in inits:  # a weight: <name>_quantized
            name = source.removesuffix("_quantized")
            if name in floats and name not in found:
                found[name] = Restorable(name, "weight", node.output[0], f"{name}__ek_float")
            continue
        q = producer.get(source)
        if q is None or q.op_type != "QuantizeLinear" or q.input[0] in inits:
            continue
        name = q.input[0].removesuffix(Q_SUFFIX)
        was, now = float_producer.get(name), producer.get(q.input[0])
        folded = (was is not None and was.op_type in FUSED_ACTIVATIONS
                  and (now is None or now.op_type != was.op_type))
        found.setdefault(name, Restorable(name, "activation", node.output[0], q.input[0],
                                          was.name if folded and was is not None else ""))
    return found


def restored(qdq: Any, float_model: Any, items: list[Restorable]) -> bytes:
    """The QDQ model with ``items`` restored to float (readers rewired; weights added)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(qdq)
    have = {i.name for i in copy.graph.initializer}
    weights = {i.name: i for i in float_model.graph.initializer}
    float_nodes = {n.name: n for n in float_model.graph.node}
    from edgekit.converters.graph.names import Names

    names = Names(copy.graph)  # two items may re-apply one folded activation: fresh names
    rewire = {}
    added = []
    for item in items:
        rewire[item.dq_output] = item.source
        if item.reapply:  # the folded activation, on the float tensor the Q read
            node = onnx.NodeProto()
            node.CopyFrom(float_nodes[item.reapply])
            node.name, node.input[0] = names.fresh(f"{node.name}__ek_restored"), item.source
            node.output[:] = [names.fresh(f"{item.tensor}__ek_restored")]
            for extra in node.input[1:]:
                if extra and extra in weights and extra not in have:
                    copy.graph.initializer.append(weights[extra])
                    have.add(extra)
            added.append(node)
            rewire[item.dq_output] = node.output[0]
        if item.kind == "weight" and item.source not in have:  # under its own name: ORT may reuse the old
            init = onnx.TensorProto()
            init.CopyFrom(weights[item.tensor])
            init.name = item.source
            copy.graph.initializer.append(init)
            have.add(item.source)
    for node in copy.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in rewire:
            continue
        node.input[:] = [rewire.get(i, i) for i in node.input]
    for node in added:
        _insert_after_producer(copy.graph, node)
    outputs = {o.name for o in copy.graph.output}
    for node in copy.graph.node:  # a restored graph output: the DQ still writes it, from float
        if node.op_type == "DequantizeLinear" and node.output[0] in rewire and node.output[0] in outputs:
            node.op_type, node.domain = "Identity", ""
            node.input[:] = [rewire[node.output[0]]]
            del node.attribute[:]
    return copy.SerializeToString()


def _insert_after_producer(graph: Any, node: Any) -> None:
    """Insert ``node`` right after the node making its first input (onnx wants nodes sorted)."""
    at = next((k + 1 for k, n in enumerate(graph.node) if node.input[0] in n.output), 0)
    graph.node.insert(at, node)


def head_tensors(float_model: Any, quantized: set[str], depth: int = HEAD_DEPTH) -> list[str]:
    """Quantized tensors within ``depth`` nodes of a graph output, nearest first."""
    producer = {o: n for n in float_model.graph.node for o in n.output}
    frontier = [o.name for o in float_model.graph.output]
    seen: set[str] = set()
    ordered: list[str] = []
    for _ in range(depth):
        following = []
        for tensor in frontier:
            if tensor in seen:
                continue
            seen.add(tensor)
            if tensor in quantized:
                ordered.append(tensor)
            node = producer.get(tensor)
            if node is not None:
                following += [i for i in node.input if i]
        frontier = following
    return ordered


COMPUTE = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def branches(float_model: Any, quantized: set[str], depth: int = HEAD_DEPTH) -> list[tuple[str, list[str]]]:
    """The output branches: for a graph output made by a node of several inputs (a detector's
    Concat of boxes and class scores), each input's quantized ancestry back to and including
    its last compute layers (a class-score branch: Sigmoid, reshapes, the cv3 convs and weights)."""
    producer = {o: n for n in float_model.graph.node for o in n.output}
    out = []
    for output in float_model.graph.output:
        node = producer.get(output.name)
        while node is not None and len([i for i in node.input if i in producer]) == 1 \
                and node.op_type not in COMPUTE:  # walk down a single chain to the joining node
            node = producer[next(i for i in node.input if i in producer)]
        if node is None or len([i for i in node.input if i in producer]) < 2:
            continue
        for root in (i for i in node.input if i in producer):
            members: list[str] = []
            frontier, seen = [root], set()
            for _ in range(depth):
                following = []
                for tensor in frontier:
                    if tensor in seen:
                        continue
                    seen.add(tensor)
                    if tensor in quantized:
                        members.append(tensor)
                    maker = producer.get(tensor)
                    if maker is None:
                        continue
                    if maker.op_type in COMPUTE:  # the branch's last compute layer: its weights, not beyond
                        members += [i for i in maker.input[1:] if i in quantized and i not in members]
                        continue
                    following += [i for i in maker.input if i]
                frontier = following
            if members:
                out.append((root, members))
    return out


def candidates(float_model: Any, qdq: Any, float_path: Path, qdq_path: Path, data: Dataset,
               limit: int = CANDIDATES) -> list[list[Restorable]]:
    """Each output branch as a group, then the head, then the lowest local SQNR, up to
    ``limit`` (deterministic order)."""
    from onnxruntime.quantization.qdq_loss_debug import create_weight_matching

    from .guard import LOCAL_SAMPLES, _quantized_activations

    found = restorables(qdq, float_model)
    head = [t for t in head_tensors(float_model, set(found)) if t in found]
    tensors = {o for n in float_model.graph.node for o in n.output} | {i.name for i in float_model.graph.input}
    activations = _quantized_activations(qdq, tensors)
    weights = {i.name for i in float_model.graph.initializer}
    matched = {name: np.asarray(pair["dequantized"])
               for name, pair in create_weight_matching(str(float_path), str(qdq_path)).items()
               if name in weights and name in found and pair.get("dequantized") is not None
               and np.asarray(pair["dequantized"]).ndim >= 2}
    local = local_sqnr(float_model, data.take(slice(0, min(LOCAL_SAMPLES, len(data)))), activations, matched)
    by_local = sorted((t for t in found if t in local and t not in head), key=lambda t: (local[t], t))
    groups = [[found[t] for t in members] for _root, members in branches(float_model, set(found))
              if len(members) > 1]
    groups += segments(float_model, found)
    # the head gets at most half the places: a deep bottleneck can matter as much
    room = limit - len(groups)
    chosen = head[:max(room // 2, room - len(by_local))]
    chosen += by_local[:room - len(chosen)]
    return groups + [[found[t]] for t in chosen]


def segments(float_model: Any, found: dict[str, Restorable], count: int = SEGMENTS) -> list[list[Restorable]]:
    """The quantized activations in graph order, cut into ``count`` contiguous stretches: error
    that builds up over many layers (a detector's early high-resolution blocks) is fixed by a
    stretch at int16, never by one tensor."""
    order = {o: k for k, n in enumerate(float_model.graph.node) for o in n.output}
    acts = sorted((t for t, r in found.items() if r.kind == "activation" and t in order), key=lambda t: order[t])
    if len(acts) < 2 * count:
        return []
    bounds = np.linspace(0, len(acts), count + 1).round().astype(int)
    return [[found[t] for t in acts[a:b]] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def name_of(group: list[Restorable]) -> str:
    if len(group) == 1:
        return group[0].tensor
    return f"{len(group)} tensors {group[0].tensor} .. {group[-1].tensor}"


def rank(float_model: Any, qdq: Any, items: list[list[Restorable]], reference: list[np.ndarray], subset: Dataset,
         score: Score, progress: Callable[[int], None] | None = None,
         stop: Callable[[], bool] | None = None,
         enough: float | None = None) -> tuple[float, list[Sensitivity], int]:
    """(the subset's figure with nothing restored, the candidates best first, runs made):
    each restored alone and scored, in the fixed order given; a candidate that alone brings the
    worst samples within ``enough`` ends the ranking (it is the first plan whatever follows);
    ``stop()`` ends it early too (the outer time limit)."""
    def run(model: bytes) -> list[np.ndarray]:
        return run_dataset(session(model, threads=1, exact_int8=True), subset)

    base = score(reference, run(qdq.SerializeToString()))
    ranked: list[tuple[float, float, int, Sensitivity]] = []
    for order, item in enumerate(items):
        if stop is not None and stop():
            break
        got = run(restored(qdq, float_model, item))
        figure, db = score(reference, got), sqnr_db(reference, got)
        nodes = sorted({n for member in item for n in fix_set(float_model, member.tensor, member.kind)})
        kind = "activation" if any(m.kind == "activation" for m in item) else "weight"
        entry = Sensitivity(name_of(item), kind, nodes, db, measured="task", task_drop=figure)
        ranked.append((figure, -db, order, entry))
        if progress is not None:
            progress(0)
        if enough is not None and figure <= enough:
            break
    ranked.sort(key=lambda r: r[:3])
    return base, [r[3] for r in ranked], len(ranked) + 1


def worst_first(per_sample: Any, count: int, size: int = SUBSET) -> np.ndarray:
    """Indices of the ``size`` samples int8 gets most wrong (ties: the first), sorted."""
    if per_sample is None:
        return np.arange(min(size, count))
    share = per_sample.num / np.where(per_sample.den == 0, 1, per_sample.den)
    order = np.lexsort((np.arange(len(share)), -share))
    return np.sort(order[:min(size, count)])
