"""Clip whose bounds are computed from the data -> MAXIMUM / MINIMUM with tensor operands.

A log-mel front end clamps to a top-dB window below its own maximum (openWakeWord's
``melspectrogram.onnx``: ``Clip(x, min=ReduceMax(x) - 80)``, librosa's ``power_to_db``
``top_db``); ``activation.convert_clip`` wants constant bounds. ``Clip(x, lo, hi)`` is
``Min(Max(x, lo), hi)``, written as ``select.convert_minmax`` writes Max/Min: in int8 every
operand at the output's parameters (the kernels copy bytes), a scalar bound broadcast. A
Clip with constant (or no) bounds goes to ``activation.convert_clip`` as before.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.activation import convert_clip
from edgekit.converters.tflite.ops.base import OpSpec
from edgekit.converters.tflite.schema import Op


def _bounds(node: onnx.NodeProto) -> list[tuple[int, int]]:
    """(input index, builtin) of the Clip's given bound inputs (opset 11+: min, max)."""
    return [(i, op) for i, op in ((1, Op.MAXIMUM), (2, Op.MINIMUM))
            if len(node.input) > i and node.input[i]]


def computed_bounds(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """A bound input that is not a constant."""
    return any(not ctx.is_const(node.input[i]) for i, _ in _bounds(node))


def convert_clip_any(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    if not computed_bounds(ctx, node):
        convert_clip(ctx, node)
        return
    rank = len(ctx.g.shape(node.output[0]))
    x = ctx.input(node, 0)
    qp = ctx.out_params(node)
    steps = []
    for i, builtin in _bounds(node):
        if ctx.is_const(node.input[i]) and not np.all(np.isfinite(ctx.const(node.input[i]))):
            continue  # an infinite constant bound clamps nothing
        steps.append((ctx.input(node, i), builtin))
    values = [x] + [v for v, _ in steps]
    if qp is not None:
        values = [ctx.requant(v, qp) for v in values]
    values, perm = ctx.align(values, rank)
    cur = values[0]
    for k, (bound, (_, builtin)) in enumerate(zip(values[1:], steps, strict=True)):
        last = k == len(steps) - 1
        dst = ctx.output(node, 0, perm) if last else \
            ctx.new_value(cur.onnx_shape, perm, qp, f"{node.name}_lo")
        ctx.emit(builtin, [cur, bound], [dst])
        cur = dst
    ctx.bind(node, 0, cur)


def _int8_bounds(ctx: ConversionContext, node: onnx.NodeProto) -> bool:
    """Each computed bound is an int8 activation (from a DequantizeLinear), else float."""
    for i, _ in _bounds(node):
        dq = ctx.g.dq(node.input[i])
        if not ctx.is_const(node.input[i]) and (dq is None or dq.source in ctx.g.const):
            return False
    return True


# replaces activation.py's "Clip" entry in the registry (listed after it): same int8 rule for
# constant bounds, and a computed bound must be int8 too for the int8 form
SPECS = {"Clip": OpSpec(convert_clip_any, can_int8=_int8_bounds)}
