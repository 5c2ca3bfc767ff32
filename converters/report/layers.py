"""The per-layer record of a shipped model: each compute layer's precision, read from the final
QDQ graph, and the SQNR of its output against the float model on a few held-out samples.

A layer's output is taken where the next layer reads it: after the activation onnxruntime's
quantizer fuses into it (Relu, Clip) and after its output QuantizeLinear/DequantizeLinear pair,
so the figure includes the output rounding. The int8 graph runs with exact int8 math
(``runner.session(..., exact_int8=True)``): this CPU's fused kernels saturate where the board's
do not. Errors accumulate along the graph, so a layer's SQNR is what the model has lost up to
and including it (onnxruntime's ``qdq_loss_debug`` compares the same tensors); the accuracy
guard's sensitivity (``search/guard.py``) is the per-layer cost in isolation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.expose import exposed_bytes
from edgekit.converters.core.runner import session

from edgekit.numerics.sqnr import sqnr_from_sums

from ..context import Dataset

# ops whose arithmetic is the model's cost and its quantization error
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "LSTM", "GRU", "RNN"})
# ops onnxruntime's static QDQ quantizer leaves float whatever the build asks
NO_INT8_FORM = frozenset({"LSTM", "GRU", "RNN"})
# activations onnxruntime's QDQ quantizer fuses into the layer before them (no Q/DQ between)
FUSED_ACTIVATIONS = frozenset({"Relu", "Clip"})
PRECISIONS = ("int8", "int16", "fp16", "float")
SAMPLES = 4  # held-out samples: every element of every layer output counts, so a few rank
# the layers; more would cost every build (two sessions with all layer outputs exposed)


@dataclass(frozen=True)
class LayerTaps:
    """One compute layer: its tensors to compare in the float and the shipped graph."""

    name: str
    op: str
    precision: str
    float_tensor: str
    shipped_tensor: str


def _elem_types(model: Any) -> dict[str, int]:
    """Tensor name -> onnx element type, from shape inference, initializers and I/O."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # a graph inference cannot type (custom ops): fall back to what is declared
        inferred = model
    types = {i.name: i.data_type for i in inferred.graph.initializer}
    for info in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    return types


def _precision_of_dq(dq: Any, producers: Mapping[str, Any], types: Mapping[str, int]) -> str:
    """The integer width a DequantizeLinear reads: its input's type, or its zero point's."""
    from onnx import TensorProto

    elem = types.get(dq.input[0])
    if elem is None and len(dq.input) > 2:
        elem = types.get(dq.input[2])
    q = producers.get(dq.input[0])
    if elem is None and q is not None and q.op_type == "QuantizeLinear" and len(q.input) > 2:
        elem = types.get(q.input[2])
    if elem in (TensorProto.INT16, TensorProto.UINT16):
        return "int16"
    return "int8"  # int8/uint8, and a DQ whose width nothing states (onnx's default is uint8)


def precision(node: Any, producers: Mapping[str, Any], types: Mapping[str, int]) -> str:
    """int8 / int16 (16-bit activations, a16w8) / fp16 / float. A layer runs integer only when
    its data and weight inputs both come through DequantizeLinear: a layer left float still
    reads its neighbour's int8 activation through a DQ, with float weights."""
    from onnx import TensorProto

    inputs = [name for name in node.input[:2] if name]
    dqs = [producers.get(name) for name in inputs]
    if inputs and all(p is not None and p.op_type == "DequantizeLinear" for p in dqs):
        widths = {_precision_of_dq(p, producers, types) for p in dqs}
        return "int16" if "int16" in widths else "int8"
    if any(types.get(name) == TensorProto.FLOAT16 for name in [*inputs, node.output[0]]):
        return "fp16"
    # the fp16 rung (ptq/precision.py): float16 weights read through a Cast to float
    casts = [producers.get(name) for name in inputs[1:]]
    if any(c is not None and c.op_type == "Cast" and types.get(c.input[0]) == TensorProto.FLOAT16
           for c in casts):
        return "fp16"
    return "float"


def _op_label(node: Any, inits: Mapping[str, Any], producers: Mapping[str, Any]) -> str:
    """The op, with a depthwise convolution named as such (group == channels)."""
    if node.op_type != "Conv":
        return node.op_type
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    weight = node.input[1]
    producer = producers.get(weight)  # a quantized weight reaches the Conv through a DQ
    if producer is not None and producer.op_type == "DequantizeLinear":
        weight = producer.input[0]
    dims = list(inits[weight].dims) if weight in inits else []
    return "DepthwiseConv" if group > 1 and len(dims) > 1 and dims[1] == 1 else "Conv"


def _consumers(model: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in node.input:
            found.setdefault(name, []).append(node)
    return found


def _through_fused(tensor: str, consumers: Mapping[str, list[Any]]) -> str:
    """Follow a layer's output through the activations fused into it (its sole consumers)."""
    while len(consumers.get(tensor, [])) == 1 and consumers[tensor][0].op_type in FUSED_ACTIVATIONS:
        tensor = consumers[tensor][0].output[0]
    return tensor


def _after_qdq(tensor: str, consumers: Mapping[str, list[Any]]) -> str:
    """The DequantizeLinear output the next layer reads, if ``tensor`` is quantized."""
    for q in consumers.get(tensor, []):
        if q.op_type == "QuantizeLinear":
            dq = next((n for n in consumers.get(q.output[0], [])
                       if n.op_type == "DequantizeLinear"), None)
            if dq is not None:
                return dq.output[0]
    return tensor


def taps(float_model: Any, shipped_model: Any) -> list[LayerTaps]:
    """The compute layers of the shipped graph that the float graph also has (by node name)."""
    float_nodes = {n.name: n for n in float_model.graph.node if n.name}
    float_tensors = {out for n in float_model.graph.node for out in n.output}
    float_consumers, consumers = _consumers(float_model), _consumers(shipped_model)
    producers = {out: n for n in shipped_model.graph.node for out in n.output}
    inits = {i.name: i for i in shipped_model.graph.initializer}
    types = _elem_types(shipped_model)
    found = []
    for node in shipped_model.graph.node:
        reference = float_nodes.get(node.name)
        if node.op_type not in COMPUTE_OPS or reference is None:
            continue
        # the quantizer drops a Relu its output's zero point already clamps, and the layer
        # then writes the Relu's tensor: compare the tensor of the same name in both graphs
        shipped = _through_fused(node.output[0], consumers)
        if shipped not in float_tensors:  # renamed (a graph output behind its Q/DQ pair)
            shipped = node.output[0]
            same = _through_fused(reference.output[0], float_consumers)
        else:
            same = shipped
        found.append(LayerTaps(node.name, _op_label(node, inits, producers),
                               precision(node, producers, types), same,
                               _after_qdq(shipped, consumers)))
    return found


def layer_records(float_path: str | Path, shipped_path: str | Path, data: Dataset,
                  reasons: Mapping[str, str] | None = None,
                  samples: int = SAMPLES) -> list[dict[str, Any]]:
    """``{name, op, precision, sqnr_db}`` per compute layer, in graph order (``reason`` added
    where a layer runs wider than int8 and the build knows why)."""
    import onnx

    float_model, shipped_model = onnx.load(str(float_path)), onnx.load(str(shipped_path))
    layers = taps(float_model, shipped_model)
    if not layers:
        return []
    ref_names = [t.float_tensor for t in layers]
    got_names = [t.shipped_tensor for t in layers]
    ref_sess = session(exposed_bytes(float_model, ref_names))
    got_sess = session(exposed_bytes(shipped_model, got_names), exact_int8=True)
    signal = np.zeros(len(layers))
    noise = np.zeros(len(layers))
    for i in range(min(samples, len(data))):  # one sample at a time: bounded memory
        feeds = data.feeds(i, i + 1)
        ref = ref_sess.run(ref_names, {k.name: feeds[k.name] for k in ref_sess.get_inputs()})
        got = got_sess.run(got_names, {k.name: feeds[k.name] for k in got_sess.get_inputs()})
        for j, (r, g) in enumerate(zip(ref, got, strict=True)):
            r64 = np.asarray(r, np.float64)
            signal[j] += float(np.sum(r64 ** 2))
            noise[j] += float(np.sum((r64 - np.asarray(g, np.float64)) ** 2))
    records = []
    for j, tap in enumerate(layers):
        record: dict[str, Any] = {"name": tap.name, "op": tap.op, "precision": tap.precision,
                                  "sqnr_db": round(sqnr_from_sums(float(signal[j]), float(noise[j])), 2)}
        why = (reasons or {}).get(tap.name) or (
            f"onnxruntime's static quantizer has no int8 form for {tap.op}: it runs float "
            "between DequantizeLinear and QuantizeLinear" if tap.op in NO_INT8_FORM else None)
        if why and tap.precision != "int8":
            record["reason"] = why
        records.append(record)
    return records
