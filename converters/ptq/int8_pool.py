"""Global average pooling in int8 on onnxruntime.

PyTorch exports a classifier's global pool (``AdaptiveAvgPool2d(1)``) as ``ReduceMean`` over H
and W, which onnxruntime's quantizer leaves float (a ``GlobalAveragePool`` it quantizes), so
the tail runs ``QLinearConv -> Transpose (NHWC -> NCHW) -> DequantizeLinear -> ReduceMean ->
QuantizeLinear``. Written as a ``GlobalAveragePool`` with a Q/DQ pair after it (the
downstream Q's parameters, as ``qdq_fill`` does for LiteRT), onnxruntime fuses it into one
``QLinearGlobalAveragePool`` that reads the NHWC tensor as it is: no transpose of the
last feature map, no float pass. The .tflite writer maps both ops to the same MEAN.

Squeeze-excite blocks pool the same way (MobileNetV3, EfficientNet-B0): there a Q already
follows the mean (the next Conv's input), so renaming the op is all it takes.

Measured with onnxruntime's per-node profile and paired runs without / with the rewrite: the
tail becomes one fused kernel; the gain is largest on squeeze-excite nets, which pool in every
block; outputs and .tflite bytes unchanged (docs/measurements/runtime.md, "Ties measured as ties").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.graph.opset import axes_of
from edgekit.converters.tflite.qdq_fill import fill_qdq
from onnx import numpy_helper


def pool_in_int8(path: Path, keep_float: set[str] | frozenset[str] = frozenset()) -> int:
    """Rewrite the QDQ model at ``path`` in place; returns how many global pools it now runs
    in int8 (DQ -> GlobalAveragePool -> Q: fused), those onnxruntime quantized itself included."""
    model = onnx.load(str(path))
    renamed = _spatial_means_to_global_pools(model, keep_float)
    if not any(n.op_type == "GlobalAveragePool" for n in model.graph.node):
        return 0
    inserted = fill_qdq(model, {"GlobalAveragePool"}, set(keep_float), byte_movers=False)
    if renamed or inserted:
        tmp = path.with_suffix(".pool.onnx")
        onnx.save(model, str(tmp))
        tmp.replace(path)
    return _int8_pools(model.graph)


def _int8_pools(graph: onnx.GraphProto) -> int:
    producer = {o: n.op_type for n in graph.node for o in n.output}
    consumers: dict[str, list[str]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n.op_type)
    return sum(1 for n in graph.node if n.op_type == "GlobalAveragePool"
               and producer.get(n.input[0]) == "DequantizeLinear"
               and consumers.get(n.output[0]) and
               all(op == "QuantizeLinear" for op in consumers[n.output[0]]))


def _spatial_means_to_global_pools(model: onnx.ModelProto,
                                   keep_float: set[str] | frozenset[str]) -> int:
    """ReduceMean over axes 2 and 3 of a 4-D tensor, dims kept, is GlobalAveragePool."""
    ranks = _ranks(model)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer
             if i.data_type == onnx.TensorProto.INT64}
    count = 0
    for node in model.graph.node:
        if node.op_type != "ReduceMean" or node.name in keep_float or not node.input:
            continue
        rank = ranks.get(node.input[0])
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        axes = axes_of(node, inits)  # the attribute, or the input since opset 18
        if rank != 4 or axes is None or attrs.get("keepdims", 1) != 1:
            continue
        if sorted(int(a) % 4 for a in np.atleast_1d(axes)) != [2, 3]:
            continue
        node.op_type = "GlobalAveragePool"
        del node.input[1:]
        del node.attribute[:]
        count += 1
    return count


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    """Each tensor's rank where shape inference knows it."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - no ranks: nothing is rewritten
        return {}
    infos = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    return {v.name: len(v.type.tensor_type.shape.dim) for v in infos
            if v.type.tensor_type.HasField("shape")}
