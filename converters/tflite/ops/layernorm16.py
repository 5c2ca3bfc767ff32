"""LayerNormalization between int8 (or int16) tensors, computed on LiteRT's int16 kernels.

LiteRT has no LayerNorm kernel, and an int8 MEAN/MUL/RSQRT chain would round the variance
and its reciprocal root to 8 bits. Its int16 kernels (symmetric, zero point 0) for QUANTIZE,
MEAN, SUB, MUL, ADD, SQRT and DIV keep 15 bits, so the node is written as

    QUANTIZE(int8 -> int16), MEAN, SUB, MUL, MEAN, ADD(eps), SQRT, DIV (, MUL gamma)
    (, ADD beta), QUANTIZE(int16 -> int8)

with no float op. The inner tensors have no calibrated range (they do not exist in the
ONNX graph), so each int16 scale is a bound derived from the int8 input's range R, its step
s, the epsilon and the output's calibrated range:

- centred values lie within R, their squares within R^2, the variance of values in a range
  of width R within R^2 / 4;
- the root is at most sqrt(R^2 / 4 + eps); the reciprocal root (what the normalized
  values' bound uses) is bounded by 1 / sqrt(eps + (s/2)^2): a row whose spread is under half
  an input step is constant as far as the int8 input can tell (its centred values are ~0);
- a normalized value is at most sqrt(n) in size for n normalized elements;
- after gamma (and before beta) a value outside the output's range minus beta is clipped by
  the output's int8 QUANTIZE anyway, so that bound is used when tighter.

The square's step R^2 / 32767 is about the square of the int8 input step, so the variance
keeps ~0.1% precision for rows spread over tens of input steps.

LiteRT 2.3's int16 MEAN sums in int32: over more than 65535 elements (Moonshine's GroupNorm
normalizes 416 x 250 = 104000) a sum of large codes wraps (a mean of 0.9 came back as
-0.36). Such a mean is taken in stages of at most 65535 elements (``mean16``): one axis at
a time, and an axis longer than that split by a RESHAPE into two (a mean of equal-sized
groups' means is the mean).
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import Value
from edgekit.converters.tflite.quant import QParams
from edgekit.converters.tflite.schema import Op, S
from edgekit.converters.tflite.sixteen import INT16_MAX

from edgekit.errors import InternalError, UnsupportedModelError

MEAN16_MAX = 65535  # elements one int16 MEAN may sum: 65535 x 32768 fits in int32


def q16(bound: float) -> QParams:
    """Symmetric int16 parameters covering [-bound, bound]."""
    return QParams.per_tensor(max(float(bound), 1e-12) / INT16_MAX, 0, "int16")


def const16(ctx: ConversionContext, data: np.ndarray, perm: tuple[int, ...], name: str):
    """A float constant as an int16 tensor (own symmetric scale) in layout ``perm``."""
    qp = q16(float(np.max(np.abs(data))) if data.size else 1.0)
    ints = np.clip(np.rint(data / qp.s), -INT16_MAX, INT16_MAX).astype(np.int16)
    return ctx.w.const(np.ascontiguousarray(np.transpose(ints, perm)), name, qp)


def int8_range(qp: QParams) -> tuple[float, float]:
    """The real range a per-tensor int8 (or symmetric int16) tensor covers."""
    if qp.dtype == "int16":
        return -qp.s * INT16_MAX, qp.s * INT16_MAX
    return qp.s * (-128 - qp.zp), qp.s * (127 - qp.zp)


def convert_layernorm16(ctx: ConversionContext, node: onnx.NodeProto, x: Value, axes,
                        normalized: list[int], reduced: tuple[int, ...], eps: float,
                        gamma: np.ndarray | None, beta: np.ndarray | None) -> None:
    """Write the int16 chain for an int8 ``x`` (see the module doc); binds output 0. An int16
    ``x`` (the guard's int16 rung around it) enters the chain without its first QUANTIZE."""
    if x.qparams is None or x.qparams.dtype not in ("int8", "int16"):
        raise InternalError(f"{node.name!r}: int16 LayerNorm needs an int8 or int16 input")
    perm, shape = x.perm, x.onnx_shape
    out = ctx.output(node, 0, perm)
    lo, hi = int8_range(x.qparams)
    y_lo, y_hi = int8_range(out.qparams)
    width = hi - lo
    # an int16 input's grid is the int8 range on finer steps: bound the reciprocal root by the
    # int8 step of that range (a bound from the int16 step, near 1/sqrt(eps), would leave
    # the RSQRT output a coarse grid for the rows that matter)
    step = x.qparams.s if x.qparams.dtype == "int8" else width / 255
    inv_max = 1.0 / np.sqrt(eps + (step / 2) ** 2)
    n = int(np.prod([shape[d] for d in normalized]))
    keep = S.ReducerOptionsT()
    keep.keepDims = True

    def t(s: tuple[int, ...], bound: float, what: str) -> Value:
        return ctx.new_value(s, perm, q16(bound), f"{node.name}_{what}16")

    def emit(builtin: int, ins: list, bound: float, what: str, s=shape, options=None) -> Value:
        dst = t(s, bound, what)
        if builtin == Op.MEAN:
            mean16(ctx, ins[0], [perm.index(d) for d in normalized], dst, ins[1])
            return dst
        ctx.emit(builtin, ins, [dst], options)
        return dst

    def add_options():
        o = S.AddOptionsT()
        o.potScaleInt16 = False  # general int16 scales, not only powers of two
        return o

    sub = S.SubOptionsT()
    sub.potScaleInt16 = False
    x16 = x if x.qparams.dtype == "int16" else emit(Op.QUANTIZE, [x], max(abs(lo), abs(hi)), "x")
    mean = emit(Op.MEAN, [x16, axes], max(abs(lo), abs(hi)), "mean", reduced, keep)
    centred = emit(Op.SUB, [x16, mean], width, "centred", options=sub)
    square = emit(Op.MUL, [centred, centred], width ** 2, "square", options=S.MulOptionsT())
    var = emit(Op.MEAN, [square, axes], width ** 2 / 4, "var", reduced, keep)
    eps_t = const16(ctx, np.full([1] * len(shape), eps, np.float32), perm, f"{node.name}_eps")
    var_eps = emit(Op.ADD, [var, eps_t], width ** 2 / 4 + eps, "var_eps", reduced,
                   add_options())
    # SQRT then DIV, not RSQRT then MUL: LiteRT 2.3's int16 RSQRT interpolates a table and is
    # off by 20-60% for inputs in the lowest 1/100 of its range (a row of small spread),
    # where its int16 SQRT and DIV stay within a step (scratch-checked on every decade)
    root = emit(Op.SQRT, [var_eps], np.sqrt(width ** 2 / 4 + eps), "sqrt", reduced)
    # a constant row (and a tiny epsilon) rounds the root to code 0, and LiteRT's DIV stops the
    # whole model on a zero divisor: at least one step (its centred values are 0 anyway)
    floor = ctx.w.const(np.ones([1] * len(shape), np.int16), f"{node.name}_root_floor", root.qparams)
    lifted = t(reduced, root.qparams.s * INT16_MAX, "root_floor")
    ctx.emit(Op.MAXIMUM, [root, floor], [lifted])
    root = lifted
    y_abs = max(abs(y_lo), abs(y_hi))
    # what the value before the beta ADD may span without being clipped at the output
    b_lo, b_hi = (0.0, 0.0) if beta is None else (float(beta.min()), float(beta.max()))
    pre_beta = max(abs(y_lo - b_hi), abs(y_hi - b_lo))
    norm = min(np.sqrt(n) * 1.01, width * inv_max)
    if gamma is None:
        norm = min(norm, pre_beta)
    cur = emit(Op.DIV, [centred, root], norm, "norm", options=S.DivOptionsT())
    if gamma is not None:
        g = const16(ctx, gamma, perm, f"{node.name}_gamma")
        cur = emit(Op.MUL, [cur, g], min(norm * float(np.max(np.abs(gamma))), pre_beta),
                   "gamma", options=S.MulOptionsT())
    if beta is not None:
        b = const16(ctx, beta, perm, f"{node.name}_beta")
        cur = emit(Op.ADD, [cur, b], y_abs, "beta", options=add_options())
    ctx.emit(Op.QUANTIZE, [cur], [out])
    ctx.bind(node, 0, out)


def mean16(ctx: ConversionContext, src: Value, axes: list[int], dst: Value,
           axes_tensor=None) -> None:
    """MEAN of int16 ``src`` over the TFLite ``axes`` into ``dst`` (keep dims, ``dst``'s
    parameters), in stages of at most MEAN16_MAX elements each (see the module doc).
    ``axes_tensor``: the written int32 ``axes`` for the one-stage case, if there is one."""
    keep = S.ReducerOptionsT()
    keep.keepDims = True
    shape = list(src.shape)
    if int(np.prod([shape[a] for a in axes])) <= MEAN16_MAX:
        axes_tensor = ctx.int32(sorted(axes), "axes") if axes_tensor is None else axes_tensor
        ctx.emit(Op.MEAN, [src, axes_tensor], [dst], keep)
        return
    cur, name = ctx.tensor_of(src), dst.tensor.name
    cur_qp = src.qparams
    for a in sorted(axes, reverse=True):
        size = shape[a]
        if size <= MEAN16_MAX:
            steps = [(shape, [a])]
        else:
            inner = next((b for b in range(MEAN16_MAX, 1, -1)
                          if size % b == 0 and size // b <= MEAN16_MAX), None)
            if inner is None:
                raise UnsupportedModelError(
                    f"an int16 mean over {size} elements (more than {MEAN16_MAX} and no "
                    f"factor to split them) (tflite writer)")
            split = shape[:a] + [size // inner, inner] + shape[a + 1:]
            # a RESHAPE keeps its input's parameters (the first MEAN rescales to dst's)
            cur = _reshape(ctx, cur, split, cur_qp, f"{name}_split")
            steps = [(split, [a + 1]), (split[:a + 1] + [1] + split[a + 2:], [a])]
        for in_shape, over in steps:
            out_shape = [1 if k in over else n for k, n in enumerate(in_shape)]
            nxt = ctx.w.tensor(tuple(out_shape), "int16", dst.qparams, f"{name}_part")
            ctx.emit(Op.MEAN, [cur, ctx.int32(over, "axes")], [nxt], keep)
            cur, cur_qp = nxt, dst.qparams
        shape = shape[:a] + [1] + shape[a + 1:]
        if len(cur.shape) != len(shape):
            cur = _reshape(ctx, cur, shape, dst.qparams, f"{name}_joined")
    ctx.emit(Op.RESHAPE, [cur, ctx.int32(dst.shape, "shape")], [dst], _reshape_options(dst.shape))


def _reshape(ctx: ConversionContext, src, shape: list[int], qp: QParams, name: str):
    out = ctx.w.tensor(tuple(shape), "int16", qp, name)
    ctx.emit(Op.RESHAPE, [src, ctx.int32(shape, "shape")], [out], _reshape_options(shape))
    return out


def _reshape_options(shape) -> S.ReshapeOptionsT:
    opts = S.ReshapeOptionsT()
    opts.newShape = [int(d) for d in shape]
    return opts
