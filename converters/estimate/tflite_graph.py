"""The estimator's view of a ``.tflite`` model: its ops and tensors as the estimator's graph.

A default rpi build ships only a ``.tflite``; the estimator's rules (MAC counting, fusion,
liveness, the cost model) are written against ONNX op names and ONNX weight layouts, so this
reader maps each TFLite op to the ONNX op it computes and each weight to its ONNX layout:

* ``CONV_2D`` filter ``[O, kh, kw, I/g]`` -> ``Conv`` weight ``[O, I/g, kh, kw]`` (a filter
  with fewer channels than its input is a grouped conv);
* ``DEPTHWISE_CONV_2D`` filter ``[1, kh, kw, C*m]`` -> ``Conv`` weight ``[C*m, 1, kh, kw]``,
  ``group`` = C;
* ``TRANSPOSE_CONV`` filter ``[O, kh, kw, I]`` -> ``ConvTranspose`` weight ``[I, O, kh, kw]``;
* ``FULLY_CONNECTED`` (weights ``[O, I]``, flattening its input) -> a Reshape alias to
  ``[rows, I]`` and a ``Gemm`` with ``transB``.

Activations stay NHWC: element counts and bytes do not depend on the layout. The ``int8``
variant is the file as stored (QUANTIZE/DEQUANTIZE stay kernels of their own, as in a fused
ONNX graph); the ``float32`` variant drops them and counts every quantized tensor as float.
Reads the flatbuffer with the schema bindings that ship inside the ai-edge-litert wheel.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import ModelFormatError, UnsupportedModelError

from .types import DROPPED, QDQ, Graph, Node, TensorInfo, resolve

__all__ = ["TFLiteModel", "read_tflite", "tflite_bytes"]

# BuiltinOperator name -> the ONNX op the estimator's rules know it by. Names not listed
# become CamelCase of the TFLite name and are costed as elementwise work on their output.
ONNX_OP = {
    "CONV_2D": "Conv", "DEPTHWISE_CONV_2D": "Conv", "TRANSPOSE_CONV": "ConvTranspose",
    "FULLY_CONNECTED": "Gemm", "BATCH_MATMUL": "FusedMatMul",
    "AVERAGE_POOL_2D": "AveragePool", "MAX_POOL_2D": "MaxPool", "L2_POOL_2D": "LpPool",
    "MEAN": "ReduceMean", "SUM": "ReduceSum", "REDUCE_MAX": "ReduceMax",
    "REDUCE_MIN": "ReduceMin", "REDUCE_PROD": "ReduceProd",
    "SOFTMAX": "Softmax", "LOG_SOFTMAX": "LogSoftmax", "LOGISTIC": "Sigmoid", "TANH": "Tanh",
    "RELU": "Relu", "RELU6": "Clip", "RELU_N1_TO_1": "Clip", "LEAKY_RELU": "LeakyRelu",
    "HARD_SWISH": "HardSwish", "PRELU": "PRelu", "GELU": "Gelu",
    "ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div", "EXP": "Exp", "SQRT": "Sqrt",
    "RSQRT": "Sqrt", "POW": "Pow", "ABS": "Abs", "NEG": "Neg", "LOG": "Log",
    "MAXIMUM": "Max", "MINIMUM": "Min", "SQUARED_DIFFERENCE": "Sub",
    "RESHAPE": "Reshape", "SQUEEZE": "Squeeze", "EXPAND_DIMS": "Unsqueeze",
    "CONCATENATION": "Concat", "TRANSPOSE": "Transpose", "PAD": "Pad", "PADV2": "Pad",
    "MIRROR_PAD": "Pad", "QUANTIZE": "QuantizeLinear", "DEQUANTIZE": "DequantizeLinear",
    "RESIZE_BILINEAR": "Resize", "RESIZE_NEAREST_NEIGHBOR": "Resize", "GATHER": "Gather",
    "SPLIT": "Split", "SPLIT_V": "Split", "STRIDED_SLICE": "Slice", "SLICE": "Slice",
}
CONTROL_FLOW = {"WHILE", "IF", "CALL_ONCE", "CALL"}
# TensorType name -> (itemsize, holds quantized or float data)
TYPES = {"FLOAT32": (4, True), "FLOAT16": (2, True), "FLOAT64": (8, True),
         "BFLOAT16": (2, True), "INT8": (1, True), "UINT8": (1, True), "INT16": (2, True),
         "INT32": (4, False), "INT64": (8, False), "BOOL": (1, False), "UINT32": (4, False),
         "UINT16": (2, False), "UINT64": (8, False)}
EIGHT_BIT = {"INT8", "UINT8", "INT16"}  # the integer kernels' activation types


def tflite_bytes(source: Any) -> bytes | None:
    """The ``.tflite`` to estimate: a ``.tflite`` path, or the tflite model of an artifact
    that holds no ONNX model (an ONNX model, when there is one, is read as before)."""
    if not isinstance(source, (str, Path)):
        return None
    path = Path(source)
    if path.suffix == ".tflite":
        if not path.is_file():
            raise ModelFormatError(f"{path}: no such model file (expected a .tflite file)")
        return path.read_bytes()
    if path.suffix != ".edgekit" or not path.is_file():
        return None
    from edgekit.artifact.archive import read_artifact

    artifact = read_artifact(path)
    models = list(artifact.spec.models)
    if any(m.format == "onnx" for m in models):
        return None
    entry = next((m for m in models if m.format == "tflite"), None)
    return None if entry is None else artifact.read(entry.path)


class TFLiteModel:
    """One parsed ``.tflite``: its first subgraph's ops and tensors, named uniquely."""

    def __init__(self, data: bytes, name: str = "<tflite>") -> None:
        from ..tflite.schema import S, op_name

        if data[4:8] != b"TFL3":
            raise ModelFormatError(f"{name}: not a .tflite flatbuffer (expected the file "
                                   f"identifier b'TFL3' at byte 4, got {bytes(data[4:8])!r})")
        try:
            model = S.ModelT.InitFromPackedBuf(bytearray(data), 0)
        except Exception as exc:  # flatbuffers raises struct/index errors on broken files
            raise ModelFormatError(f"{name}: not a readable .tflite model: {exc}") from exc
        if not model.subgraphs:
            raise ModelFormatError(f"{name}: a .tflite with no subgraph")
        self.graph = model.subgraphs[0]
        self.buffers = model.buffers or []
        type_names = {v: k for k, v in vars(S.TensorType).items() if not k.startswith("_")}
        codes = [max(int(c.builtinCode), int(c.deprecatedBuiltinCode))
                 for c in model.operatorCodes or []]
        self.op_names = [op_name(codes[op.opcodeIndex]) for op in self.graph.operators or []]
        control = sorted(set(self.op_names) & CONTROL_FLOW)
        if control:
            raise UnsupportedModelError(
                f"{name}: has control flow ({', '.join(control)}); the estimator needs a flat "
                "graph")
        self.names: list[str] = []
        seen: Counter[str] = Counter()
        self.types: list[str] = []
        for index, tensor in enumerate(self.graph.tensors or []):
            label = (tensor.name or b"").decode("utf-8", "replace") or f"t{index}"
            seen[label] += 1
            self.names.append(label if seen[label] == 1 else f"{label}#{index}")
            self.types.append(type_names.get(int(tensor.type), "UNKNOWN"))

    def shape(self, index: int) -> tuple[int, ...]:
        shape = self.graph.tensors[index].shape
        return tuple(int(d) for d in shape) if shape is not None else ()

    def is_const(self, index: int) -> bool:
        buffer = self.graph.tensors[index].buffer
        return 0 < buffer < len(self.buffers) and self.buffers[buffer].data is not None \
            and len(self.buffers[buffer].data) > 0

    def quantized(self, index: int) -> bool:
        q = self.graph.tensors[index].quantization
        return q is not None and q.scale is not None and len(q.scale) > 0

    def stored(self) -> tuple[dict[str, int], dict[str, int]]:
        """Bytes and parameter counts of the constant tensors, by numpy dtype name."""
        by_bytes: Counter[str] = Counter()
        by_count: Counter[str] = Counter()
        for index, kind in enumerate(self.types):
            if self.is_const(index):
                dtype = kind.lower()
                count = int(np.prod(self.shape(index), dtype=np.int64))
                by_count[dtype] += count
                by_bytes[dtype] += count * TYPES.get(kind, (1, False))[0]
        return dict(by_bytes), dict(by_count)

    def stored_precision(self) -> str:
        return "int8" if any(t in EIGHT_BIT and self.quantized(i)
                             for i, t in enumerate(self.types)) else "float32"

    def input_names(self) -> list[str]:
        return [self.names[i] for i in self.graph.inputs]


def _options(op: Any) -> Any:
    return op.builtinOptions


def _node(model: TFLiteModel, index: int, op: Any, tensors: dict[str, TensorInfo],
          ) -> list[Node]:
    """The ONNX-style node(s) of one TFLite op; weight shapes rewritten to ONNX layouts."""
    tf_name = model.op_names[index]
    op_type = ONNX_OP.get(tf_name) or "".join(p.capitalize() for p in tf_name.split("_"))
    ins = [model.names[i] if i >= 0 else "" for i in op.inputs]
    outs = [model.names[i] for i in op.outputs if i >= 0]
    name = f"{tf_name}#{index}"
    attrs: dict[str, Any] = {}
    nodes: list[Node] = []

    def set_shape(tensor: str, shape: tuple[int, ...]) -> None:
        tensors[tensor] = TensorInfo(shape, tensors[tensor].itemsize, tensors[tensor].floating)

    if tf_name in ("CONV_2D", "DEPTHWISE_CONV_2D") and len(op.inputs) > 1:
        x_shape, w_shape = model.shape(op.inputs[0]), model.shape(op.inputs[1])
        channels = x_shape[-1] if x_shape else 1
        if tf_name == "CONV_2D" and len(w_shape) == 4:
            set_shape(ins[1], (w_shape[0], w_shape[3], w_shape[1], w_shape[2]))
            attrs["group"] = max(channels // max(w_shape[3], 1), 1)
        elif len(w_shape) == 4:
            set_shape(ins[1], (w_shape[3], 1, w_shape[1], w_shape[2]))
            attrs["group"] = channels
    elif tf_name == "TRANSPOSE_CONV" and len(op.inputs) > 2:
        # inputs: output shape, filter [O, kh, kw, I], activation, (bias)
        w_shape = model.shape(op.inputs[1])
        if len(w_shape) == 4:
            set_shape(ins[1], (w_shape[3], w_shape[0], w_shape[1], w_shape[2]))
        ins = [ins[2], ins[1]] + ins[3:]
    elif tf_name == "FULLY_CONNECTED" and len(op.inputs) > 1:
        w_shape = model.shape(op.inputs[1])
        x_shape = model.shape(op.inputs[0])
        depth = w_shape[-1] if w_shape else 0
        if depth and x_shape and x_shape[-1] != depth and ins[0] not in model_consts(model):
            flat = f"{ins[0]}::rows"
            rows = int(np.prod(x_shape, dtype=np.int64)) // depth
            tensors[flat] = TensorInfo((rows, depth), tensors[ins[0]].itemsize,
                                       tensors[ins[0]].floating)
            nodes.append(Node(f"{name}/flatten", "Reshape", [ins[0]], [flat]))
            ins = [flat] + ins[1:]
        attrs["transB"] = 1
    elif tf_name == "BATCH_MATMUL":
        opts = _options(op)
        attrs["transA"] = int(bool(getattr(opts, "adjX", False)))
    elif tf_name in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
        opts = _options(op)
        attrs["kernel_shape"] = [int(getattr(opts, "filterHeight", 1)),
                                 int(getattr(opts, "filterWidth", 1))]
    nodes.append(Node(name, op_type, ins, outs, attrs))
    return nodes


def model_consts(model: TFLiteModel) -> set[str]:
    return {model.names[i] for i in range(len(model.names)) if model.is_const(i)}


def read_tflite(model: TFLiteModel, precision: str = "float32") -> Graph:
    """The ops of ``model`` as a runtime executes them at ``precision`` (see module doc)."""
    if precision not in ("float32", "int8"):
        raise UnsupportedModelError(f"precision must be 'float32' or 'int8', got {precision!r}")
    tensors: dict[str, TensorInfo] = {}
    for index, kind in enumerate(model.types):
        itemsize, floating = TYPES.get(kind, (4, False))
        if precision == "float32" and (model.quantized(index) or floating):
            itemsize, floating = 4, True  # the float variant holds every such tensor as float
        tensors[model.names[index]] = TensorInfo(model.shape(index), itemsize, floating)
    consts = model_consts(model)
    kind_of = dict(zip(model.names, model.types, strict=True))
    nodes: list[Node] = []
    for index, op in enumerate(model.graph.operators or []):
        nodes.extend(_node(model, index, op, tensors))
    inputs = model.input_names()
    outputs = [model.names[i] for i in model.graph.outputs]
    alias: dict[str, str] = {}
    kept: list[Node] = []
    for node in nodes:
        data = [i for i in node.inputs if i and i not in consts]
        if node.op_type in DROPPED or (precision == "float32" and node.op_type in QDQ):
            if data:
                alias[node.outputs[0]] = data[0]
            continue
        if precision == "int8" and node.op_type not in QDQ:
            first = data[0].removesuffix("::rows") if data else ""
            node.int8 = kind_of.get(first) in EIGHT_BIT
        kept.append(node)
    for node in kept:
        node.inputs = [resolve(alias, i) for i in node.inputs]
    outputs = [resolve(alias, o) for o in outputs]
    qparams: set[str] = set()  # TFLite keeps scales in the tensor, not in tensors of their own
    return Graph(kept, tensors, consts, qparams, inputs, outputs, precision, [])
