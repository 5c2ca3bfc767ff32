"""Close gaps onnxruntime's quantizer leaves in a QDQ graph, so more of it runs in int8.

onnxruntime quantizes only the op types it registers. An op it does not know (ReduceMean,
as PyTorch exports adaptive average pooling) runs in float even when its input comes from
a DequantizeLinear and it only feeds a reshape whose output is quantized again::

    DQ -> ReduceMean -> Reshape -> Q        becomes      DQ -> ReduceMean -> Q -> DQ -> Reshape -> Q

The inserted pair reuses the downstream Q's parameters (the reshape cannot change values),
so onnxruntime's result is reproduced with one rounding, as before.
"""

from __future__ import annotations

import onnx
from onnx import helper

# ops that move bytes without changing values: a Q after them is a Q before them
SAME_SCALE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Dropout"}


def fill_qdq(model: onnx.ModelProto, int8_ops: set[str], keep_float: set[str]) -> int:
    """Insert Q/DQ pairs in place; returns how many were inserted."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}

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
        if len(users) == 1 and users[0].op_type in SAME_SCALE and \
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
        q_name, dq_name = f"{out}_edgekit_q", f"{out}_edgekit_dq"
        args = list(q.input[1:])
        inserted.append((node, [
            helper.make_node("QuantizeLinear", [out, *args], [q_name], name=q_name),
            helper.make_node("DequantizeLinear", [q_name, *args], [dq_name], name=dq_name),
        ]))
        for u in users:
            for k, name in enumerate(u.input):
                if name == out:
                    u.input[k] = dq_name
    # keep the node list topologically sorted: each pair goes right after its producer
    after = {id(node): pair for node, pair in inserted}
    ordered = []
    for node in graph.node:
        ordered.append(node)
        ordered.extend(after.get(id(node), []))
    copies = [onnx.NodeProto.FromString(n.SerializeToString()) for n in ordered]
    del graph.node[:]
    graph.node.extend(copies)
    return len(inserted)
