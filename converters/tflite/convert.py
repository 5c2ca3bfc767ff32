"""The driver: walks the QDQ ONNX graph in order and writes an integer .tflite model.

A node is written in int8 when its op has an integer converter, the accuracy guard did not
keep it float, its data inputs come from DequantizeLinear and every consumer of its outputs
is a QuantizeLinear: the Q/DQ pairs then vanish into the int8 tensors' parameters. Any other
node is written as float with DEQUANTIZE before and QUANTIZE after it (made on demand where
an int8 tensor meets a float op) and is reported in ``float_ops``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.fp16 import fold_fp16_weights
from edgekit.converters.tflite.graph import OnnxGraph
from edgekit.converters.tflite.layout import NHWC, Value, identity, layout_name
from edgekit.converters.tflite.ops import FUSIONS, REGISTRY, OpSpec
from edgekit.converters.tflite.ops.activation import fused_code
from edgekit.converters.tflite.ops.shape import convert_output_concat16, joins_integer_outputs
from edgekit.converters.tflite.output_qdq import Range, quantize_outputs
from edgekit.converters.tflite.qdq_fill import fill_qdq, honoured_keep_float
from edgekit.converters.tflite.quant import activation_params
from edgekit.converters.tflite.recurrent_qdq import quantize_recurrent_moves
from edgekit.converters.tflite.schema import Act
from edgekit.converters.tflite.sixteen import INT16_KERNELS, is_int16_zero
from edgekit.converters.tflite.writer import ModelWriter

from edgekit.errors import UnsupportedModelError

_QDQ = ("QuantizeLinear", "DequantizeLinear")


@dataclass
class TFLiteModel:
    """The written model and what the manifest needs to know about it."""

    data: bytes
    inputs: list[dict]
    outputs: list[dict]
    float_ops: list[dict] = field(default_factory=list)
    op_counts: dict[str, int] = field(default_factory=dict)


def convert(model: onnx.ModelProto, keep_float: set[str] | frozenset[str] = frozenset(),
            strict_int8: bool = False, int8_io: bool = True,
            output_ranges: Mapping[str, Range] | None = None) -> TFLiteModel:
    """Write an integer TFLite model from a QDQ ONNX model.

    ``keep_float``: node names the accuracy guard excluded from quantization (float, but for
    weightless ops whose int8 form is exact where the graph quantizes around them:
    ``qdq_fill.EXACT_INT8``).
    ``strict_int8``: raise, naming the ops, instead of writing any float op.
    ``int8_io``: int8 model inputs/outputs (the runtime quantizes); else float32 ones, in
    the ONNX graph's own layout: the model quantizes (and transposes to NHWC) its inputs and
    dequantizes its outputs itself, so XNNPACK runs that on all threads, not numpy on one.
    ``output_ranges``: calibrated (lowest, highest) of graph outputs onnxruntime left float;
    those an int8 chain produces get that scale, so their last ops are int8 (output_qdq.py).
    """
    keep = honoured_keep_float(model, keep_float)
    int8_ops = {op for op, spec in REGISTRY.items() if spec.int8}
    halves: set[str] = set()

    def rewrite(copy: onnx.ModelProto) -> None:
        halves.update(fold_fp16_weights(copy))  # fp16 layers' weights (tflite/fp16.py)
        if output_ranges:
            # (no output pair after any node the guard kept float: its output precision)
            quantize_outputs(copy, output_ranges, int8_ops, set(keep_float))
        quantize_recurrent_moves(copy, keep)  # movers around LSTM/GRU on integer tensors
        fill_qdq(copy, int8_ops, keep)

    graph = OnnxGraph(model, rewrite=rewrite, fuse=lambda g: [fuse(g, keep) for fuse in FUSIONS])
    driver = _Driver(graph, keep, int8_io)
    driver.ctx.fp16_weights = halves
    return driver.run(strict_int8)


class _Driver:
    def __init__(self, graph: OnnxGraph, keep_float: set[str], int8_io: bool) -> None:
        self.g = graph
        self.keep_float = keep_float
        self.int8_io = int8_io
        self.w = ModelWriter("edgekit: int8 from QDQ ONNX")
        self.ctx = ConversionContext(graph, self.w)
        self.ctx.is_int8 = self.is_int8  # op converters ask about their neighbours
        self.ctx.touches_int16 = self._touches_int16
        self.float_ops: list[dict] = []

    def run(self, strict_int8: bool) -> TFLiteModel:
        missing = sorted({n.op_type for n in self.g.nodes
                          if n.op_type not in REGISTRY and n.op_type not in _QDQ})
        if missing:
            raise UnsupportedModelError(
                f"the tflite writer has no converter for ONNX op(s) {', '.join(missing)}; "
                f"supported: {', '.join(sorted(REGISTRY))} (build with --format onnx)")
        inputs = self._inputs()
        for node in self.g.nodes:
            if node.op_type in _QDQ or id(node) in self.ctx.done:
                continue
            self._convert(node)
        outputs = self._outputs()
        if strict_int8 and self.float_ops:
            raise self._strict_error(self.float_ops)
        counts: dict[str, int] = {}
        for name in self.w.op_names:
            counts[name] = counts.get(name, 0) + 1
        return TFLiteModel(self.w.finish(), inputs, outputs, self.float_ops, counts)

    # -- modes --------------------------------------------------------------------------
    def is_int8(self, node: onnx.NodeProto) -> bool:
        spec = REGISTRY.get(node.op_type)
        if spec is None or not spec.int8 or node.name in self.keep_float:
            return False
        wanted = range(len(node.input)) if spec.dq_inputs is None else spec.dq_inputs
        for i in wanted:
            if i < len(node.input) and node.input[i] and self.g.dq(node.input[i]) is None:
                return False
        if not spec.bool_output and not all(self.g.q_consumers(out) for out in node.output
                                            if out):
            return False
        if node.op_type not in INT16_KERNELS and self._touches_int16(node):
            return False  # no 16x8 kernel written for it: float between DEQUANTIZE/QUANTIZE
        return spec.can_int8 is None or spec.can_int8(self.ctx, node)

    def _touches_int16(self, node: onnx.NodeProto) -> bool:
        zeros = [self.g.dq(i).zero_point for i in node.input if i and self.g.dq(i) is not None
                 and self.g.dq(i).source not in self.g.const]
        zeros += [self.g.q_params(q)[1] for out in node.output if out
                  for q in (self.g.q_consumers(out) or [])]
        return any(is_int16_zero(z) for z in zeros)

    @staticmethod
    def _strict_error(ops: list[dict]) -> UnsupportedModelError:
        names = ", ".join(f"{o['name']} ({o['op_type']})" for o in ops)
        return UnsupportedModelError(
            f"strict_int8: expected every op in int8, got {len(ops)} float op(s): {names}")

    def _fusion(self, node: onnx.NodeProto, spec: OpSpec, quant: bool):
        """A Relu/Clip right after ``node`` that can become its fused activation."""
        if not spec.fusable:
            return None
        g, out = self.g, node.output[0]
        if quant:
            qs = g.q_consumers(out)
            if not qs or len(qs) != 1 or qs[0].output[0] in g.outputs:
                return None
            dqs = g.consumers.get(qs[0].output[0], [])
            if len(dqs) != 1 or dqs[0].op_type != "DequantizeLinear":
                return None
            out = dqs[0].output[0]
        users = g.consumers.get(out, [])
        if out in g.outputs or len(users) != 1:
            return None
        act = users[0]
        code = fused_code(self.ctx, act)
        if code is None or self.is_int8(act) != quant or act.name in self.keep_float:
            return None
        return act, code

    def _convert(self, node: onnx.NodeProto) -> None:
        spec = REGISTRY[node.op_type]
        quant = self.is_int8(node)
        ctx = self.ctx
        if not quant and joins_integer_outputs(ctx, node):
            ctx.quantized = ctx.sixteen = False
            convert_output_concat16(ctx, node)  # int16 CONCATENATION, DEQUANTIZE to the output
            return
        ctx.quantized = quant
        ctx.sixteen = quant and self._touches_int16(node)
        ctx.fused_act, ctx.fused_node = Act.NONE, None
        fusion = self._fusion(node, spec, quant)
        if fusion is not None:
            ctx.fused_node, ctx.fused_act = fusion
            ctx.done.add(id(fusion[0]))
        spec.convert(ctx, node)
        ctx.fused_act, ctx.fused_node = Act.NONE, None
        if not quant and not all(ctx.is_const(i) for i in node.input if i):
            self.float_ops.append({"name": node.name or node.output[0], "op_type": node.op_type})

    # -- graph inputs and outputs -------------------------------------------------------
    def _inputs(self) -> list[dict]:
        described = []
        for name in self.g.inputs:
            shape = self.g.shape(name)
            # float inputs keep the caller's layout: QUANTIZE runs first, then the consumers'
            # to_layout() adds one int8 TRANSPOSE (a quarter of the bytes of a float one)
            perm = self._input_layout(name, len(shape)) if self.int8_io else identity(len(shape))
            users = self.g.consumers.get(name, [])
            qp = None
            if self.int8_io and users and all(u.op_type == "QuantizeLinear" for u in users):
                params = {activation_params(*self.g.q_params(u)) for u in users}
                if len(params) == 1:
                    qp = params.pop()
            value = self.ctx.new_value(shape, perm, qp, name)
            if qp is not None:
                for u in users:
                    self.ctx.values[u.output[0]] = value
            else:
                self.ctx.values[name] = value
            self.w.inputs.append(value.tensor.index)
            described.append(_describe(name, value))
        return described

    def _input_layout(self, name: str, rank: int) -> tuple[int, ...]:
        """NHWC for 4-D inputs, unless the graph itself starts by transposing an NHWC input
        to NCHW (models from NHWC frameworks): then the input stays as it is and that
        Transpose costs nothing."""
        if rank != 4:
            return identity(rank)
        frontier, users = [name], []
        while frontier:
            for user in self.g.consumers.get(frontier.pop(), []):
                if user.op_type in _QDQ:
                    frontier.append(user.output[0])
                else:
                    users.append(user)
        if users and all(u.op_type == "Transpose" and
                         tuple(self.g.attr(u).get("perm", ())) == (0, 3, 1, 2) for u in users):
            return identity(4)
        return NHWC

    def _outputs(self) -> list[dict]:
        described = []
        for name in self.g.outputs:
            dq = self.g.dq(name)
            if self.int8_io and dq is not None and dq.source not in self.g.const:
                value = self.ctx.value(dq.source)
            else:
                value = self.ctx.float_value(name)
            if value.is_const:
                raise UnsupportedModelError(f"output {name!r} is a constant; nothing to run")
            if value.feature_perm is not None:  # cannot happen: only FC layers read those
                raise UnsupportedModelError(f"output {name!r} is a reordered flatten")
            self.w.outputs.append(value.tensor.index)
            described.append(_describe(name, value))
        return described


def _describe(name: str, value: Value) -> dict:
    entry = {
        "name": name,
        "tflite_name": value.tensor.name,
        "shape": list(value.shape),
        # an index output (ArgMax) keeps its integer type
        "dtype": value.qparams.dtype if value.quantized else (
            value.tensor.dtype if value.tensor.dtype in ("int64", "int32") else "float32"),
        "perm": list(value.perm),
        "layout": layout_name(value.perm),
    }
    if value.quantized:
        entry["quantization"] = {"scale": value.qparams.s, "zero_point": value.qparams.zp}
    return entry
