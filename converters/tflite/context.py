"""State shared by the op converters: ONNX name -> TFLite value, and the helpers every op
needs (inputs in the node's mode, weights, biases, layouts, requantization, outputs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from edgekit.converters.tflite.fp16 import fp16_weight
from edgekit.converters.tflite.graph import OnnxGraph
from edgekit.converters.tflite.layout import (
    Perm,
    Value,
    identity,
    order_preserving,
    permute,
    transpose_between,
)
from edgekit.converters.tflite.quant import (
    QParams,
    activation_params,
    bias_int32,
    dequantize,
    quantize_weights,
    symmetric_weights,
    to_int8_values,
)
from edgekit.converters.tflite.schema import Act, Op, S
from edgekit.converters.tflite.sixteen import bias_fits_int32, bias_int64, const_params16
from edgekit.converters.tflite.writer import ModelWriter, Tensor

from edgekit.errors import InternalError, UnsupportedModelError


@dataclass
class Weight:
    """A constant weight: float values always, int8 + per-channel scales in int8 mode."""

    real: np.ndarray
    q: np.ndarray | None = None
    scale: np.ndarray | None = None
    fp16: bool = False  # a float weight stored as float16 (tflite/fp16.py)


class ConversionContext:
    def __init__(self, graph: OnnxGraph, writer: ModelWriter) -> None:
        self.g = graph
        self.w = writer
        self.values: dict[str, Value] = {}
        self._float: dict[str, Value] = {}  # DequantizeLinear output -> float value
        self.done: set[int] = set()  # ids of nodes converted together with another node
        # set by the driver for the node being converted
        self.quantized = False
        self.sixteen = False  # the node runs on int16 tensors: its constant operands are int16 too
        self.fused_act = Act.NONE
        self.fused_node: onnx.NodeProto | None = None
        # set by the driver: would this node be written in int8?
        self.is_int8: Callable[[onnx.NodeProto], bool] = lambda node: False
        # set by the driver: does this node read or write an int16 tensor?
        self.touches_int16: Callable[[onnx.NodeProto], bool] = lambda node: False
        self.fp16_weights: set[str] = set()  # float weights written as FLOAT16 + DEQUANTIZE

    # -- reading values ---------------------------------------------------------------
    def attrs(self, node: onnx.NodeProto) -> dict:
        return self.g.attr(node)

    def const(self, name: str) -> np.ndarray:
        """A constant operand (shape, pads, axes, scales...), dequantized if behind a DQ."""
        if name in self.g.const:
            return self.g.const[name]
        dq = self.g.dq(name)
        if dq is not None and dq.source in self.g.const:
            return dequantize(self.g.const[dq.source], dq.scale, dq.zero_point, dq.axis)
        raise UnsupportedModelError(f"tensor {name!r} must be a constant for the tflite writer")

    def is_const(self, name: str) -> bool:
        if name in self.g.const:
            return True
        dq = self.g.dq(name)
        return dq is not None and dq.source in self.g.const

    def value(self, name: str) -> Value:
        """The value bound to an ONNX name (Q outputs and constants are made on demand)."""
        if name in self.values:
            return self.values[name]
        if name in self.g.const:
            data = self.g.const[name]
            value = Value(tuple(data.shape), identity(data.ndim), None, const=data)
        else:
            node = self.g.producer.get(name)
            if node is None or node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
                raise InternalError(f"tflite writer: {name!r} read before it was converted")
            if node.op_type == "DequantizeLinear":
                return self.float_value(name)
            qp = activation_params(*self.g.q_params(node))
            upstream = self.g.dq(node.input[0])
            if upstream is not None and upstream.source not in self.g.const and \
                    qp.dtype != activation_params(upstream.scale, upstream.zero_point).dtype:
                # DQ -> Q between int8 and int16 grids (mixed precision): one requantizing
                # QUANTIZE instead of DEQUANTIZE + QUANTIZE
                value = self.requant(self.value(upstream.source), qp)
                self.values[name] = value
                return value
            src = self.float_value(node.input[0])
            if src.is_const:
                value = Value(src.onnx_shape, src.perm, qp, const=qp.quantize(src.const))
            else:
                value = self.new_value(src.onnx_shape, src.perm, qp, name)
                self.emit(Op.QUANTIZE, [src], [value])
        self.values[name] = value
        return value

    def float_value(self, name: str) -> Value:
        """``name`` as float32: DequantizeLinear outputs become DEQUANTIZE ops (once)."""
        dq = self.g.dq(name)
        if dq is None:
            value = self.value(name)
            if value.quantized:
                raise InternalError(f"tflite writer: {name!r} is int8 where float was expected")
            return value
        if name not in self._float:
            if dq.source in self.g.const:
                real = dequantize(self.g.const[dq.source], dq.scale, dq.zero_point, dq.axis)
                self._float[name] = Value(tuple(real.shape), identity(real.ndim), None,
                                          const=real)
            else:
                src = self.value(dq.source)
                out = self.new_value(src.onnx_shape, src.perm, None, name)
                self.emit(Op.DEQUANTIZE, [src], [out])
                self._float[name] = out
        return self._float[name]

    def input(self, node: onnx.NodeProto, i: int) -> Value:
        """Input ``i`` of the node in the node's mode: int8 source of its DQ, or float."""
        name = node.input[i]
        if not self.quantized:
            return self.float_value(name)
        dq = self.g.dq(name)
        if dq is None:
            return self.float_value(name)  # a float constant; quantized when materialized
        if dq.source in self.g.const:
            data = self.g.const[dq.source]
            if np.size(dq.scale) > 1:  # per-channel constant operand: requantize per tensor
                return self.float_value(name)
            qp = activation_params(dq.scale, dq.zero_point)
            if self.sixteen:  # a 16x8 kernel takes both operands on int16 (LiteRT checks the types)
                real = dequantize(data, dq.scale, dq.zero_point, dq.axis)
                return Value(tuple(data.shape), identity(data.ndim), None, const=real)
            return Value(tuple(data.shape), identity(data.ndim), qp, const=to_int8_values(data))
        return self.value(dq.source)

    def weight(self, node: onnx.NodeProto, i: int, out_axis: int, transform=None,
               onnx_axis: int = 0) -> Weight:
        """Constant weight input ``i``; ``transform`` (e.g. a transpose) is applied to the
        ONNX array first; ``out_axis`` is the output-channel axis after it, ``onnx_axis``
        before it."""
        name = node.input[i]
        if not self.is_const(name):
            raise UnsupportedModelError(
                f"{node.op_type} {node.name!r}: weight {name!r} is not a constant")
        fix = transform or (lambda a: a)
        dq = self.g.dq(name)
        real = fix(self.const(name)).astype(np.float32)
        if not self.quantized:
            return Weight(real, fp16=name in self.fp16_weights)
        if dq is None:
            q, scale = quantize_weights(real, out_axis)
            return Weight(real, q, scale)
        data = fix(self.g.const[dq.source])
        channels = data.shape[out_axis]
        if np.size(dq.scale) == 1:  # per-tensor: the same scale on every channel
            scale = np.full(channels, float(np.asarray(dq.scale).reshape(-1)[0]), np.float32)
            zp = np.full(channels, int(np.asarray(dq.zero_point).reshape(-1)[0]))
            q, scale = symmetric_weights(data, scale, zp, out_axis)
        elif np.size(dq.scale) == channels and dq.axis is not None and \
                dq.axis % data.ndim == onnx_axis:
            q, scale = symmetric_weights(data, dq.scale, dq.zero_point, out_axis)
        else:  # per-channel along another axis: requantize along the output channels
            q, scale = quantize_weights(real, out_axis)
        return Weight(real, q, scale)

    def bias(self, node: onnx.NodeProto, i: int, x: Value, w: Weight, channels: int,
             alpha: float = 1.0, int32_16x8: bool = False) -> Tensor:
        """Bias tensor: int32 at scale input x weight per channel in int8 mode, else float.
        16x8 (int16 input): int64, or int32 where ``int32_16x8`` (FULLY_CONNECTED) and the
        accumulator cannot overflow (``sixteen.bias_fits_int32``)."""
        name = node.input[i] if i < len(node.input) and node.input[i] else None
        if not self.quantized:
            data = np.zeros(channels, np.float32) if name is None else self.const(name)
            data = np.broadcast_to(np.asarray(data, np.float32).reshape(-1) * alpha, (channels,))
            return self.w.const(np.ascontiguousarray(data, np.float32), f"{node.name}_bias")
        raw, raw_scale = None, None
        if name is not None:
            dq = self.g.dq(name)
            if dq is not None and dq.source in self.g.const and alpha == 1.0:
                raw, raw_scale = self.g.const[dq.source], dq.scale
            else:
                raw = self.const(name).astype(np.float64) * alpha
        if x.qparams.dtype == "int16":  # 16x8: int32 bias when it cannot overflow (sixteen.py)
            q, scale = bias_int64(raw, raw_scale, x.qparams.s, w.scale, channels)
            # the weight's output channels: axis 0 (OHWI, [out, in]) or last (depthwise 1HWC)
            out_axis = 0 if w.q.shape[0] == channels else w.q.ndim - 1
            dtype = "int32" if int32_16x8 and bias_fits_int32(w.q, out_axis, q) else "int64"
            qp = QParams(tuple(float(s) for s in scale), (0,) * channels, 0, dtype)
            return self.w.tensor((channels,), dtype, qp, f"{node.name}_bias", q.astype(dtype))
        q, scale = bias_int32(raw, raw_scale, x.qparams.s, w.scale, channels)
        qp = QParams(tuple(float(s) for s in scale), (0,) * channels, 0, "int32")
        return self.w.tensor((channels,), "int32", qp, f"{node.name}_bias", q)

    # -- writing values ---------------------------------------------------------------
    def new_value(self, onnx_shape: tuple[int, ...], perm: Perm, qp: QParams | None,
                  name: str) -> Value:
        dtype = ("int8" if qp.dtype == "int8" else qp.dtype) if qp else "float32"
        tensor = self.w.tensor(permute(onnx_shape, perm), dtype, qp, name)
        return Value(tuple(onnx_shape), perm, qp, tensor)

    def out_params(self, node: onnx.NodeProto, i: int = 0) -> QParams | None:
        """int8 parameters of output ``i`` (those of its QuantizeLinear), None in float mode."""
        if not self.quantized:
            return None
        target = self.fused_node if (self.fused_node is not None and i == 0) else node
        users = self.g.q_consumers(target.output[i])
        if not users:
            raise InternalError(f"{node.name!r}: int8 output {i} without QuantizeLinear")
        return activation_params(*self.g.q_params(users[0]))

    def output(self, node: onnx.NodeProto, i: int, perm: Perm,
               qp: QParams | None | str = "auto", onnx_shape: tuple[int, ...] | None = None
               ) -> Value:
        """A new tensor for output ``i`` (shape from ONNX shape inference)."""
        target = self.fused_node if (self.fused_node is not None and i == 0) else node
        name = target.output[i]
        shape = onnx_shape or self.g.shape(node.output[i])
        params = self.out_params(node, i) if qp == "auto" else qp
        return self.new_value(shape, perm, params, name)

    def bind(self, node: onnx.NodeProto, i: int, value: Value) -> None:
        """Make ``value`` the result of output ``i`` (requantizing to each Q's parameters)."""
        target = self.fused_node if (self.fused_node is not None and i == 0) else node
        name = target.output[i]
        if not self.quantized:
            self.values[name] = value
            return
        for q in self.g.q_consumers(name) or []:
            qp = activation_params(*self.g.q_params(q))
            self.values[q.output[0]] = self.requant(value, qp)

    def emit(self, builtin: int, inputs: list, outputs: list, options=None,
             version: int = 1) -> None:
        ins = [self.tensor_of(v) if v is not None else None for v in inputs]
        outs = [self.tensor_of(v) for v in outputs]
        self.w.op(builtin, ins, outs, options, version)

    def tensor_of(self, v: Value | Tensor) -> Tensor:
        if isinstance(v, Tensor):
            return v
        if v.tensor is None:
            return self.materialize(v, v.perm).tensor
        return v.tensor

    def float_weight(self, w: Weight, name: str) -> Tensor:
        """A float weight tensor: float32, or float16 + DEQUANTIZE for an fp16 layer."""
        if w.fp16:
            return fp16_weight(self, w.real, name)
        return self.w.const(np.ascontiguousarray(w.real, np.float32), name)

    def int32(self, data, name: str) -> Tensor:
        return self.w.const(np.asarray(data, np.int32), name)

    # -- layout and scale changes -----------------------------------------------------
    def materialize(self, v: Value, perm: Perm, like: QParams | None = None) -> Value:
        """A written tensor for a constant value in layout ``perm`` (quantized in int8
        mode when it was float, with its own min/max parameters)."""
        key = ("const", perm, self.sixteen and v.qparams is None)
        if key in v.cache:
            return v.cache[key]
        data, qp = v.const, v.qparams
        if qp is None and self.quantized and data.dtype.kind == "f":
            qp = const_params16(data) if self.sixteen else const_params(data)
            data = qp.quantize(data)
        data = np.ascontiguousarray(np.transpose(data, perm))
        dtype = qp.dtype if qp is not None else ("float32" if data.dtype.kind == "f" else
                                                 data.dtype.name)
        tensor = self.w.tensor(data.shape, dtype, qp, "const", data)
        out = Value(v.onnx_shape, perm, qp, tensor)
        v.cache[key] = out
        return out

    def to_layout(self, v: Value, perm: Perm) -> Value:
        """``v`` laid out as ``perm``: free when the bytes agree, a RESHAPE when only size-1
        axes move, else one TRANSPOSE (cached per value)."""
        if v.feature_perm is not None:
            raise InternalError("a flatten written in NHWC order reached a non-FC consumer")
        if v.is_const:
            return self.materialize(v, perm)
        if v.perm == perm:
            return v
        if perm in v.cache:
            return v.cache[perm]
        out = self.new_value(v.onnx_shape, perm, v.qparams, f"{v.tensor.name}_t")
        if order_preserving(v.onnx_shape, v.perm, perm):
            self.emit(Op.RESHAPE, [v, self.int32(out.shape, "shape")], [out],
                      _reshape_options(out.shape))
        else:
            self.emit(Op.TRANSPOSE, [v, self.int32(transpose_between(v.perm, perm), "perm")],
                      [out])
        v.cache[perm] = out
        return out

    def requant(self, v: Value, qp: QParams) -> Value:
        """``v`` at other int8 parameters (one QUANTIZE int8->int8), or ``v`` itself."""
        if v.qparams is not None and v.qparams.same_as(qp):
            return v
        if v.is_const:
            real = dequantize(v.const, v.qparams.scale, v.qparams.zero_point, None) \
                if v.quantized else v.const
            return Value(v.onnx_shape, v.perm, qp, const=qp.quantize(real))
        key = ("q", qp)
        if key not in v.cache:
            out = self.new_value(v.onnx_shape, v.perm, qp, f"{v.tensor.name}_rq")
            self.emit(Op.QUANTIZE, [v], [out])
            v.cache[key] = out
        return v.cache[key]

    def align(self, values: list[Value], rank: int) -> tuple[list[Value], Perm]:
        """Bring operands of an elementwise op to one layout: the layout most non-constant
        full-rank operands already have. Lower-rank operands are broadcast-reshaped."""
        votes: dict[Perm, int] = {}
        for v in values:
            if not v.is_const and v.rank == rank:
                votes[v.perm] = votes.get(v.perm, 0) + 1
        perm = max(votes, key=votes.get) if votes else identity(rank)
        out = []
        for v in values:
            if v.rank < rank:
                shape = (1,) * (rank - v.rank) + tuple(v.onnx_shape)
                if v.is_const:
                    v = Value(shape, identity(rank), v.qparams, const=v.const.reshape(shape))
                else:
                    flat = self.to_layout(v, identity(v.rank))
                    wide = self.new_value(shape, identity(rank), v.qparams,
                                          f"{flat.tensor.name}_r")
                    self.emit(Op.RESHAPE, [flat, self.int32(shape, "shape")], [wide],
                              _reshape_options(shape))
                    v = wide
            out.append(self.to_layout(v, perm))
        return out, perm


def const_params(data: np.ndarray) -> QParams:
    """Per-tensor int8 parameters covering a float constant (and zero)."""
    lo, hi = min(float(np.min(data)), 0.0), max(float(np.max(data)), 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    return QParams.per_tensor(scale, int(np.clip(np.rint(-128 - lo / scale), -128, 127)))


def _reshape_options(shape) -> S.ReshapeOptionsT:
    opts = S.ReshapeOptionsT()
    opts.newShape = [int(d) for d in shape]
    return opts
