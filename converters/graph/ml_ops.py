"""The common ``ai.onnx.ml`` ops, written as the standard ONNX ops they compute.

skl2onnx writes a linear model or an MLP with ``LinearClassifier``, ``Normalizer``,
``Scaler`` and ``ArrayFeatureExtractor`` (the class label picked from the argmax). No
quantizer, cost model or .tflite writer reads that domain, so such a graph shipped float
ONNX only. Each is lowered here to MatMul/Add/Softmax/ArgMax/... with onnxruntime's
semantics (onnxruntime/core/providers/cpu/ml/), and a label chain
(ArgMax -> class lookup of 0..k-1 -> Reshape -> Cast to int64) becomes the one ArgMax it
computes, on the scores before any Softmax (a monotonic map: the same argmax, and in int8
the logits' wider grid breaks fewer ties than probabilities on a 1/256 grid).

(hummingbird-ml lowers scikit-learn models through PyTorch, from the estimator, not from an
ONNX graph; onnxruntime and onnxscript have no such rewrite.) An op or attribute outside
what is written here stays as it is: the build then ships ONNX, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.graph.names import Names

ML = "ai.onnx.ml"
# post_transform -> the standard op that applies it (a monotonic map of the scores)
_TRANSFORMS = {"NONE": None, "SOFTMAX": "Softmax", "LOGISTIC": "Sigmoid"}


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    found = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in found.items()}


class _Lowering:
    def __init__(self, model: Any) -> None:
        from onnx import numpy_helper

        self.model, self.graph = model, model.graph
        self.names = Names(self.graph)
        self.consts = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.new_inits: list[Any] = []
        # tensors that are a Softmax over their last axis (rows of probabilities summing to 1)
        self.softmax_rows = {n.output[0] for n in self.graph.node if n.op_type == "Softmax"
                             and int(_attrs(n).get("axis", -1)) == -1}

    def const(self, array: np.ndarray, hint: str) -> str:
        from onnx import numpy_helper

        name = self.names.fresh(hint)
        self.new_inits.append(numpy_helper.from_array(np.asarray(array), name))
        self.consts[name] = np.asarray(array)
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str] | None, hint: str,
             **attrs: Any) -> tuple[Any, str]:
        from onnx import helper

        outs = outputs or [self.names.fresh(f"{hint}_out")]
        return helper.make_node(op, inputs, outs, name=self.names.fresh(hint), **attrs), outs[0]

    # -- one op each: a list of standard nodes, or None to leave the op as it is ------------
    def linear_classifier(self, node: Any) -> list[Any] | None:
        a = _attrs(node)
        labels = a.get("classlabels_ints") or a.get("classlabels_strings")
        transform = a.get("post_transform", "NONE")
        intercepts = np.asarray(a.get("intercepts", []), np.float32)
        coefficients = np.asarray(a["coefficients"], np.float32)
        if not labels or transform not in _TRANSFORMS or len(labels) < 2 or \
                coefficients.size % len(labels) or len(intercepts) not in (0, len(labels)):
            return None  # a binary model's one score row, SOFTMAX_ZERO, PROBIT: not written
        classes = len(labels)
        weight = coefficients.reshape(classes, -1).T  # [features, classes]
        base = node.name or "LinearClassifier"
        cast, x = self.node("Cast", [node.input[0]], None, f"{base}_float", to=1)
        matmul, raw = self.node("MatMul", [x, self.const(weight, f"{base}_coefficients")],
                                None, f"{base}_matmul")
        nodes = [cast, matmul]
        if len(intercepts):
            add, raw = self.node("Add", [raw, self.const(intercepts, f"{base}_intercepts")],
                                 None, f"{base}_intercepts_add")
            nodes.append(add)
        scores_out = node.output[1] if len(node.output) > 1 and node.output[1] else None
        if scores_out:
            op = _TRANSFORMS[transform]
            if op is None:
                nodes.append(self.node("Identity", [raw], [scores_out], f"{base}_scores")[0])
            else:
                extra = {"axis": -1} if op == "Softmax" else {}
                if op == "Softmax":
                    self.softmax_rows.add(scores_out)
                nodes.append(self.node(op, [raw], [scores_out], f"{base}_{op.lower()}",
                                       **extra)[0])
        if node.output[0]:
            nodes += self._labels(raw, labels, node.output[0], base)
        return nodes

    def _labels(self, scores: str, labels: list, out: str, base: str) -> list[Any]:
        if all(isinstance(v, int) for v in labels) and list(labels) == list(range(len(labels))):
            return [self.node("ArgMax", [scores], [out], f"{base}_label", axis=1, keepdims=0)[0]]
        argmax, index = self.node("ArgMax", [scores], None, f"{base}_argmax", axis=1, keepdims=0)
        table = np.asarray(labels, np.int64 if isinstance(labels[0], int) else object)
        gather, _ = self.node("Gather", [self.const(table, f"{base}_classes"), index], [out],
                              f"{base}_label", axis=0)
        return [argmax, gather]

    def normalizer(self, node: Any) -> list[Any] | None:
        norm = _attrs(node).get("norm", "MAX")
        base, x = node.name or "Normalizer", node.input[0]
        if norm == "L1" and x in self.softmax_rows:  # rows already sum to 1, all >= 0
            return [self.node("Identity", [x], [node.output[0]], f"{base}_identity")[0]]
        axes = self.const(np.asarray([-1], np.int64), f"{base}_axes")
        if norm == "L1":
            absolute, v = self.node("Abs", [x], None, f"{base}_abs")
            total, d = self.node("ReduceSum", [v, axes], None, f"{base}_sum", keepdims=1)
            nodes = [absolute, total]
        elif norm == "L2":
            square, v = self.node("Mul", [x, x], None, f"{base}_square")
            total, s = self.node("ReduceSum", [v, axes], None, f"{base}_sum", keepdims=1)
            root, d = self.node("Sqrt", [s], None, f"{base}_sqrt")
            nodes = [square, total, root]
        elif norm == "MAX" and self.opset >= 18:
            top, d = self.node("ReduceMax", [x, axes], None, f"{base}_max", keepdims=1)
            nodes = [top]
        elif norm == "MAX":
            top, d = self.node("ReduceMax", [x], None, f"{base}_max", axes=[-1], keepdims=1)
            nodes = [top]
        else:
            return None
        return [*nodes, self.node("Div", [x, d], [node.output[0]], f"{base}_div")[0]]

    def scaler(self, node: Any) -> list[Any] | None:
        a = _attrs(node)
        base = node.name or "Scaler"
        offset = np.asarray(a.get("offset", [0.0]), np.float32)
        scale = np.asarray(a.get("scale", [1.0]), np.float32)
        cast, x = self.node("Cast", [node.input[0]], None, f"{base}_float", to=1)
        # x + (-offset): onnxruntime's quantizer quantizes Add, not Sub
        add, v = self.node("Add", [x, self.const(-offset, f"{base}_offset")], None,
                           f"{base}_offset_add")
        mul, _ = self.node("Mul", [v, self.const(scale, f"{base}_scale")], [node.output[0]],
                           f"{base}_mul")
        return [cast, add, mul]

    def array_feature_extractor(self, node: Any) -> list[Any] | None:
        """Gather on the last axis of X; a 1-D X gives [1, k] (onnxruntime's shape)."""
        x, indices = node.input
        base = node.name or "ArrayFeatureExtractor"
        table = self.consts.get(x)
        flat, idx = self.node("Reshape", [indices, self.const(np.asarray([-1], np.int64),
                                                               f"{base}_flat")], None,
                              f"{base}_indices")
        if table is not None and table.ndim == 1 and np.array_equal(table, np.arange(len(table))):
            # the class lookup of labels 0..k-1: the indices themselves, as [1, k]
            return [flat, self.node("Reshape", [idx, self.const(np.asarray([1, -1], np.int64),
                                                                 f"{base}_row")],
                                    [node.output[0]], f"{base}_row")[0]]
        if table is None:
            return None  # a computed X: its rank is not known here
        gather, g = self.node("Gather", [x, idx], None if table.ndim == 1 else [node.output[0]],
                              f"{base}_gather", axis=table.ndim - 1)
        if table.ndim > 1:
            return [flat, gather]
        row = self.node("Unsqueeze", [g, self.const(np.asarray([0], np.int64), f"{base}_axis0")],
                        [node.output[0]], f"{base}_row")[0]
        return [flat, gather, row]

    @property
    def opset(self) -> int:
        return next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")),
                    13)


_LOWER = {"LinearClassifier": _Lowering.linear_classifier, "Normalizer": _Lowering.normalizer,
          "Scaler": _Lowering.scaler, "ArrayFeatureExtractor": _Lowering.array_feature_extractor}


def lower_ml_ops(model: Any) -> list[str]:
    """Rewrite ``model`` in place; returns one line per op kind lowered (none: [])."""
    lowering = _Lowering(model)
    graph = model.graph
    done: dict[str, int] = {}
    rebuilt = []
    for node in graph.node:
        rule = _LOWER.get(node.op_type) if node.domain == ML else None
        written = rule(lowering, node) if rule else None
        if written is None:
            rebuilt.append(node)
            continue
        rebuilt += written
        done[node.op_type] = done.get(node.op_type, 0) + 1
    if not done:
        return []
    del graph.node[:]
    graph.node.extend(rebuilt)
    graph.initializer.extend(lowering.new_inits)
    folded = fold_label_chains(model)
    drop_noop_casts(model)
    _drop_unused(model)
    notes = [f"wrote {n} {op} (ai.onnx.ml) as standard ONNX ops" for op, n in done.items()]
    if folded:
        notes.append(f"{folded} class label output(s) computed by one ArgMax over the scores")
    return notes


def fold_label_chains(model: Any) -> int:
    """A graph output computed as ArgMax(keepdims=1) -> Reshape(s) -> Cast(int64) ... of a
    rank-2 score tensor becomes ArgMax(axis=1, keepdims=0) writing it, over the Softmax's
    input when the scores are a Softmax's. Returns how many were folded."""
    from onnx import TensorProto, helper

    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    users: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    outputs = {o.name: o for o in graph.output}
    ranks = _ranks(model)
    folded, dropped = 0, set()
    for name, value in outputs.items():
        if value.type.tensor_type.elem_type != TensorProto.INT64 or \
                len(value.type.tensor_type.shape.dim) != 1:
            continue
        chain, current = [], producer.get(name)
        while current is not None and _passes_values(current):
            chain.append(current)
            current = producer.get(current.input[0])
        if current is None or current.op_type != "ArgMax" or not chain:
            continue
        attrs = _attrs(current)
        if int(attrs.get("axis", 0)) not in (1, -1) or attrs.get("select_last_index", 0) or \
                ranks.get(current.input[0]) != 2:  # [N, classes] scores only
            continue
        inner = [*chain[1:], current]
        if any(len(users.get(n.output[0], [])) != 1 or n.output[0] in outputs for n in inner):
            continue
        scores = current.input[0]
        source = producer.get(scores)
        if source is not None and source.op_type == "Softmax" and \
                int(_attrs(source).get("axis", -1)) in (1, -1):
            scores = source.input[0]
        dropped |= {id(n) for n in [*chain, current]}
        graph.node.append(helper.make_node("ArgMax", [scores], [name], axis=1, keepdims=0,
                                           name=f"{current.name or 'ArgMax'}_label"))
        folded += 1
    if folded:
        kept = [n for n in graph.node if id(n) not in dropped]
        del graph.node[:]
        graph.node.extend(_topological(kept, graph))
    return folded


def _ranks(model: Any) -> dict[str, int]:
    """Tensor name -> rank, where shape inference knows it."""
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # an op the inference does not know: fold nothing it cannot check
        return {}
    values = [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    return {v.name: len(v.type.tensor_type.shape.dim) for v in values
            if v.type.tensor_type.HasField("shape")}


def _passes_values(node: Any) -> bool:
    """A node whose output holds its first input's integer values (shape aside)."""
    if node.op_type in ("Reshape", "Identity", "Squeeze", "Flatten"):
        return True
    return node.op_type == "Cast" and int(_attrs(node).get("to", 0)) == 7  # INT64


def _topological(nodes: list[Any], graph: Any) -> list[Any]:
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending, ordered = list(nodes), []
    while pending:
        left = []
        for n in pending:
            if all(i in ready for i in n.input):
                ordered.append(n)
                ready.update(n.output)
            else:
                left.append(n)
        if len(left) == len(pending):
            return ordered + left  # a cycle or a missing input: the checker says which
        pending = left
    return ordered


def drop_noop_casts(model: Any) -> int:
    """Remove each Cast to the type its input (a graph input or initializer) already has and
    whose output is no graph output (skl2onnx casts a float input to float)."""
    graph = model.graph
    known = {v.name: v.type.tensor_type.elem_type for v in graph.input}
    known.update({t.name: t.data_type for t in graph.initializer})
    outputs = {o.name for o in graph.output}
    removed = 0
    while True:  # a Cast after a removed one reads a known type in the next round
        cast = next((n for n in graph.node if n.op_type == "Cast" and n.output[0] not in outputs
                     and known.get(n.input[0]) == int(_attrs(n).get("to", -1))), None)
        if cast is None:
            return removed
        for n in graph.node:
            n.input[:] = [cast.input[0] if i == cast.output[0] else i for i in n.input]
        graph.node.remove(cast)
        removed += 1


def _drop_unused(model: Any) -> None:
    """Initializers no node reads any more, and the ai.onnx.ml domain once no node is in it."""
    from onnx import helper

    read = {i for n in model.graph.node for i in n.input}
    unused = [t for t in model.graph.initializer if t.name not in read]
    for tensor in unused:
        model.graph.initializer.remove(tensor)
    if any(n.domain == ML for n in model.graph.node):
        return
    kept = [o for o in model.opset_import if o.domain != ML]
    if not any(o.domain in ("", "ai.onnx") for o in kept):
        kept.append(helper.make_opsetid("", 13))
    del model.opset_import[:]
    model.opset_import.extend(kept)
