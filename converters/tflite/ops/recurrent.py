"""LSTM and GRU -> float ops unrolled over the (static) sequence, inside the int8 graph.

LiteRT has no general integer kernel for recurrent cells (its int8 LSTM needs 16-bit cell
state and calibrated intermediate scales that a QDQ ONNX graph does not carry; there is no
GRU builtin at all), and onnxruntime's QDQ quantizer leaves these ops float as well. So they
are always written as float between DEQUANTIZE and QUANTIZE, and the driver lists each one
in the manifest's ``float_ops``. Each time step is FULLY_CONNECTED on the hidden state plus
LOGISTIC/TANH/MUL/ADD/SUB; the input projection of all steps is one FULLY_CONNECTED.

Covered: ``layout`` 0, forward/reverse/bidirectional, default activations, no clip, no
peepholes, ``sequence_lens`` absent or equal to the full length; GRU with either
``linear_before_reset``.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext, _reshape_options
from edgekit.converters.tflite.layout import identity
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S
from edgekit.converters.tflite.writer import Tensor

_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


class _Cell:
    """Float tensor arithmetic on 2-D [batch, width] tensors for one recurrent node."""

    def __init__(self, ctx: ConversionContext, node: onnx.NodeProto) -> None:
        self.ctx, self.name = ctx, node.name or node.output[0]
        # weights written once and shared by every time step (ddddocr's bidirectional LSTM,
        # 32 steps of a 2048x512 recurrent weight: 286 MB of copies in the .tflite otherwise)
        # (the arrays are kept too: a freed one's address could come back for another)
        self._weights: dict[tuple, tuple[Tensor, np.ndarray]] = {}

    def tensor(self, shape, tag: str) -> Tensor:
        return self.ctx.w.tensor(tuple(shape), "float32", None, f"{self.name}_{tag}")

    def const(self, data: np.ndarray, tag: str) -> Tensor:
        return self.ctx.w.const(np.ascontiguousarray(data, np.float32), f"{self.name}_{tag}")

    def fc(self, x: Tensor, weight: np.ndarray, bias: np.ndarray | None, tag: str) -> Tensor:
        out = self.tensor((x.shape[0], weight.shape[0]), tag)
        opts = S.FullyConnectedOptionsT()
        b = None if bias is None else self.const(bias, f"{tag}_b")
        key = (weight.__array_interface__["data"][0], weight.shape, weight.strides)
        if key not in self._weights:
            self._weights[key] = (self.const(weight, f"{tag}_w"), weight)
        self.ctx.emit(Op.FULLY_CONNECTED, [x, self._weights[key][0], b], [out], opts)
        return out

    def binary(self, builtin: int, a: Tensor, b: Tensor, tag: str) -> Tensor:
        out = self.tensor(a.shape, tag)
        options = {Op.ADD: S.AddOptionsT, Op.SUB: S.SubOptionsT, Op.MUL: S.MulOptionsT}
        self.ctx.emit(builtin, [a, b], [out], options[builtin]())
        return out

    def unary(self, builtin: int, a: Tensor, tag: str) -> Tensor:
        out = self.tensor(a.shape, tag)
        self.ctx.emit(builtin, [a], [out])
        return out

    def split(self, x: Tensor, parts: int, tag: str) -> list[Tensor]:
        width = x.shape[1] // parts
        outs = [self.tensor((x.shape[0], width), f"{tag}{i}") for i in range(parts)]
        opts = S.SplitOptionsT()
        opts.numSplits = parts
        self.ctx.emit(Op.SPLIT, [self.ctx.int32(1, "axis"), x], outs, opts)
        return outs

    def rows(self, x: Tensor, begin: int, count: int, tag: str) -> Tensor:
        out = self.tensor((count, x.shape[1]), tag)
        self.ctx.emit(Op.STRIDED_SLICE, [x, self.ctx.int32([begin, 0], "begin"),
                                         self.ctx.int32([begin + count, x.shape[1]], "end"),
                                         self.ctx.int32([1, 1], "strides")],
                      [out], S.StridedSliceOptionsT())
        return out

    def reshape(self, x: Tensor, shape, tag: str) -> Tensor:
        out = self.tensor(shape, tag)
        self.ctx.emit(Op.RESHAPE, [x, self.ctx.int32(list(shape), "shape")], [out],
                      _reshape_options(shape))
        return out

    def concat(self, parts: list[Tensor], axis: int, shape, tag: str) -> Tensor:
        if len(parts) == 1 and tuple(parts[0].shape) == tuple(shape):
            return parts[0]
        out = self.tensor(shape, tag)
        opts = S.ConcatenationOptionsT()
        opts.axis = axis
        self.ctx.emit(Op.CONCATENATION, parts, [out], opts)
        return out


def _check(ctx: ConversionContext, node: onnx.NodeProto, seq: int) -> None:
    a = ctx.attrs(node)
    if int(a.get("layout", 0)) != 0:
        raise unsupported(node, "layout=1 (batch first) is not written")
    acts = [v.decode() if isinstance(v, bytes) else v for v in a.get("activations", [])]
    default = _DEFAULT_ACTS[node.op_type]
    if acts and (acts[:len(default)] != default or acts[len(default):] not in ([], default)):
        raise unsupported(node, f"activations {acts} are not written (only {default})")
    if a.get("clip") is not None:
        raise unsupported(node, "cell clipping is not written")
    if node.op_type == "LSTM" and len(node.input) > 7 and node.input[7]:
        raise unsupported(node, "peephole connections are not written")
    if len(node.input) > 4 and node.input[4]:
        lens = ctx.const(node.input[4]) if ctx.is_const(node.input[4]) else None
        if lens is None or np.any(np.asarray(lens) != seq):
            raise unsupported(node, "sequence_lens other than the full length are not written")


def _state(cell: _Cell, ctx: ConversionContext, node: onnx.NodeProto, i: int, d: int,
           batch: int, hidden: int, tag: str) -> Tensor:
    """Initial state of direction ``d`` as a [batch, hidden] float tensor."""
    if len(node.input) <= i or not node.input[i]:
        return cell.const(np.zeros((batch, hidden), np.float32), tag)
    if ctx.is_const(node.input[i]):
        return cell.const(ctx.const(node.input[i])[d], tag)
    v = ctx.to_layout(ctx.float_value(node.input[i]), identity(3))
    flat = cell.reshape(ctx.tensor_of(v), (v.onnx_shape[0] * batch, hidden), f"{tag}_all")
    return cell.rows(flat, d * batch, batch, tag)


def convert_recurrent(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    is_lstm = node.op_type == "LSTM"
    gates = 4 if is_lstm else 3
    x = ctx.to_layout(ctx.float_value(node.input[0]), identity(3))
    seq, batch, width = x.onnx_shape
    _check(ctx, node, seq)
    w, r = ctx.const(node.input[1]), ctx.const(node.input[2])
    dirs, hidden = w.shape[0], r.shape[2]
    has_b = len(node.input) > 3 and node.input[3]
    b = ctx.const(node.input[3]) if has_b else np.zeros((dirs, 2 * gates * hidden), np.float32)
    direction = ctx.attrs(node).get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    before_reset = bool(ctx.attrs(node).get("linear_before_reset", 0))
    cell = _Cell(ctx, node)
    steps = cell.reshape(ctx.tensor_of(x), (seq * batch, width), "x")
    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or (direction == "bidirectional" and d == 1)
        wb, rb = b[d, :gates * hidden], b[d, gates * hidden:]
        # GRU's candidate gate keeps its recurrent bias apart (it sits inside r * (.))
        proj_bias = wb + rb if is_lstm else wb + np.concatenate([rb[:2 * hidden],
                                                                 np.zeros(hidden)])
        xw = cell.fc(steps, w[d], proj_bias, f"d{d}_xw")
        h = _state(cell, ctx, node, 5, d, batch, hidden, f"d{d}_h0")
        c = _state(cell, ctx, node, 6, d, batch, hidden, f"d{d}_c0") if is_lstm else None
        outs: list[Tensor] = [None] * seq  # type: ignore[list-item]
        order = range(seq - 1, -1, -1) if reverse else range(seq)
        for t in order:
            tag = f"d{d}_t{t}"
            xt = cell.rows(xw, t * batch, batch, f"{tag}_x")
            if is_lstm:
                g = cell.binary(Op.ADD, xt, cell.fc(h, r[d], None, f"{tag}_hr"), f"{tag}_g")
                gi, go, gf, gc = cell.split(g, 4, f"{tag}_gate")
                i_, o_, f_ = (cell.unary(Op.LOGISTIC, v, f"{tag}_s{k}")
                              for k, v in enumerate((gi, go, gf)))
                cand = cell.unary(Op.TANH, gc, f"{tag}_cand")
                c = cell.binary(Op.ADD, cell.binary(Op.MUL, f_, c, f"{tag}_fc"),
                                cell.binary(Op.MUL, i_, cand, f"{tag}_ic"), f"{tag}_c")
                h = cell.binary(Op.MUL, o_, cell.unary(Op.TANH, c, f"{tag}_tc"), f"{tag}_h")
            else:
                h = _gru_step(cell, xt, h, r[d], rb, hidden, before_reset, tag)
            outs[t] = h
        ys.append(cell.reshape(cell.concat(outs, 0, (seq * batch, hidden), f"d{d}_y"),
                               (seq, 1, batch, hidden), f"d{d}_y4"))
        hs.append(cell.reshape(h, (1, batch, hidden), f"d{d}_hn"))
        if is_lstm:
            cs.append(cell.reshape(c, (1, batch, hidden), f"d{d}_cn"))
    results = [cell.concat(ys, 1, (seq, dirs, batch, hidden), "y"),
               cell.concat(hs, 0, (dirs, batch, hidden), "h"),
               cell.concat(cs, 0, (dirs, batch, hidden), "c") if is_lstm else None]
    for i, name in enumerate(node.output):
        if name and results[i] is not None:
            out = ctx.output(node, i, identity(len(results[i].shape)), None)
            ctx.emit(Op.RESHAPE, [results[i], ctx.int32(list(out.shape), "shape")], [out],
                     _reshape_options(out.shape))
            ctx.bind(node, i, out)


def _gru_step(cell: _Cell, xt: Tensor, h: Tensor, r: np.ndarray, rb: np.ndarray, hidden: int,
              before_reset: bool, tag: str) -> Tensor:
    """One GRU step (gates z, r, h in ONNX order); ``xt`` already holds x W^T + Wb (+ Rb
    for z and r)."""
    xz, xr, xn = cell.split(xt, 3, f"{tag}_xg")
    hzr = cell.fc(h, r[:2 * hidden], None, f"{tag}_hzr")
    hz, hr = cell.split(hzr, 2, f"{tag}_hg")
    z = cell.unary(Op.LOGISTIC, cell.binary(Op.ADD, xz, hz, f"{tag}_az"), f"{tag}_z")
    reset = cell.unary(Op.LOGISTIC, cell.binary(Op.ADD, xr, hr, f"{tag}_ar"), f"{tag}_r")
    if before_reset:
        hn = cell.fc(h, r[2 * hidden:], rb[2 * hidden:], f"{tag}_hn")
        inner = cell.binary(Op.MUL, reset, hn, f"{tag}_rhn")
    else:
        inner = cell.fc(cell.binary(Op.MUL, reset, h, f"{tag}_rh"), r[2 * hidden:],
                        rb[2 * hidden:], f"{tag}_hn")
    n = cell.unary(Op.TANH, cell.binary(Op.ADD, xn, inner, f"{tag}_an"), f"{tag}_n")
    # h' = (1 - z) * n + z * h = n + z * (h - n)
    return cell.binary(Op.ADD, n, cell.binary(Op.MUL, z, cell.binary(Op.SUB, h, n,
                                                                      f"{tag}_d"),
                                              f"{tag}_zd"), f"{tag}_hnew")


SPECS = {
    "LSTM": OpSpec(convert_recurrent, int8=False),
    "GRU": OpSpec(convert_recurrent, int8=False),
}
