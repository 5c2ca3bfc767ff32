"""Gemm / MatMul with a constant weight -> FULLY_CONNECTED (per-channel int8 weights on
axis 0, int32 bias); MatMul of two activations -> BATCH_MATMUL."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value, identity
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.schema import Op, S


def convert_gemm(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    a = ctx.attrs(node)
    if a.get("transA", 0):
        raise unsupported(node, "transA=1 is not written")
    if not ctx.is_const(node.input[1]):
        raise unsupported(node, "the weight B must be a constant")
    trans_b = bool(a.get("transB", 0))
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    if len(node.input) > 2 and node.input[2] and not ctx.is_const(node.input[2]):
        _gemm_plus_activation(ctx, node, trans_b, alpha, beta)
        return
    _fully_connected(ctx, node, (lambda t: t) if trans_b else (lambda t: t.T), alpha,
                     bias_index=2, beta=beta, onnx_axis=0 if trans_b else 1)


def convert_matmul(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if ctx.is_const(node.input[1]):
        if len(ctx.g.shape(node.input[1])) != 2:
            raise unsupported(node, "a constant B of rank > 2 is not written")
        _fully_connected(ctx, node, lambda t: t.T, 1.0, bias_index=None, beta=1.0,
                         onnx_axis=1)
        return
    # two activations: BATCH_MATMUL on the ONNX (identity) layouts
    x, y = ctx.input(node, 0), ctx.input(node, 1)
    if x.rank != y.rank or x.rank < 2:
        raise unsupported(node, f"BATCH_MATMUL needs equal ranks >= 2, got {x.rank} and {y.rank}")
    x, y = ctx.to_layout(x, identity(x.rank)), ctx.to_layout(y, identity(y.rank))
    out = ctx.output(node, 0, identity(len(ctx.g.shape(node.output[0]))))
    ctx.emit(Op.BATCH_MATMUL, [x, y], [out], S.BatchMatMulOptionsT())
    ctx.bind(node, 0, out)


def _gemm_plus_activation(ctx: ConversionContext, node: onnx.NodeProto, trans_b: bool,
                          alpha: float, beta: float) -> None:
    """Gemm whose C is an activation (onnxruntime fuses MatMul + Add into one): a bias-free
    FULLY_CONNECTED, then ADD. The intermediate's int8 range is y's range minus C's, so it
    cannot clip where y does not."""
    if beta != 1.0:
        raise unsupported(node, "an activation C with beta != 1 is not written")
    c = ctx.input(node, 2)
    qp = ctx.out_params(node)
    mid_qp = None
    if qp is not None:
        lo_y, hi_y = (-128 - qp.zp) * qp.s, (127 - qp.zp) * qp.s
        cq = c.qparams
        lo_c, hi_c = (-128 - cq.zp) * cq.s, (127 - cq.zp) * cq.s
        lo, hi = min(lo_y - hi_c, 0.0), max(hi_y - lo_c, 0.0)
        scale = (hi - lo) / 255.0
        mid_qp = QParams.per_tensor(scale, int(np.clip(np.rint(-128 - lo / scale), -128, 127)))
    shape = ctx.g.shape(node.output[0])
    mid = ctx.new_value(shape, identity(len(shape)), mid_qp, f"{node.output[0]}_fc")
    fused, ctx.fused_act = ctx.fused_act, 0
    _fully_connected(ctx, node, (lambda t: t) if trans_b else (lambda t: t.T), alpha,
                     bias_index=None, beta=1.0, onnx_axis=0 if trans_b else 1, out=mid)
    (m, cv), perm = ctx.align([mid, c], len(shape))
    out = ctx.output(node, 0, perm)
    opts = S.AddOptionsT()
    opts.fusedActivationFunction = fused
    ctx.emit(Op.ADD, [m, cv], [out], opts)
    ctx.bind(node, 0, out)


def _fully_connected(ctx: ConversionContext, node: onnx.NodeProto, to_out_in, alpha: float,
                     bias_index: int | None, beta: float, onnx_axis: int,
                     out: Value | None = None) -> None:
    x = ctx.input(node, 0)
    feature_perm = x.feature_perm
    if feature_perm is None:
        x = ctx.to_layout(x, identity(x.rank))

    def fix(t: np.ndarray) -> np.ndarray:
        t = to_out_in(t)  # [out, in]
        return t[:, feature_perm] if feature_perm is not None else t

    w = ctx.weight(node, 1, 0, fix, onnx_axis)
    cout = w.real.shape[0]
    if alpha != 1.0:
        # fold alpha into the weights: per-channel scales in int8, values in float
        w.real = w.real * np.float32(alpha)
        if w.scale is not None:
            if alpha < 0:
                w.q = (-w.q.astype(np.int16)).clip(-127, 127).astype(np.int8)
            w.scale = (w.scale * np.float32(abs(alpha))).astype(np.float32)
    if bias_index is not None and bias_index < len(node.input) and node.input[bias_index]:
        if int(np.prod(ctx.g.shape(node.input[bias_index]))) not in (1, cout):
            raise unsupported(node, "bias C must broadcast along the output features")
        bias = ctx.bias(node, bias_index, x, w, cout, alpha=beta, int32_16x8=True)
    else:
        bias = ctx.bias(node, 99, x, w, cout, int32_16x8=True)
    if w.q is None:
        filt = ctx.float_weight(w, f"{node.name}_w")
    else:
        qp = QParams(tuple(float(s) for s in w.scale), (0,) * cout, 0)
        filt = ctx.w.tensor(w.q.shape, "int8", qp, f"{node.name}_w", w.q)
    out_shape = ctx.g.shape(node.output[0])
    bind = out is None
    if out is None:
        out = ctx.output(node, 0, identity(len(out_shape)))
    opts = S.FullyConnectedOptionsT()
    opts.fusedActivationFunction = ctx.fused_act
    opts.keepNumDims = len(out_shape) > 2
    ctx.emit(Op.FULLY_CONNECTED, [x, filt, bias], [out], opts)
    if bind:
        ctx.bind(node, 0, out)


SPECS = {
    "Gemm": OpSpec(convert_gemm, dq_inputs=(0,), fusable=True),
    "MatMul": OpSpec(convert_matmul, dq_inputs=(0, 1), fusable=True),
}
