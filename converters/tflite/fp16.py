"""fp16 weights: LiteRT's "float16 quantization" form of a layer the guard moved to fp16.

``converters/ptq/precision.py`` stores such a layer's weights as float16 initializers
read through ``Cast(to=FLOAT)``. The writer folds each Cast into a float32 constant (its
values are exactly the fp16 ones) and remembers the name; the op converters then write the
weight as a FLOAT16 tensor with a DEQUANTIZE to float32 in front of the op, which is how
LiteRT models carry fp16 weights (XNNPACK folds it, and runs fp16 where the CPU has it).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def fold_fp16_weights(model: onnx.ModelProto) -> set[str]:
    """In place on the writer's copy: ``Cast(float16 initializer)`` -> a float32 initializer
    under the Cast's output name. Returns those names."""
    graph = model.graph
    halves = {i.name: i for i in graph.initializer if i.data_type == TensorProto.FLOAT16}
    folded: set[str] = set()
    for node in list(graph.node):
        if node.op_type != "Cast" or not node.input or node.input[0] not in halves:
            continue
        to = next((a.i for a in node.attribute if a.name == "to"), None)
        if to != TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(halves[node.input[0]]).astype(np.float32)
        graph.initializer.append(numpy_helper.from_array(values, node.output[0]))
        graph.node.remove(node)
        folded.add(node.output[0])
    return folded


def fp16_weight(ctx, real: np.ndarray, name: str):
    """A float16 constant and the DEQUANTIZE that makes it float32; the float32 tensor."""
    from edgekit.converters.tflite.schema import Op

    data = np.ascontiguousarray(real, np.float32)
    half = ctx.w.const(data.astype(np.float16), f"{name}_fp16")
    full = ctx.w.tensor(data.shape, "float32", None, name)
    ctx.w.op(Op.DEQUANTIZE, [half], [full], version=3)  # version 3: float16 input
    return full
