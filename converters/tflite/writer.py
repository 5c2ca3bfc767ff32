"""Builds a TFLite flatbuffer with the object API of the official schema bindings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
from edgekit.converters.tflite.quant import QParams, tflite_type
from edgekit.converters.tflite.schema import (
    FILE_IDENTIFIER,
    OPTIONS,
    SCHEMA_VERSION,
    S,
    op_name,
)

_ALIGN = 16  # LiteRT and XNNPACK read weights in place; keep every buffer 16-byte aligned


class _AlignedBufferT(S.BufferT):
    """BufferT whose data vector starts on a 16-byte boundary (the schema's force_align)."""

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 - schema API name
        data = None
        if self.data is not None and len(self.data):
            raw = np.ascontiguousarray(self.data).view(np.uint8).reshape(-1)
            builder.StartVector(1, raw.size, _ALIGN)
            builder.head = builder.head - raw.size
            builder.Bytes[builder.head:builder.head + raw.size] = raw.tobytes()
            data = builder.EndVector()
        S.BufferStart(builder)
        if data is not None:
            S.BufferAddData(builder, data)
        return S.BufferEnd(builder)


@dataclass
class Tensor:
    """One tensor being written: its index in the subgraph and what it holds."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    qparams: QParams | None
    name: str
    is_const: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class ModelWriter:
    """Accumulates tensors, constant buffers and operators of a single-subgraph model."""

    def __init__(self, description: str = "edgekit") -> None:
        self.description = description
        self.tensors: list[Tensor] = []
        self._tensor_t: list[S.TensorT] = []
        self._buffers: list[_AlignedBufferT] = [_AlignedBufferT()]  # buffer 0: empty sentinel
        self._opcodes: dict[int, int] = {}
        self._opcode_t: list[S.OperatorCodeT] = []
        self.operators: list[S.OperatorT] = []
        self.op_names: list[str] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self._names: set[str] = set()

    # -- tensors --------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        base, n = name or "t", 0
        while name in self._names or not name:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def tensor(self, shape: tuple[int, ...], dtype: str, qparams: QParams | None = None,
               name: str = "", data: np.ndarray | None = None) -> Tensor:
        """Add a tensor; with ``data`` it is a constant backed by its own buffer."""
        t = S.TensorT()
        t.shape = np.asarray(shape, np.int32)
        t.type = tflite_type(dtype)
        t.name = self._unique(name)
        if qparams is not None:
            t.quantization = qparams.to_tflite()
        if data is not None:
            array = np.ascontiguousarray(np.asarray(data, dtype=dtype))
            if tuple(array.shape) != tuple(shape):
                array = array.reshape(shape)
            buffer = _AlignedBufferT()
            buffer.data = array.reshape(-1).view(np.uint8) if array.size else None
            self._buffers.append(buffer)
            t.buffer = len(self._buffers) - 1
        else:
            t.buffer = 0
        self._tensor_t.append(t)
        record = Tensor(len(self.tensors), tuple(int(d) for d in shape), np.dtype(dtype).name,
                        qparams, t.name, data is not None)
        self.tensors.append(record)
        return record

    def const(self, data: np.ndarray, name: str, qparams: QParams | None = None) -> Tensor:
        data = np.asarray(data)
        return self.tensor(tuple(data.shape), data.dtype.name, qparams, name, data)

    def const_data(self, tensor: Tensor) -> np.ndarray | None:
        """The stored values of a constant tensor (None for activations)."""
        t = self._tensor_t[tensor.index]
        if not t.buffer:
            return None
        raw = self._buffers[t.buffer].data
        raw = np.zeros(0, np.uint8) if raw is None else raw
        return raw.view(np.dtype(tensor.dtype)).reshape(tensor.shape)

    # -- operators ------------------------------------------------------------------
    def _opcode(self, builtin: int) -> int:
        if builtin not in self._opcodes:
            code = S.OperatorCodeT()
            code.builtinCode = builtin
            # the deprecated int8 field saturates at 127 (PLACEHOLDER_FOR_GREATER_OP_CODES)
            code.deprecatedBuiltinCode = min(builtin, 127)
            code.version = 1
            self._opcode_t.append(code)
            self._opcodes[builtin] = len(self._opcode_t) - 1
        return self._opcodes[builtin]

    def op(self, builtin: int, inputs: list[Tensor | None], outputs: list[Tensor],
           options: Any = None, version: int = 1) -> S.OperatorT:
        """Append an operator; ``None`` inputs are optional inputs left out (index -1)."""
        o = S.OperatorT()
        o.opcodeIndex = self._opcode(builtin)
        code = self._opcode_t[o.opcodeIndex]
        code.version = max(code.version, version)
        o.inputs = [-1 if t is None else t.index for t in inputs]
        o.outputs = [t.index for t in outputs]
        if builtin in OPTIONS:
            tag, cls = OPTIONS[builtin]
            o.builtinOptionsType = tag
            o.builtinOptions = options if options is not None else cls()
        self.operators.append(o)
        self.op_names.append(op_name(builtin))
        return o

    # -- output ---------------------------------------------------------------------
    def finish(self) -> bytes:
        sub = S.SubGraphT()
        sub.tensors = self._tensor_t
        sub.inputs = list(self.inputs)
        sub.outputs = list(self.outputs)
        sub.operators = self.operators
        sub.name = "main"
        model = S.ModelT()
        model.version = SCHEMA_VERSION
        model.description = self.description
        model.operatorCodes = self._opcode_t
        model.subgraphs = [sub]
        model.buffers = self._buffers
        # every buffer's bytes (float32 weights are 4 per element): a builder sized too small
        # doubles and copies itself (8 of 16 s writing ddddocr's float LSTM weights)
        size = sum(np.asarray(b.data).nbytes for b in self._buffers if b.data is not None)
        builder = flatbuffers.Builder(size + 65536)
        root = model.Pack(builder)
        builder.Finish(root, file_identifier=FILE_IDENTIFIER)
        return bytes(builder.Output())
