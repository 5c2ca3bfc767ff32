"""The 8-bit side of the graph rewrite: QDQ models as runtimes fuse them, float models as
post-training static quantization would make them, and QDQ models stripped back to float.

onnxruntime runs DequantizeLinear -> op -> QuantizeLinear as one int8 kernel (QLinearConv,
QLinearMatMul, QLinearAdd, ...) when it has one for ``op``, and drops the Q/DQ around pure
data movement; where it has none (LayerNormalization, Erf...), the DQ and Q stay as kernels
of their own.
"""

from __future__ import annotations

from collections import defaultdict

from .types import QDQ, Node, TensorInfo, resolve

# Ops onnxruntime executes on 8-bit data once quantize_static wrapped them in Q/DQ
# (QLinear* kernels, or Q/DQ dropped around pure data movement).
INT8_OPS = {
    "Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Mul", "AveragePool",
    "GlobalAveragePool", "MaxPool", "Concat", "Sigmoid", "LeakyRelu", "Softmax", "Resize",
    "Relu", "Clip", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Split", "Pad",
    "Gather", "Slice",
}


def strip_qdq(nodes: list[Node], tensors: dict[str, TensorInfo],
               consts: set[str]) -> tuple[list[Node], dict[str, str]]:
    """Float variant: Q and DQ vanish; 8-bit weights and activations count as float32."""
    alias: dict[str, str] = {}
    kept = []
    for node in nodes:
        if node.op_type in QDQ:
            source = resolve(alias, node.inputs[0])
            alias[node.outputs[0]] = source
            info = tensors.get(source)
            if info is not None:
                tensors[source] = TensorInfo(info.shape, 4)
            continue
        kept.append(node)
    return kept, alias


def fuse_qdq(nodes: list[Node], consts: set[str],
              graph_outputs: list[str]) -> tuple[list[Node], dict[str, str]]:
    """A QDQ model as onnxruntime runs it: DQ -> op -> Q groups become one int8 node."""
    producer = {o: n for n in nodes for o in n.outputs if o}
    consumers: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        for name in node.inputs:
            consumers[name].append(node)

    def dq_of(name: str) -> Node | None:
        node = producer.get(name)
        return node if node is not None and node.op_type == "DequantizeLinear" else None

    quantized: set[str] = set()
    for node in nodes:
        if node.op_type in QDQ or node.op_type not in INT8_OPS:
            continue  # no int8 kernel: the runtime keeps the DQ -> op -> Q in float
        data = [i for i in node.inputs if i and i not in consts]
        weights_via_dq = [i for i in data if dq_of(i) and dq_of(i).inputs[0] in consts]
        acts = [i for i in data if i not in weights_via_dq]
        if not acts or not all(dq_of(i) for i in acts):
            continue
        outs = [o for o in node.outputs if o]
        to_q = all(o not in graph_outputs and consumers[o]
                   and all(c.op_type == "QuantizeLinear" for c in consumers[o]) for o in outs)
        if to_q or node.op_type in ("MatMul", "Gemm"):
            quantized.add(node.name)

    alias: dict[str, str] = {}
    kept = []
    for node in nodes:
        if node.op_type == "DequantizeLinear":
            out = node.outputs[0]
            if node.inputs[0] in consts:
                alias[out] = node.inputs[0]  # consumers read the 8-bit weight itself
            elif out in graph_outputs or any(c.name not in quantized for c in consumers[out]):
                kept.append(node)  # a float consumer needs the float tensor
            continue
        if node.op_type == "QuantizeLinear":
            source = producer.get(node.inputs[0])
            if source is None or source.name not in quantized:
                kept.append(node)
            continue
        if node.name in quantized:
            node.int8 = True
            # int8 kernels read the 8-bit weights and their scales / zero points
            weight_qparams = [q for i in node.inputs if i and dq_of(i) and dq_of(i).inputs[0]
                              in consts for q in dq_of(i).inputs[1:] if q]
            node.inputs = [dq_of(i).inputs[0] if i and dq_of(i) else i for i in node.inputs]
            node.inputs += weight_qparams
            new_outputs = []
            for out in node.outputs:
                qs = [c for c in consumers.get(out, []) if c.op_type == "QuantizeLinear"]
                if qs and out not in graph_outputs:
                    for q in qs[1:]:
                        alias[q.outputs[0]] = qs[0].outputs[0]
                    out = qs[0].outputs[0]
                new_outputs.append(out)
            node.outputs = new_outputs
        else:
            # float node reading a DQ'd weight: the runtime folds that DQ into a float weight
            node.inputs = [dq_of(i).inputs[0] if i and dq_of(i) and dq_of(i).inputs[0] in consts
                           else i for i in node.inputs]
        kept.append(node)
    return kept, alias


def simulate_int8(nodes: list[Node], tensors: dict[str, TensorInfo], consts: set[str],
                   graph_outputs: list[str]) -> tuple[list[Node], dict[str, str]]:
    """What-if for a float model: quantize_static's QDQ graph as onnxruntime would run it.

    Ops in ``INT8_OPS`` run on 8-bit tensors with 8-bit weights; a float op next to them
    gets a DequantizeLinear before it and a QuantizeLinear after it, which cost time too.
    """
    out: list[Node] = []
    eight_bit: set[str] = set()  # activation tensors held as 8-bit
    converted: dict[tuple[str, str], str] = {}  # (tensor, op) -> converted tensor name

    def convert(name: str, op_type: str) -> str:
        key = (name, op_type)
        if key not in converted:
            new = f"{name}::{'q' if op_type == 'QuantizeLinear' else 'dq'}"
            shape = tensors.get(name, TensorInfo(None, 4)).shape
            # the 8-bit tensor stays "floating" data (a quantized float): int8 ops take it
            tensors[new] = TensorInfo(shape, 1 if op_type == "QuantizeLinear" else 4)
            out.append(Node(f"{op_type}({name})", op_type, [name], [new]))
            converted[key] = new
        return converted[key]

    def floating(name: str) -> bool:
        return tensors.get(name, TensorInfo(None, 4)).floating

    for node in nodes:
        data = [i for i in node.inputs if i and i not in consts and floating(i)]
        int8 = node.op_type in INT8_OPS and bool(data)
        inputs = []
        for name in node.inputs:
            if not name or (name not in consts and not floating(name)):
                inputs.append(name)  # indices, shapes: not quantized
            elif name in consts:
                if int8 and name in tensors and tensors[name].floating:
                    bias = node.op_type in ("Conv", "Gemm", "ConvTranspose") and \
                        node.inputs.index(name) == 2
                    tensors[name] = TensorInfo(tensors[name].shape, 4 if bias else 1)
                inputs.append(name)
            elif int8 and name not in eight_bit:
                inputs.append(convert(name, "QuantizeLinear"))
            elif not int8 and name in eight_bit:
                inputs.append(convert(name, "DequantizeLinear"))
            else:
                inputs.append(name)
        node.inputs = inputs
        node.int8 = int8
        out.append(node)
        if int8:
            for name in node.outputs:
                if name and floating(name):
                    eight_bit.add(name)
                    info = tensors.get(name, TensorInfo(None, 4))
                    tensors[name] = TensorInfo(info.shape, 1)
    for index, name in enumerate(graph_outputs):
        if name in eight_bit:  # the model hands back float: one last DequantizeLinear
            graph_outputs[index] = convert(name, "DequantizeLinear")
    return out, {}
