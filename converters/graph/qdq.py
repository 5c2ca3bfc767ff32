"""Reading a QDQ graph: which nodes stayed float, and output quantization parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

QDQ_OPS = {"QuantizeLinear", "DequantizeLinear"}
# Ops that carry no arithmetic worth quantizing (they move or reshape data).
LAYOUT_OPS = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Shape", "Gather",
              "Concat", "Slice", "Identity", "Constant", "Cast"}


def float_nodes(model: Any) -> list[dict[str, str]]:
    """Compute nodes whose data inputs do not all come from DequantizeLinear (they run in float)."""
    producers = {out: node for node in model.graph.node for out in node.output}
    initializers = {i.name for i in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.op_type in QDQ_OPS or node.op_type in LAYOUT_OPS:
            continue
        data_inputs = [i for i in node.input if i and i not in initializers]
        from_dq = [producers.get(i) is not None and producers[i].op_type == "DequantizeLinear"
                   for i in data_inputs]
        if data_inputs and not all(from_dq):
            found.append({"name": node.name or node.output[0], "op": node.op_type})
    return found


def output_quantization(model: Any) -> dict[str, dict[str, Any]]:
    """Scale and zero point of each graph output produced by a DequantizeLinear."""
    from onnx import numpy_helper

    producers = {out: node for node in model.graph.node for out in node.output}
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    result = {}
    for out in model.graph.output:
        node = producers.get(out.name)
        if node is None or node.op_type != "DequantizeLinear":
            continue
        scale = inits.get(node.input[1])
        zero = inits.get(node.input[2]) if len(node.input) > 2 else np.zeros((), np.uint8)
        if scale is None or scale.size != 1:
            continue
        result[out.name] = {"scale": float(scale.reshape(-1)[0]),
                            "zero_point": int(zero.reshape(-1)[0]) if zero is not None else 0,
                            "dtype": str(zero.dtype) if zero is not None else "uint8"}
    return result


def input_quantization(model: Any) -> dict[str, dict[str, Any]]:
    """Scale and zero point of each graph input consumed by a QuantizeLinear."""
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    result = {}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in result:
            continue
        if node.input[0] not in {i.name for i in model.graph.input}:
            continue
        scale = inits.get(node.input[1])
        zero = inits.get(node.input[2]) if len(node.input) > 2 else None
        if scale is None or scale.size != 1:
            continue
        result[node.input[0]] = {
            "scale": float(scale.reshape(-1)[0]),
            "zero_point": int(zero.reshape(-1)[0]) if zero is not None else 0,
            "dtype": str(zero.dtype) if zero is not None else "uint8",
        }
    return result


def snap_to_grid(x: np.ndarray, q: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Quantize ``x`` with the input's parameters: (integer codes, their float values).

    The float values quantize back to the same codes, so a test vector stored as integers
    reproduces the model's computation exactly.
    """
    info = np.iinfo(np.dtype(q["dtype"]))
    codes = np.clip(np.round(x / np.float32(q["scale"])) + q["zero_point"], info.min, info.max)
    codes = codes.astype(q["dtype"])
    return codes, (codes.astype(np.float32) - np.float32(q["zero_point"])) * np.float32(q["scale"])
