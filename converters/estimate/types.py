"""The estimator's types: tensors with byte sizes, nodes, and the graph a runtime executes.

The lowest module of ``converters/estimate``: it imports nothing from its package, so the
readers (``graph``), the rewrites (``quantized``, ``ops``, ``liveness``) and the cost model
can all depend on it without depending on each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

QDQ = {"QuantizeLinear", "DequantizeLinear"}
DROPPED = {"Identity", "Dropout"}  # removed by every runtime's graph optimizer
# Nodes whose output is known at load time when their input shape is static.
SHAPE_OPS = {"Shape", "Size"}


@dataclass
class TensorInfo:
    shape: tuple[int, ...] | None  # None: shape inference could not tell
    itemsize: int
    floating: bool = True  # float data (what quantization turns into 8-bit)

    @property
    def numel(self) -> int:
        if self.shape is None:
            return 0
        count = 1
        for dim in self.shape:
            count *= max(int(dim), 0)
        return count

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass
class Node:
    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    int8: bool = False
    int16: bool = False  # an integer kernel on int16 activations (16x8): see ``cost.REFERENCE_16X8``
    int32_bias: bool = False  # a 16x8 FULLY_CONNECTED the .tflite writer gives an int32 bias
    # why the cost model cannot cost it ("control flow (If)", "domain 'ai.onnx.ml'"); empty:
    # it can. Such a node is timed on the host instead (``uncosted.py``).
    uncosted: str = ""


@dataclass
class Graph:
    """Executed nodes in execution order, plus every tensor they touch."""

    nodes: list[Node]
    tensors: dict[str, TensorInfo]
    consts: set[str]  # initializers and folded constants
    qparams: set[str]  # scales and zero points of Q/DQ: memory, but not parameters
    inputs: list[str]
    outputs: list[str]
    precision: str
    unknown_shapes: list[str] = field(default_factory=list)

    def info(self, name: str) -> TensorInfo:
        return self.tensors.get(name) or TensorInfo(None, 4)



def resolve(alias: dict[str, str], name: str) -> str:
    seen = 0
    while name in alias and seen < 10_000:
        name = alias[name]
        seen += 1
    return name
