"""Opset-aware graph edits: the two forms of ``axes``/``split``, and raising a model's opset.

Some ops moved an attribute into an input: ``axes`` of Squeeze, Unsqueeze and ReduceSum at
opset 13, of the other Reduce* ops at 18; ``split`` of Split at 13. A graph is valid only in
its opset's form (onnxruntime refuses "Unrecognized attribute: axes for operator
ReduceMean" at opset 18+), so a rewrite that raises the opset (the int16 rung needs 21 for
int16 QuantizeLinear) converts those nodes, and a rewrite that reads axes reads both forms.

``raise_opset`` uses onnx's version converter (its adapters cover every op's changes,
GridSample's renamed modes at 20 included); where it gives up on a graph, the nodes whose
form changed are converted here and the version entry raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from edgekit.converters.graph.names import Names

from edgekit.errors import InternalError

# op -> first default-domain opset where ``axes`` is an input, not an attribute
AXES_INPUT_SINCE: dict[str, int] = {
    "Squeeze": 13, "Unsqueeze": 13, "ReduceSum": 13,
    **{op: 18 for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
}
SPLIT_INPUT_SINCE = 13


def default_opset(model: Any) -> int:
    """The model's default-domain (``ai.onnx``) opset version."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def merge_opset_imports(model: Any) -> int:
    """One ``opset_import`` entry per domain, the highest version kept (skl2onnx can write the
    default domain twice; onnxruntime's quantizer then stops at "Failed to find proper
    ai.onnx domain"). Returns how many entries went."""
    best: dict[str, int] = {}
    for entry in model.opset_import:
        domain = "" if entry.domain == "ai.onnx" else entry.domain
        best[domain] = max(best.get(domain, 0), entry.version)
    dropped = len(model.opset_import) - len(best)
    if dropped:
        from onnx import helper

        del model.opset_import[:]
        model.opset_import.extend(helper.make_opsetid(d, v) for d, v in best.items())
    return dropped


def axes_of(node: Any, constants: Mapping[str, np.ndarray]) -> list[int] | None:
    """The ``axes`` of a Reduce*/Squeeze/Unsqueeze node in either form: the attribute, or
    the constant second input (``constants``: initializer arrays by name). None: not given
    (every axis for a reduction), or an input that is not a constant."""
    for attr in node.attribute:
        if attr.name == "axes":
            return [int(a) for a in attr.ints]
    if len(node.input) > 1 and node.input[1] and node.input[1] in constants:
        return [int(a) for a in np.asarray(constants[node.input[1]]).reshape(-1)]
    return None


def raise_opset(model: Any, version: int) -> None:
    """Raise ``model``'s default-domain opset to ``version`` in place (no-op if it is there),
    every node rewritten into the new opset's form."""
    from onnx import version_converter

    if default_opset(model) >= version:
        return
    try:
        converted = version_converter.convert_version(model, version)
    except Exception:  # noqa: BLE001 - the converter lacks an adapter: convert the known forms
        _attributes_to_inputs(model, version)
        return
    # the converter adds every inferred shape as value_info: a rewrite that retypes a tensor
    # afterwards (int8 -> int16) would leave a stale one; keep the model's own
    del converted.graph.value_info[:]
    converted.graph.value_info.extend(model.graph.value_info)
    model.CopyFrom(converted)


def _attributes_to_inputs(model: Any, version: int) -> None:
    """The fallback of ``raise_opset``: ``axes``/``split`` attributes become constant inputs
    where ``version`` wants inputs, then the version entry is raised."""
    from onnx import numpy_helper

    old = default_opset(model)
    graph = model.graph
    names = Names(graph)
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        key = ("axes" if old < AXES_INPUT_SINCE.get(node.op_type, 1 << 30) <= version else
               "split" if node.op_type == "Split" and old < SPLIT_INPUT_SINCE <= version else None)
        attr = next((a for a in node.attribute if a.name == key), None) if key else None
        if attr is None:
            continue
        const = names.fresh(f"{node.name or node.output[0]}_{key}")
        graph.initializer.append(numpy_helper.from_array(np.asarray(list(attr.ints), np.int64),
                                                         const))
        if len(node.input) < 2:
            node.input.append(const)
        elif not node.input[1]:
            node.input[1] = const
        else:
            raise InternalError(f"node {node.name!r} ({node.op_type}) has both an {key!r} "
                                "attribute and a second input")
        node.attribute.remove(attr)
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = version
