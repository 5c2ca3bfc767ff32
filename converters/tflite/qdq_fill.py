"""Close gaps onnxruntime's quantizer leaves in a QDQ graph, so more of it runs in int8.

onnxruntime quantizes only the op types it registers. An op it does not know (ReduceMean,
as PyTorch exports adaptive average pooling) runs in float even when its input comes from
a DequantizeLinear and it only feeds a reshape whose output is quantized again::

    DQ -> ReduceMean -> Reshape -> Q        becomes      DQ -> ReduceMean -> Q -> DQ -> Reshape -> Q

The inserted pair reuses the downstream Q's parameters (the reshape cannot change values,
a MaxPool only picks among them), so onnxruntime's result is reproduced with one rounding.
"""

from __future__ import annotations

import onnx
from edgekit.converters.graph.names import Names
from onnx import helper

# ops that move bytes without changing values: a Q after them is a Q before them
SAME_SCALE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Dropout",
              "Expand", "SpaceToDepth", "DepthToSpace"}
# ops whose output holds some of their input's values, unchanged (Gather: constant indices)
BYTE_MOVERS = SAME_SCALE | {"Gather"}
# ops a Q after them can move in front of, exactly: rounding at one scale is monotone, so
# Q(max(a, b)) == max(Q(a), Q(b)) (MTCNN's PRelu -> MaxPool, which onnxruntime leaves float)
Q_COMMUTES = SAME_SCALE | {"MaxPool"}
# weightless ops whose int8 kernel between a graph's DQ and Q gives Q(float result) up to one
# rounding: keeping one float (the accuracy guard names tensors, and the nodes around a
# sensitive tensor with it) buys no accuracy when an int8 tensor feeds it and a Q follows,
# it only adds a float island (EfficientNet-Lite0: the global pool and the Reshape before
# the classifier ran float in the .tflite)
EXACT_INT8 = BYTE_MOVERS | Q_COMMUTES | {"GlobalAveragePool", "ReduceMean", "AveragePool",
                                         "GlobalMaxPool", "ReduceMax", "Concat"}


def honoured_keep_float(model: onnx.ModelProto, keep_float: set[str] | frozenset[str]
                        ) -> set[str]:
    """The names of ``keep_float`` the writer keeps float: all but those of EXACT_INT8 ops
    (which run int8 only where the graph quantizes their inputs and outputs anyway). An
    EXACT_INT8 op that reaches a graph output through such ops alone, with no Q between,
    stays float: nothing quantizes after it (the packed-output split's Concat, kept float
    so that boxes and class scores keep their own scales: split_packed.py)."""
    graph = model.graph
    kinds = {n.name: n.op_type for n in graph.node}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}

    def reaches_output(node: onnx.NodeProto, depth: int = 0) -> bool:
        for out in node.output:
            if out in outputs:
                return True
            for user in consumers.get(out, []):
                if depth < 8 and user.op_type in EXACT_INT8 and reaches_output(user, depth + 1):
                    return True
        return False

    by_name = {n.name: n for n in graph.node}
    return {name for name in keep_float if kinds.get(name) not in EXACT_INT8
            or (name in by_name and reaches_output(by_name[name]))}


def fill_qdq(model: onnx.ModelProto, int8_ops: set[str], keep_float: set[str],
             byte_movers: bool = True) -> int:
    """Insert Q/DQ pairs in place; returns how many were inserted. ``byte_movers``: also
    the pairs in front of movers fed by float model inputs (see below)."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}
    names = Names(graph)  # the pairs' names are fresh: no clash with the graph's own

    def from_dq(name: str) -> bool:
        p = producer.get(name)
        return p is not None and p.op_type == "DequantizeLinear"

    def downstream_q(name: str, depth: int = 0) -> onnx.NodeProto | None:
        """The QuantizeLinear reached from ``name`` through same-scale ops only."""
        users = consumers.get(name, [])
        if name in outputs or not users or depth > 4:
            return None
        if all(u.op_type == "QuantizeLinear" for u in users):
            return users[0]
        if len(users) == 1 and users[0].op_type in Q_COMMUTES and \
                users[0].name not in keep_float:
            return downstream_q(users[0].output[0], depth + 1)
        return None

    inserted = []
    for node in list(graph.node):
        if node.op_type not in int8_ops or node.name in keep_float or len(node.output) != 1:
            continue
        if not node.input or not from_dq(node.input[0]):
            continue
        out = node.output[0]
        users = consumers.get(out, [])
        if not users or any(u.op_type == "QuantizeLinear" for u in users):
            continue
        q = downstream_q(out)
        if q is None:
            continue
        q_name, dq_name = names.fresh(f"{out}_edgekit_q"), names.fresh(f"{out}_edgekit_dq")
        args = list(q.input[1:])
        inserted.append((node, [
            helper.make_node("QuantizeLinear", [out, *args], [q_name], name=q_name),
            helper.make_node("DequantizeLinear", [q_name, *args], [dq_name], name=dq_name),
        ]))
        for u in users:
            for k, name in enumerate(u.input):
                if name == out:
                    u.input[k] = dq_name
    # the pairs just inserted now produce their consumers' inputs
    producer.update({o: n for _, pair in inserted for n in pair for o in n.output})
    before = _quantize_byte_mover_inputs(graph, producer, consumers, keep_float, names) \
        if byte_movers else {}
    # keep the node list topologically sorted: each pair goes right after its producer
    # (or, for a byte mover's input, right before the mover)
    after = {id(node): pair for node, pair in inserted}
    ordered = []
    for node in graph.node:
        ordered.extend(before.get(id(node), []))
        ordered.append(node)
        ordered.extend(after.get(id(node), []))
    copies = [onnx.NodeProto.FromString(n.SerializeToString()) for n in ordered]
    del graph.node[:]
    graph.node.extend(copies)
    return len(inserted) + len(before)


def _quantize_byte_mover_inputs(graph: onnx.GraphProto, producer: dict, consumers: dict,
                                keep_float: set[str], names: Names) -> dict[int, list[onnx.NodeProto]]:
    """The other gap: onnxruntime leaves a byte mover float when its input is a float
    model input (``x[:, None]`` on the audio, ``state[0]`` on a recurrent state) although its
    output is quantized::

        input -> Unsqueeze -> Q        becomes      input -> Q -> DQ -> Unsqueeze -> Q

    with the output Q's parameters: moving bytes and quantizing per tensor commute, so the
    values are exactly those onnxruntime computes. Returns {id(mover): [Q, DQ]}."""
    before: dict[int, list[onnx.NodeProto]] = {}
    # last to first: a chain of movers (SpaceToDepth -> Gather, YOLOX's Focus stem) gets its
    # pairs from the Q back to the input, each mover's new Q the next one's consumer
    for node in reversed(graph.node):
        if node.op_type not in BYTE_MOVERS or node.name in keep_float or \
                len(node.output) != 1 or not node.input:
            continue
        src = producer.get(node.input[0])
        if src is not None and src.op_type in ("DequantizeLinear", "QuantizeLinear"):
            continue
        if node.op_type == "Gather" and producer.get(node.input[1]) is not None:
            continue  # computed indices: the writer needs constants
        users = consumers.get(node.output[0], [])
        if not users or not all(u.op_type == "QuantizeLinear" for u in users):
            continue
        params = {tuple(u.input[1:]) for u in users}
        if len(params) != 1:
            continue
        args = list(params.pop())
        q_name = names.fresh(f"{node.output[0]}_edgekit_in_q")
        dq_name = names.fresh(f"{node.output[0]}_edgekit_in_dq")
        q = helper.make_node("QuantizeLinear", [node.input[0], *args], [q_name], name=q_name)
        dq = helper.make_node("DequantizeLinear", [q_name, *args], [dq_name], name=dq_name)
        consumers[q.input[0]] = [q if u is node else u for u in consumers.get(q.input[0], [])]
        node.input[0] = dq_name
        before[id(node)] = [q, dq]
    return before
