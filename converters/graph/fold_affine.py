"""Fold per-channel affines (a Mul, Add, Sub or Div by a constant) into the Conv next to them,
before quantization.

Paddle2ONNX writes PP-LCNetV3's "learnable affine block" (``scale * x + bias`` after a
convolution and after its activation) as scalar Mul and Add nodes; BatchNorm folding does not
reach them, so onnxruntime's quantizer gives each its own int8 requantization (two extra
roundings, two extra ops per block in the .tflite). The fold is what converters do with a
BatchNorm (onnxruntime's ConvMulFusion/ConvAddFusion, onnx2tf's, PaddleSlim's
re-parameterization):

- after a Conv: ``(W * x + B) * s + b`` is a Conv with weights ``W * s`` and bias
  ``B * s + b`` (exact);
- before a Conv, when the constant is one value for every channel: a scale ``s`` of the input
  is ``W * s`` (exact, padding included: a zero border scaled stays zero); a shift ``b`` is
  ``B + sum(W) * b`` only when the Conv pads nothing (with padding, the border would read 0
  where the shifted tensor holds ``b``); a scalar shift before a padding Conv becomes a Pad
  by ``-b`` instead (exact, ``_shift_to_pad``). ``s * x + b`` in front of a Conv is first
  written ``(x + b / s) * s`` so that its scale folds.

Only float32 weights; a constant another node reads is copied, not edited.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.graph.rewrite_base import GraphView, channel_vector

AFFINE_OPS = ("Mul", "Add", "Sub", "Div")


def _affine(view: GraphView, node: Any, tensor: str) -> tuple[str, np.ndarray] | None:
    """(op, constant) when ``node`` is an affine of ``tensor`` by a float constant (for Sub
    and Div the tensor must be the first operand: ``c - x`` and ``c / x`` are not affine in
    the same way)."""
    if node.op_type not in AFFINE_OPS or len(node.input) != 2:
        return None
    if node.input[0] == tensor:
        other = node.input[1]
    elif node.input[1] == tensor and node.op_type in ("Mul", "Add"):
        other = node.input[0]
    else:
        return None
    value = view.const(other)
    if value is None:
        return None
    return node.op_type, value


def _conv_parts(view: GraphView, conv: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """A Conv's float32 weights and bias (zeros when it has none), or None."""
    if conv.op_type != "Conv" or len(conv.input) < 2:
        return None
    weight = view.const(conv.input[1])
    if weight is None or weight.ndim < 3:
        return None
    if len(conv.input) > 2 and conv.input[2]:
        bias = view.const(conv.input[2])
        if bias is None:
            return None
    else:
        bias = np.zeros(weight.shape[0], np.float32)
    return weight, bias


def _group(conv: Any) -> int:
    return next((a.i for a in conv.attribute if a.name == "group"), 1)


def _pads_nothing(conv: Any) -> bool:
    for attr in conv.attribute:
        if attr.name == "pads" and any(attr.ints):
            return False
        if attr.name == "auto_pad" and attr.s not in (b"", b"NOTSET", b"VALID"):
            return False
    return True


def _input_channel_map(weight: np.ndarray, group: int) -> np.ndarray:
    """For each weight ``[out, in / group]`` position, the input channel it reads."""
    out_channels, per_group = weight.shape[0], weight.shape[1]
    groups_of_outputs = np.arange(out_channels) // (out_channels // group)
    return groups_of_outputs[:, None] * per_group + np.arange(per_group)[None, :]


def _fold_after(view: GraphView, conv: Any) -> bool:
    """Fold the affine that is the only reader of ``conv``'s output into the Conv."""
    parts = _conv_parts(view, conv)
    reader = view.only_reader(conv.output[0])
    if parts is None or reader is None:
        return False
    found = _affine(view, reader, conv.output[0])
    if found is None:
        return False
    op, value = found
    weight, bias = parts
    vector = channel_vector(value, weight.ndim, weight.shape[0])
    if vector is None or (op == "Div" and not np.all(vector != 0)):
        return False
    widen = (slice(None),) + (None,) * (weight.ndim - 1)
    if op in ("Mul", "Div"):
        factor = vector if op == "Mul" else 1.0 / vector
        weight, bias = weight * factor[widen], bias * factor
        view.set_const(conv, 1, weight, f"{conv.name or 'conv'}_W_folded")
    else:
        bias = bias + (vector if op == "Add" else -vector)
    view.set_const(conv, 2, bias, f"{conv.name or 'conv'}_B_folded")
    view.bypass(reader, conv.output[0])
    return True


def _single_conv_reader(view: GraphView, tensor: str) -> Any | None:
    """The Conv reading ``tensor`` as its data input, when it is ``tensor``'s only reader."""
    reader = view.only_reader(tensor)
    if reader is None or reader.op_type != "Conv" or reader.input[0] != tensor \
            or tensor in reader.input[1:]:
        return None
    return reader


def _closes_gelu(view: GraphView, tensor: str) -> bool:
    """``tensor`` is ``x * (1 + erf(.))``: the Mul by 0.5 after it is the erf GELU's own,
    which the .tflite writer fuses with the chain into one GELU (``tflite/ops/gelu.py``).
    Folded into the next Conv, it left Moonshine's encoder an Erf no writer converts."""
    mul = view.producer.get(tensor)
    if mul is None or mul.op_type != "Mul":
        return False
    adds = [view.producer.get(name) for name in mul.input]
    return any(add is not None and add.op_type == "Add"
               and any(getattr(view.producer.get(i), "op_type", "") == "Erf" for i in add.input)
               for add in adds)


def _fold_before(view: GraphView, node: Any) -> bool:
    """Fold ``node`` (an affine of its data input) into the Conv that alone reads it."""
    conv = _single_conv_reader(view, node.output[0])
    parts = _conv_parts(view, conv) if conv is not None else None
    if parts is None:
        return False
    data = next((name for name in node.input if view.const(name) is None), None)
    found = _affine(view, node, data) if data else None
    if found is None or found[1].size != 1 or _closes_gelu(view, data):
        # one value for every channel only (Paddle's affine blocks): a per-channel affine in
        # front of a Conv is a normalization's gamma/beta, and folded it moves that spread
        # into every weight row, where one scale per output channel cannot follow it
        # (Moonshine's GroupNorm -> conv2: a build that shipped was refused, the guard's
        # all-float ceiling 0.00 -> 11.75 points; docs/measurements/paddle-graphs.md)
        return False
    op, value = found
    weight, bias = parts
    group = _group(conv)
    vector = channel_vector(value, weight.ndim, weight.shape[1] * group)
    if vector is None:
        return False
    per_weight = vector[_input_channel_map(weight, group)]  # [out, in / group]
    widen = (slice(None), slice(None)) + (None,) * (weight.ndim - 2)
    if op in ("Mul", "Div"):
        if op == "Div" and not np.all(vector != 0):
            return False
        factor = per_weight if op == "Mul" else 1.0 / per_weight
        view.set_const(conv, 1, weight * factor[widen], f"{conv.name or 'conv'}_W_folded")
    else:
        if not _pads_nothing(conv):
            return False
        shift = per_weight if op == "Add" else -per_weight
        moved = (weight * shift[widen]).reshape(weight.shape[0], -1).sum(axis=1)
        view.set_const(conv, 2, bias + moved, f"{conv.name or 'conv'}_B_folded")
    view.skip(node, data)
    return True


def _shift_first(view: GraphView, mul: Any) -> bool:
    """``Mul(x, s) -> Add(., b) -> Conv`` becomes ``Add(x, b / s) -> Mul(., s) -> Conv`` (the
    same values up to one rounding) so that the scale can fold into the Conv. The caller
    re-indexes its view: the two nodes are rewritten in place."""
    if mul.op_type != "Mul":
        return False
    add = view.only_reader(mul.output[0])
    if add is None or add.op_type != "Add" or _single_conv_reader(view, add.output[0]) is None:
        return False
    data = next((name for name in mul.input if view.const(name) is None), None)
    scale = _affine(view, mul, data) if data else None
    shift = _affine(view, add, mul.output[0])
    if scale is None or shift is None or scale[1].size != 1:  # as _fold_before: scalars only
        return False
    conv = _single_conv_reader(view, add.output[0])
    parts = _conv_parts(view, conv)
    if parts is None or channel_vector(scale[1], parts[0].ndim,
                                       parts[0].shape[1] * _group(conv)) is None:
        return False
    scale_value, shift_value = scale[1], shift[1]
    if scale_value.size != 1 and shift_value.size != 1 and scale_value.shape != shift_value.shape:
        return False
    if not np.all(scale_value != 0):
        return False
    moved = (shift_value / scale_value).astype(np.float32)
    # the Add now reads x and writes what the Mul read; the Mul reads it and writes the Add's
    # output (both keep their names; the tensors between them swap producers)
    between = mul.output[0]
    add_const = 1 if add.input[0] == between else 0
    view.set_const(add, add_const, moved, f"{add.name or 'add'}_shift_moved")
    mul_data = list(mul.input).index(data)
    add_out = add.output[0]
    add.input[1 - add_const] = data
    mul.input[mul_data] = between
    add.output[0], mul.output[0] = between, add_out
    # the Add now runs first: swap the two nodes' places (copies: the graph owns its nodes)
    from onnx import NodeProto

    nodes = list(view.graph.node)
    i, j = nodes.index(mul), nodes.index(add)
    first, second = NodeProto(), NodeProto()
    first.CopyFrom(add)
    second.CopyFrom(mul)
    view.graph.node[i].CopyFrom(first)
    view.graph.node[j].CopyFrom(second)
    return True


def _shift_to_pad(view: GraphView, node: Any) -> bool:
    """A scalar shift ``x + b`` read by a padding Conv becomes ``Pad(x, value=-b)`` and the
    Conv pads nothing, its bias ``B + sum(W) * b``: the border the Conv read as 0 is
    ``-b + b`` (exact). The Pad's value lies in its input's range whenever ``-b`` does, so
    the quantizer gives it its input's grid: no requantization of every element, as the Add
    had (PP-OCRv4 rec: 3 to 7 dB of output SQNR lost at each such Add, int8, 8 lines)."""
    conv = _single_conv_reader(view, node.output[0])
    parts = _conv_parts(view, conv) if conv is not None else None
    if parts is None or _pads_nothing(conv):
        return False
    if any(a.name == "auto_pad" and a.s not in (b"", b"NOTSET") for a in conv.attribute):
        return False
    data = next((name for name in node.input if view.const(name) is None), None)
    found = _affine(view, node, data) if data else None
    if found is None or found[0] not in ("Add", "Sub") or found[1].size != 1:
        return False
    shift = float(found[1].reshape(-1)[0]) * (1.0 if found[0] == "Add" else -1.0)
    weight, bias = parts
    pads_attr = next(a for a in conv.attribute if a.name == "pads")
    pads = list(pads_attr.ints)
    spatial = weight.ndim - 2
    onnx_pads = [0, 0, *pads[:spatial], 0, 0, *pads[spatial:]]
    moved = weight.reshape(weight.shape[0], -1).sum(axis=1) * shift
    view.set_const(conv, 2, bias + moved, f"{conv.name or 'conv'}_B_folded")
    del pads_attr.ints[:]
    pads_attr.ints.extend([0] * len(pads))
    from onnx import numpy_helper

    base = f"{conv.name or 'conv'}_pad"
    pads_name, value_name = view.names.fresh(f"{base}_pads"), view.names.fresh(f"{base}_value")
    view.graph.initializer.extend([
        numpy_helper.from_array(np.asarray(onnx_pads, np.int64), pads_name),
        numpy_helper.from_array(np.asarray(-shift, np.float32), value_name)])
    view.drop_reads(node)
    node.op_type = "Pad"
    node.name = view.names.fresh(base)
    del node.attribute[:]
    del node.input[:]
    node.input.extend([data, pads_name, value_name])
    for name in node.input:
        view.readers.setdefault(name, []).append(node)
    view.forget_shape(node.output[0])  # now the padded size
    return True


def fold_conv_affines(model: Any) -> dict[str, int]:
    """Fold every per-channel affine next to a Conv into it; returns how many folded where
    (``after``: following a Conv, ``before``: feeding one, ``reordered``: a scale moved
    behind its shift, ``padded``: a shift made the padding of the Conv it feeds). The graph's
    values are the same up to float rounding."""
    from edgekit.converters.graph.opset import default_opset

    view = GraphView(model.graph)
    counts = {"after": 0, "before": 0, "reordered": 0, "padded": 0}
    changed = True
    while changed:
        changed = False
        for node in list(view.graph.node):
            if node.op_type == "Conv" and _fold_after(view, node):
                counts["after"] += 1
                changed = True
        for node in list(view.graph.node):
            if node.op_type == "Mul" and _shift_first(view, node):
                counts["reordered"] += 1
                changed = True
                view = GraphView(model.graph)  # the swapped nodes are new messages: re-index
                break
        for node in list(view.graph.node):
            if node.op_type in AFFINE_OPS and _fold_before(view, node):
                counts["before"] += 1
                changed = True
    if default_opset(model) >= 11:  # Pad's pads and value are inputs since 11
        for node in list(view.graph.node):
            if node.op_type in ("Add", "Sub") and _shift_to_pad(view, node):
                counts["padded"] += 1
    view.finish()
    return counts
