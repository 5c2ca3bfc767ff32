"""Give a model output its own calibrated int8 scale when onnxruntime left it float.

onnxruntime's quantizer writes a QuantizeLinear after an op only when it quantizes that op
and its consumers; the ops that end a classifier (ReduceMean for the global pool, then a
Reshape) are unregistered or "latent", so the graph ends ``DQ -> ReduceMean -> Reshape -> out``
with no scale anywhere after the last Conv, and those ops ran float in the .tflite. The
calibration stage has already measured the output's range (onnxruntime's calibrators record
every float tensor, graph outputs included), so the writer can append::

    ... -> Reshape -> out        becomes        ... -> Reshape -> Q -> DQ -> out

with the scale onnxruntime would compute for that range; ``fill_qdq`` then carries the pair
back through the Reshape, and the tail is written int8 with one DEQUANTIZE (or the
runtime's dequantization) at the end. The ONNX int8 model is not changed: it runs that tail
in float as before, and the .tflite differs from it by the output's rounding (half a step).
Only outputs whose producer the writer can run in int8 on dequantized data get a pair; an
output after a float op (a kept-float node, a recurrent cell) stays float, since a pair
there would only add a rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.tflite.qdq_fill import BYTE_MOVERS
from onnx import helper, numpy_helper

Range = tuple[float, float]


def read_output_ranges(ranges_path: Path | str, names: list[str]) -> dict[str, Range]:
    """The calibrated (lowest, highest) of each of ``names`` found in an onnxruntime
    calibration cache (``save_tensors_data``'s JSON); names it lacks are left out."""
    from onnxruntime.quantization.calibrate import load_tensors_data

    data = load_tensors_data(ranges_path)
    found: dict[str, Range] = {}
    for name in names:
        try:
            lo, hi = data[name].range_value
        except (KeyError, AttributeError):
            continue
        found[name] = (float(np.min(lo)), float(np.max(hi)))
    return found


def quantize_outputs(model: onnx.ModelProto, ranges: Mapping[str, Range],
                     int8_ops: set[str], keep_float: set[str]) -> list[str]:
    """Append Q/DQ pairs at the calibrated scale to the float outputs of ``model`` that an
    int8 chain produces (in place); returns the output names given a pair."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    consumed = {i for n in graph.node for i in n.input}
    dtype = _activation_dtype(graph)
    if dtype is None or not ranges:
        return []

    def int8_chain(node: onnx.NodeProto | None, depth: int = 0) -> bool:
        """``node`` can be written int8: an int8 op fed by a DequantizeLinear, possibly
        through byte movers (which keep their input's scale)."""
        if node is None or depth > 4 or node.name in keep_float or node.op_type not in int8_ops:
            return False
        if not node.input:
            return False
        src = producer.get(node.input[0])
        if src is not None and src.op_type == "DequantizeLinear":
            return True
        return node.op_type in BYTE_MOVERS and int8_chain(src, depth + 1)

    done = []
    for out in graph.output:
        name = out.name
        node = producer.get(name)
        if name not in ranges or name in consumed or node is None or \
                node.op_type in ("QuantizeLinear", "DequantizeLinear") or not int8_chain(node):
            continue
        scale, zero = _scale_zero(*ranges[name], dtype)
        inner = f"{name}_edgekit_float"
        for k, o in enumerate(node.output):
            if o == name:
                node.output[k] = inner
        args = [f"{name}_edgekit_scale", f"{name}_edgekit_zero"]
        graph.initializer.extend([numpy_helper.from_array(np.asarray(scale, np.float32), args[0]),
                                  numpy_helper.from_array(np.asarray(zero, dtype), args[1])])
        graph.node.extend([
            helper.make_node("QuantizeLinear", [inner, *args], [f"{name}_edgekit_q"],
                             name=f"{name}_edgekit_q"),
            helper.make_node("DequantizeLinear", [f"{name}_edgekit_q", *args], [name],
                             name=f"{name}_edgekit_dq"),
        ])
        done.append(name)
    return done


def _activation_dtype(graph: onnx.GraphProto) -> type | None:
    """The activations' 8-bit type (uint8 or int8), read from the graph's first activation
    QuantizeLinear; None when there is none (nothing quantized: leave the outputs)."""
    inits = {i.name: i for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and len(node.input) > 2 and node.input[2] in inits:
            zp = numpy_helper.to_array(inits[node.input[2]])
            if zp.dtype in (np.uint8, np.int8):
                return zp.dtype.type
    return None


def _scale_zero(lo: float, hi: float, dtype: type) -> tuple[float, int]:
    """onnxruntime's own parameters for a calibrated range: the build quantizes int8
    activations symmetrically and uint8 ones over [min(lo, 0), max(hi, 0)]."""
    from onnxruntime.quantization.quant_utils import (
        QuantType,
        compute_scale_zp,
        get_qmin_qmax_for_qType,
    )

    symmetric = dtype is np.int8
    qtype = QuantType.QInt8 if symmetric else QuantType.QUInt8
    qmin, qmax = get_qmin_qmax_for_qType(qtype.tensor_type, symmetric=symmetric)
    zero, scale = compute_scale_zp(np.float32(lo), np.float32(hi), qmin, qmax,
                                   symmetric=symmetric)
    return float(scale), int(zero)
