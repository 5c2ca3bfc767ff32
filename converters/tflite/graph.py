"""A read-only view of the quantized QDQ ONNX graph: producers, consumers, constants, shapes.

Shapes are made static (symbolic batch -> 1) and small shape-arithmetic subgraphs
(Shape -> Gather -> Concat -> Reshape, as PyTorch exports ``x.view(x.size(0), -1)``) are folded
to constants, because a TFLite model is written for fixed shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from edgekit.errors import UnsupportedModelError

# ops evaluated at conversion time when every input is a constant (shape arithmetic only)
_FOLDABLE = {
    "Shape", "Gather", "Concat", "Unsqueeze", "Squeeze", "Cast", "Slice", "Mul", "Add", "Sub",
    "Div", "Reshape", "ConstantOfShape", "Range", "Identity", "Floor", "Ceil", "Sqrt", "Max",
    "Min", "ReduceProd", "Equal", "Where", "Expand", "Neg",
}
_FOLD_LIMIT = 4096  # elements; weights never go through folding (their DQ nodes stay)


@dataclass
class DQInfo:
    """A DequantizeLinear node: the quantized source tensor and its parameters."""

    source: str
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class OnnxGraph:
    def __init__(self, model: onnx.ModelProto, batch: int = 1,
                 rewrite: Callable[[onnx.ModelProto], object] | None = None,
                 fuse: Callable[[OnnxGraph], object] | None = None) -> None:
        model = _fix_batch(model, batch)
        if rewrite is not None:
            rewrite(model)  # on our copy, before shapes are inferred
        try:
            model = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception as exc:  # onnx raises several types; all mean "cannot infer"
            raise UnsupportedModelError(f"ONNX shape inference failed: {exc}") from exc
        self.model = model
        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          13)
        self.const: dict[str, np.ndarray] = {
            i.name: numpy_helper.to_array(i) for i in self.graph.initializer
        }
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.types: dict[str, int] = {}
        for vi in [*self.graph.input, *self.graph.value_info, *self.graph.output]:
            self._record(vi)
        self.inputs = [i.name for i in self.graph.input if i.name not in self.const]
        self.outputs = [o.name for o in self.graph.output]
        self.nodes: list[onnx.NodeProto] = []
        self.attrs: dict[int, dict] = {}
        self._fold_and_index()
        if fuse is not None:
            fuse(self)  # after shape inference: fused nodes keep the shapes of what they replace

    def _record(self, vi: onnx.ValueInfoProto) -> None:
        t = vi.type.tensor_type
        self.types[vi.name] = t.elem_type
        if t.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)
            if all(d >= 0 for d in dims):
                self.shapes[vi.name] = dims

    def _fold_and_index(self) -> None:
        for node in self.graph.node:
            if node.op_type == "Constant":
                self.const[node.output[0]] = numpy_helper.to_array(
                    helper.get_attribute_value(node.attribute[0]))
                continue
            if self._try_fold(node):
                continue
            self.attrs[id(node)] = _attrs(node)
            self.nodes.append(node)
        self.reindex()
        for name, value in self.const.items():
            self.shapes.setdefault(name, tuple(value.shape))

    def reindex(self) -> None:
        """Rebuild producers and consumers (after a fusion edited ``nodes``)."""
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in self.nodes:
            for name in node.output:
                self.producer[name] = node
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(node)

    def replace(self, old: list[onnx.NodeProto], new: onnx.NodeProto) -> None:
        """Put ``new`` where the last of ``old`` was and drop ``old`` (then reindex)."""
        gone = {id(n) for n in old}
        last = max(i for i, n in enumerate(self.nodes) if id(n) in gone)
        self.attrs[id(new)] = _attrs(new)
        nodes = self.nodes[:last] + [new] + self.nodes[last + 1:]
        self.nodes = [n for n in nodes if id(n) not in gone]
        self.reindex()

    def _try_fold(self, node: onnx.NodeProto) -> bool:
        if node.op_type not in _FOLDABLE or node.domain not in ("", "ai.onnx"):
            return False
        if node.op_type == "Shape":
            shape = self.shapes.get(node.input[0])
            if shape is None:
                return False
            a = _attrs(node)
            start, end = a.get("start", 0), a.get("end", len(shape))
            self.const[node.output[0]] = np.asarray(shape[start:end], np.int64)
            return True
        ins = [n for n in node.input if n]
        if not ins or not all(n in self.const for n in ins):
            return False
        if any(self.const[n].size > _FOLD_LIMIT or self.const[n].dtype.kind == "f"
               and node.op_type != "Cast" for n in ins):
            return False  # real float tensors (weights) are not shape arithmetic
        from onnx.reference import ReferenceEvaluator

        # a ModelProto, not a bare GraphProto: the evaluator needs the opset to pick kernels
        evaluator = ReferenceEvaluator(helper.make_model(helper.make_graph(
            [node], "fold",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
                self.const[n].dtype), self.const[n].shape) for n in ins],
            [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
             for o in node.output]), opset_imports=[helper.make_opsetid("", self.opset)]))
        values = evaluator.run(None, {n: self.const[n] for n in ins})
        for name, value in zip(node.output, values, strict=True):
            self.const[name] = np.asarray(value)
        return True

    # -- queries ----------------------------------------------------------------------
    def attr(self, node: onnx.NodeProto) -> dict:
        return self.attrs[id(node)]

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.shapes:
            return self.shapes[name]
        raise UnsupportedModelError(
            f"tensor {name!r} has no static shape after shape inference; the .tflite writer "
            "needs fixed shapes (export with static spatial sizes)")

    def dq(self, name: str) -> DQInfo | None:
        """The DequantizeLinear producing ``name``, if any."""
        node = self.producer.get(name)
        if node is None or node.op_type != "DequantizeLinear":
            return None
        scale = self.const.get(node.input[1])
        zp = self.const.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if scale is None:
            raise UnsupportedModelError(f"DequantizeLinear {node.name!r}: scale is not constant")
        if zp is None:
            zp = np.zeros(np.shape(scale), np.uint8)
        axis = self.attr(node).get("axis", 1) if np.size(scale) > 1 else None
        return DQInfo(node.input[0], np.asarray(scale), np.asarray(zp), axis)

    def q_consumers(self, name: str) -> list[onnx.NodeProto] | None:
        """When every consumer of ``name`` is a QuantizeLinear, those nodes; else None."""
        users = self.consumers.get(name, [])
        if not users or name in self.outputs:
            return None
        if all(u.op_type == "QuantizeLinear" for u in users):
            return users
        return None

    def q_params(self, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
        scale = self.const.get(node.input[1])
        zp = self.const.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if scale is None:
            raise UnsupportedModelError(f"QuantizeLinear {node.name!r}: scale is not constant")
        if zp is None:
            zp = np.zeros((), np.uint8)
        return np.asarray(scale), np.asarray(zp)


def _fix_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """Copy of the model with a symbolic batch (axis 0) set to ``batch`` throughout the graph,
    by onnxruntime's ``make_input_shape_fixed`` (converters/graph/shapes.py); any other open dim is
    an ``UnsupportedModelError`` (the build pins those from its data before quantizing)."""
    from edgekit.converters.graph.shapes import fixed_input_shapes

    model = fixed_input_shapes(model, batch, others=None, who="the tflite writer")
    # drop stale intermediate shapes (they may carry the symbolic batch)
    del model.graph.value_info[:]
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    return model
