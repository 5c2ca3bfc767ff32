"""Fold ``If`` nodes whose condition a frozen or pinned input made constant, before
onnxruntime's optimizer sees them.

silero-vad 6.2.3's ``silero_vad.onnx`` branches on its sample rate, and each branch holds
more ``If``s on shapes (the LSTM's state, the chunk length), nested three deep. With
``--const sr=16000`` and the input pinned, onnxruntime's basic optimizer inlines the
constant branches itself, and fails on the nested ones ("InlineIfSubgraph ... is not If
node's input or previous node output in this subgraph"); the file its pre-processing then
writes crashes onnxruntime (a segmentation fault when the quantize stage opens it). The
constant folder of onnxscript (the ONNX optimizer torch's exporter uses) inlines the branch
taken, renaming its tensors into the outer graph, and folds the conditions the pinned shapes
decide. Applied only to graphs with control flow: others go to onnxruntime as before.
"""

from __future__ import annotations

from typing import Any

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def has_control_flow(model: Any) -> bool:
    return any(n.op_type in CONTROL_FLOW for n in model.graph.node)


def fold_constant_branches(model: Any) -> tuple[Any, int]:
    """``model`` with its constant ``If``s inlined (a new model; the one given is unchanged),
    and how many control-flow nodes went. A graph without control flow is returned as is."""
    if not has_control_flow(model):
        return model, 0
    import onnx
    import onnxscript.optimizer

    before = sum(n.op_type in CONTROL_FLOW for n in model.graph.node)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    folded = onnxscript.optimizer.optimize(copy)
    return folded, before - sum(n.op_type in CONTROL_FLOW for n in folded.graph.node)
