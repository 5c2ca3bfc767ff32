"""A float .tflite source's fp16 weights as float32 constants, before tflite2onnx reads it.

MediaPipe ships its face mesh and palm detector (0.10.14's ``face_landmark.tflite``,
``palm_detection_*.tflite``) with every weight stored float16 behind a ``DEQUANTIZE`` to
float32. tflite2onnx 0.4.1 treats the DEQUANTIZE outputs as activations and propagates the
NHWC->NCHW layout onto them, which breaks on a rank-3 ``PRELU`` alpha (``[1, 1, 32]``:
IndexError in ``layout.py``). The same nets with float32 weights convert. A DEQUANTIZE of a
constant float16 tensor is a constant: its output becomes a float32 buffer (the fp16 values
exactly) and the op goes, as LiteRT's own loader does when it folds such weights.
"""

from __future__ import annotations

import numpy as np
from edgekit.converters.tflite.schema import Op, S, TType


def fold_fp16_dequantize(flatbuffer: bytes) -> tuple[bytes, int]:
    """The .tflite with each DEQUANTIZE of a constant FLOAT16 tensor to FLOAT32 replaced by a
    float32 constant; returns the new FlatBuffer and how many were folded (0: unchanged)."""
    import flatbuffers

    model = S.ModelT.InitFromPackedBuf(flatbuffer, 0)
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes or []]
    folded = 0
    for graph in model.subgraphs or []:
        kept = []
        for op in graph.operators or []:
            values = _constant_half(model, graph, op, codes)
            if values is None:
                kept.append(op)
                continue
            out = graph.tensors[op.outputs[0]]
            buffer = S.BufferT()
            buffer.data = np.frombuffer(values.astype("<f4").tobytes(), np.uint8)
            model.buffers.append(buffer)
            out.buffer = len(model.buffers) - 1
            folded += 1
        graph.operators = kept
    if not folded:
        return flatbuffer, 0
    builder = flatbuffers.Builder(len(flatbuffer) * 2 + 65536)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output()), folded


def _constant_half(model: S.ModelT, graph: S.SubGraphT, op: S.OperatorT,
                   codes: list[int]) -> np.ndarray | None:
    """The float16 values a DEQUANTIZE reads, when it reads an inline constant and writes a
    float32 tensor; None for every other op (an int8 DEQUANTIZE, a graph input, ...)."""
    if codes[op.opcodeIndex] != Op.DEQUANTIZE or len(op.inputs) != 1 or len(op.outputs) != 1:
        return None
    src, dst = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    if src.type != TType.FLOAT16 or dst.type != TType.FLOAT32 or not src.buffer:
        return None
    data = model.buffers[src.buffer].data
    if data is None or len(data) == 0:  # an activation, or data stored past the 2 GB offset
        return None
    shape = tuple(int(d) for d in (src.shape if src.shape is not None else []))
    return np.frombuffer(np.asarray(data, np.uint8).tobytes(), "<f2").reshape(shape)
