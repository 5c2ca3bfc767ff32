"""What a node reads, its subgraphs' outer-scope reads included.

An ``If``/``Loop``/``Scan`` body may read any tensor of the enclosing graphs by name without
listing it in ``node.input`` (ONNX's implicit inputs). openWakeWord's ``hey_jarvis`` model
returns ``If(p >= 0.5, then: verifier(x), else: Identity(p))``: both branches read ``x``, ``p``
and the verifier's weights from the outer scope. A walk back from an output through
``node.input`` alone keeps the ``If`` but not what feeds its branches, and the graph it cuts
out is invalid. onnxruntime's ``tools.onnx_model_utils`` has the same walk privately (and
for single-graph attributes only), so it is written here once.
"""

from __future__ import annotations

from typing import Any


def subgraphs(node: Any) -> list[Any]:
    """The graphs a node holds as attributes (``then_branch``, ``body``, ...)."""
    found = []
    for attr in node.attribute:
        if attr.HasField("g"):
            found.append(attr.g)
        found.extend(attr.graphs)
    return found


def outer_reads(graph: Any) -> list[str]:
    """The names ``graph`` (a subgraph) reads or returns but does not define: its inputs,
    initializers and node outputs are its own; everything else comes from an enclosing scope.
    Nested subgraphs count, minus what this graph defines for them. In first-read order."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    local |= {t.values.name for t in graph.sparse_initializer}
    seen: dict[str, None] = {}
    for node in graph.node:
        for name in node_reads(node):
            if name and name not in local:
                seen.setdefault(name)
        local.update(node.output)
    for out in graph.output:  # a branch may return an outer tensor itself, with no node
        if out.name not in local:
            seen.setdefault(out.name)
    return list(seen)


def node_reads(node: Any) -> list[str]:
    """``node.input`` (empty optional inputs dropped) then the outer-scope reads of its
    subgraphs, each name once: every tensor that must exist before ``node`` runs."""
    names = dict.fromkeys(i for i in node.input if i)
    for sub in subgraphs(node):
        names.update(dict.fromkeys(outer_reads(sub)))
    return list(names)
