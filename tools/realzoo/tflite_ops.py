"""What a shipped ``.tflite`` computes in float: read from its flatbuffer (the project's schema
reader, ``converters/tflite/schema.py``), not from the manifest that the writer fills in."""

from __future__ import annotations

from collections import Counter

from edgekit.converters.tflite.schema import S, op_name

BOUNDARY = {"QUANTIZE", "DEQUANTIZE"}  # the conversions around a float island, not compute
FLOAT_TYPES = {S.TensorType.FLOAT32, S.TensorType.FLOAT16}


def float_compute_ops(data: bytes) -> tuple[Counter[str], Counter[str]]:
    """(float compute ops by name, all ops by name) over every subgraph: an op computes in
    float when any of its non-constant inputs or outputs is a float tensor."""
    model = S.ModelT.InitFromPackedBuf(bytearray(data), 0)
    codes = [max(int(c.builtinCode), int(c.deprecatedBuiltinCode))
             for c in model.operatorCodes or []]
    buffers = model.buffers or []

    def is_const(tensor: object) -> bool:
        index = tensor.buffer
        return 0 < index < len(buffers) and buffers[index].data is not None \
            and len(buffers[index].data) > 0

    floats: Counter[str] = Counter()
    every: Counter[str] = Counter()
    for graph in model.subgraphs or []:
        tensors = graph.tensors or []
        for op in graph.operators or []:
            name = op_name(codes[op.opcodeIndex])
            every[name] += 1
            if name in BOUNDARY:
                continue
            used = [tensors[i] for i in list(op.inputs if op.inputs is not None else [])
                    + list(op.outputs if op.outputs is not None else []) if i >= 0]
            if any(t.type in FLOAT_TYPES and not is_const(t) for t in used):
                floats[name] += 1
    return floats, every
