"""Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSwish (also HardSigmoid(x)*x as onnxruntime's
pre-processing inlines it), HardSigmoid (int8 ADD + MUL alone, as in squeeze-excite). LOGISTIC and TANH have fixed int8 output scales in
LiteRT: when the graph's scale differs they run on int16 (one rounding, as onnxruntime's)."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.quant import FIXED_LOGISTIC, FIXED_TANH, INT8_MAX, QParams
from edgekit.converters.tflite.schema import Act, Op, S
from edgekit.converters.tflite.sixteen import INT16_MAX


def clip_bounds(ctx: ConversionContext, node: onnx.NodeProto) -> tuple[float, float]:
    if node.op_type == "Relu":
        return 0.0, float("inf")
    a = ctx.attrs(node)
    lo, hi = a.get("min", float("-inf")), a.get("max", float("inf"))
    if len(node.input) > 1 and node.input[1]:
        lo = float(np.asarray(ctx.const(node.input[1])).reshape(-1)[0])
    if len(node.input) > 2 and node.input[2]:
        hi = float(np.asarray(ctx.const(node.input[2])).reshape(-1)[0])
    return float(lo), float(hi)


def fused_code(ctx: ConversionContext, node: onnx.NodeProto) -> int | None:
    """The fused-activation code equal to this Relu/Clip, or None."""
    if node.op_type not in ("Relu", "Clip"):
        return None
    if not all(ctx.is_const(i) for i in node.input[1:] if i):
        return None  # a bound computed from the data (ops/clip_tensor.py)
    lo, hi = clip_bounds(ctx, node)
    return {(0.0, float("inf")): Act.RELU, (0.0, 6.0): Act.RELU6,
            (-1.0, 1.0): Act.RELU_N1_TO_1}.get((lo, hi))


def _unary(ctx: ConversionContext, node: onnx.NodeProto, builtin: int, options=None,
           fixed: tuple[float, int] | None = None) -> None:
    x = ctx.input(node, 0)
    if fixed is not None and ctx.quantized and _int16_detour(ctx, node, x, fixed):
        return
    if fixed is not None and ctx.quantized:
        # the kernel insists on its own output scale (int16: 1/32768, zero point 0);
        # requantize afterwards if needed
        own = QParams.per_tensor(1.0 / 32768.0, 0, "int16") if x.qparams is not None and \
            x.qparams.dtype == "int16" else QParams.per_tensor(*fixed)
        out = ctx.output(node, 0, x.perm, own)
    else:
        out = ctx.output(node, 0, x.perm)
    ctx.emit(builtin, [x], [out], options)
    ctx.bind(node, 0, out)


def _int16_detour(ctx: ConversionContext, node: onnx.NodeProto, x, fixed: tuple[float, int]
                  ) -> bool:
    """LOGISTIC/TANH whose graph scale is not the kernel's fixed int8 one, on int16.

    At int8, the kernel rounds to its fixed 1/256 (1/128) grid and a QUANTIZE rounds again to
    the graph's scale: two roundings, a step off onnxruntime's one on some elements, which a
    recurrent cell compounds over time. On int16 the input moves exactly (``q - zp`` at the
    same scale), the kernel's output grid is 1/32768, and the one QUANTIZE back to int8 is
    the only rounding that matters. Not on 4-D feature maps (SiLU, squeeze-excite gates,
    segmentation heads): XNNPACK runs the int8 form there and an int16 LOGISTIC would split
    its partition, while one double rounding costs at most one step on that tensor."""
    want = ctx.out_params(node)
    if x.rank == 4 or x.is_const or x.qparams is None or x.qparams.dtype != "int8" or \
            want is None or \
            want.dtype != "int8" or want.same_as(QParams.per_tensor(*fixed)):
        return False
    x16 = ctx.requant(x, QParams.per_tensor(x.qparams.s, 0, "int16"))
    out = ctx.output(node, 0, x.perm, QParams.per_tensor(1.0 / 32768.0, 0, "int16"))
    ctx.emit(Op.LOGISTIC if node.op_type == "Sigmoid" else Op.TANH, [x16], [out])
    ctx.bind(node, 0, out)
    return True


def convert_clip(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    lo, hi = clip_bounds(ctx, node)
    table = {(0.0, float("inf")): Op.RELU, (0.0, 6.0): Op.RELU6}
    if not ctx.sixteen:  # LiteRT's RELU_N1_TO_1 and RELU_0_TO_1 have no int16 kernel
        table.update({(-1.0, 1.0): Op.RELU_N1_TO_1, (0.0, 1.0): Op.RELU_0_TO_1})
    if (lo, hi) in table:
        _unary(ctx, node, table[(lo, hi)])
        return
    # general clip: MAXIMUM / MINIMUM with constants at the output's parameters
    x = ctx.input(node, 0)
    qp = ctx.out_params(node)
    if qp is not None:
        x = ctx.requant(x, qp)
    out = ctx.output(node, 0, x.perm)
    cur = x
    for bound, builtin, name in ((lo, Op.MAXIMUM, "lo"), (hi, Op.MINIMUM, "hi")):
        if not np.isfinite(bound):
            continue
        data = np.full([1] * x.rank, bound, np.float32)
        const = ctx.w.const(qp.quantize(data) if qp else data, f"{node.name}_{name}", qp)
        last = builtin == Op.MINIMUM or not np.isfinite(hi)
        dst = out if last else ctx.new_value(x.onnx_shape, x.perm, qp, f"{node.name}_max")
        ctx.emit(builtin, [cur, const], [dst])
        cur = dst
    if cur is x:  # clip without bounds
        ctx.emit(Op.RESHAPE, [x, ctx.int32(out.shape, "shape")], [out])
    ctx.bind(node, 0, out)


def convert_leaky(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    opts = S.LeakyReluOptionsT()
    opts.alpha = float(ctx.attrs(node).get("alpha", 0.01))
    _unary(ctx, node, Op.LEAKY_RELU, opts)


def _hardswish_partner(ctx: ConversionContext, node: onnx.NodeProto) -> onnx.NodeProto | None:
    """The Mul that makes ``HardSigmoid(x) * x`` a HardSwish (alpha 1/6, beta 0.5)."""
    a = ctx.attrs(node)
    if not (np.isclose(a.get("alpha", 0.2), 1 / 6) and np.isclose(a.get("beta", 0.5), 0.5)):
        return None
    g, src = ctx.g, node.input[0]
    out = node.output[0]
    hops = [out]
    users = g.consumers.get(out, [])
    if len(users) == 1 and users[0].op_type == "QuantizeLinear":  # int8: through Q -> DQ
        q_out = users[0].output[0]
        dqs = g.consumers.get(q_out, [])
        if len(dqs) != 1 or dqs[0].op_type != "DequantizeLinear":
            return None
        hops = [q_out, dqs[0].output[0]]
        users = g.consumers.get(hops[-1], [])
    if len(users) != 1 or users[0].op_type != "Mul" or any(h in g.outputs for h in hops):
        return None
    mul = users[0]
    other = mul.input[0] if mul.input[1] == hops[-1] else mul.input[1]

    def origin(name: str) -> str:
        dq = g.dq(name)
        return dq.source if dq is not None else name

    return mul if origin(other) == origin(src) else None


def convert_hardsigmoid(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    mul = _hardswish_partner(ctx, node)
    if mul is not None and ctx.quantized == _mul_quantized(ctx, mul) and not ctx.sixteen \
            and not ctx.touches_int16(mul):  # LiteRT's HARD_SWISH has no int16 kernel
        x = ctx.input(node, 0)
        ctx.fused_node = mul  # write straight to the Mul's output
        out = ctx.output(node, 0, x.perm, onnx_shape=ctx.g.shape(mul.output[0]))
        ctx.emit(Op.HARD_SWISH, [x], [out])
        ctx.bind(node, 0, out)
        ctx.done.add(id(mul))
        return
    if ctx.quantized:
        _hardsigmoid_int8(ctx, node)
        return
    # alone, float: max(0, min(1, alpha * x + beta))
    a = ctx.attrs(node)
    x = ctx.input(node, 0)
    scaled = ctx.new_value(x.onnx_shape, x.perm, None, f"{node.name}_ax")
    shifted = ctx.new_value(x.onnx_shape, x.perm, None, f"{node.name}_axb")
    ones = [1] * x.rank
    ctx.emit(Op.MUL, [x, ctx.w.const(np.full(ones, a.get("alpha", 0.2), np.float32), "alpha")],
             [scaled], S.MulOptionsT())
    ctx.emit(Op.ADD, [scaled, ctx.w.const(np.full(ones, a.get("beta", 0.5), np.float32),
                                          "beta")], [shifted], S.AddOptionsT())
    out = ctx.output(node, 0, x.perm)
    ctx.emit(Op.RELU_0_TO_1, [shifted], [out])
    ctx.bind(node, 0, out)


def _hardsigmoid_int8(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    """alpha * clamp(x + beta / alpha, 0, 1 / alpha) with one rounding: the ADD writes
    t = x + beta / alpha at scale s / alpha and the output's zero point z, so its int8 codes
    already are those of y = alpha * t at (s, z); a MUL by alpha, held exactly (code 127 at
    scale alpha / 127), then moves them to (s, z) unchanged. The clamp at 0 is the ADD's
    fused RELU (RELU6 = the clamp at 1 too when alpha is 1/6); a MINIMUM clamps at 1
    otherwise, when the output's int8 range reaches above 1."""
    a = ctx.attrs(node)
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    x = ctx.input(node, 0)
    x = ctx.to_layout(x, x.perm) if x.is_const else x
    qp = ctx.out_params(node)
    # on int16 (16x8) the same chain with int16 constants: code 32767 holds alpha exactly
    top_code = INT16_MAX if qp.dtype == "int16" else INT8_MAX
    ones = [1] * x.rank
    t_qp = QParams.per_tensor(qp.s / alpha, qp.zp, qp.dtype)
    t = ctx.new_value(x.onnx_shape, x.perm, t_qp, f"{node.name}_t")
    shift = np.full(ones, beta / alpha, np.float32)
    shift_qp = _const_params(beta / alpha, qp.dtype)
    opts = S.AddOptionsT()
    opts.fusedActivationFunction = Act.RELU6 if np.isclose(alpha, 1 / 6) else Act.RELU
    opts.potScaleInt16 = False  # general int16 scales, not only powers of two
    ctx.emit(Op.ADD, [x, ctx.w.const(shift_qp.quantize(shift), f"{node.name}_shift",
                                     shift_qp)], [t], opts)
    out = ctx.output(node, 0, x.perm)
    top = (top_code - qp.zp) * qp.s
    clamp = opts.fusedActivationFunction != Act.RELU6 and top > 1.0 + qp.s / 2
    y = ctx.new_value(x.onnx_shape, x.perm, qp, f"{node.name}_y") if clamp else out
    scale_const = ctx.w.const(np.full(ones, top_code, qp.dtype), f"{node.name}_alpha",
                              QParams.per_tensor(alpha / top_code, 0, qp.dtype))
    ctx.emit(Op.MUL, [t, scale_const], [y], S.MulOptionsT())
    if clamp:
        ctx.emit(Op.MINIMUM, [y, ctx.w.const(qp.quantize(np.ones(ones)), f"{node.name}_one",
                                              qp)], [out])
    ctx.bind(node, 0, out)


def _const_params(value: float, dtype: str = "int8") -> QParams:
    """A scalar constant held exactly: code +-127 (int16: +-32767) at scale |value| / that."""
    top = INT16_MAX if dtype == "int16" else INT8_MAX
    return QParams.per_tensor(abs(value) / top if value else 1.0, 0, dtype)


def _mul_quantized(ctx: ConversionContext, mul: onnx.NodeProto) -> bool:
    return ctx.is_int8(mul)


def _hs_int8(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """As HARD_SWISH when its Mul is int8 too, else alone (needs alpha > 0)."""
    mul = _hardswish_partner(ctx, node)
    if mul is not None and _mul_quantized(ctx, mul):
        return True
    return float(ctx.attrs(node).get("alpha", 0.2)) > 0


SPECS = {
    "Relu": OpSpec(lambda c, n: _unary(c, n, Op.RELU)),
    "Clip": OpSpec(convert_clip),
    "LeakyRelu": OpSpec(convert_leaky),
    "Sigmoid": OpSpec(lambda c, n: _unary(c, n, Op.LOGISTIC, fixed=FIXED_LOGISTIC)),
    "Tanh": OpSpec(lambda c, n: _unary(c, n, Op.TANH, fixed=FIXED_TANH)),
    "HardSwish": OpSpec(lambda c, n: _unary(c, n, Op.HARD_SWISH)),
    "HardSigmoid": OpSpec(convert_hardsigmoid, can_int8=_hs_int8),
}
