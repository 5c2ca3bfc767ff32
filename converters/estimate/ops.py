"""What each executed op costs in work: fused groups, MACs, bytes moved, op kind.

Runtimes fuse an activation (and a BatchNorm or constant Add/Mul) into the Conv or Gemm
before it, MatMul + bias into Gemm, Add + LayerNormalization into one kernel, the Erf
expansion of GELU into one kernel, and a last-two-axes Transpose into the MatMul reading
it (onnxruntime's ConvActivationFusion, ConvBNFusion, MatMulAddFusion,
SkipLayerNormFusion, GeluFusion, MatMulTransposeFusion; XNNPACK fuses the same
activations). A fused op is one kernel call: one per-op overhead and one pass over memory.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .types import Graph, Node

KINDS = ("conv", "stem", "depthwise", "gemm", "elementwise")
MAC_KINDS = KINDS[:4]  # multiply-accumulate kernels
# A dense conv over this few input channels per group (an image stem: gray or RGB) cannot
# fill SIMD lanes along its input channels; it gets its own, lower rate ("stem").
STEM_MAX_CHANNELS = 3
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"}
ALIAS_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}  # the output shares the input buffer
INPLACE_OPS = ACTIVATIONS | {
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Exp", "Log", "Sqrt", "Erf", "Pow",
    "BatchNormalization", "QuantizeLinear", "DequantizeLinear",
}
# (activation input index, weight input index) of the MAC-heavy ops
MAC_OPS = {
    "Conv": (0, 1), "ConvInteger": (0, 1), "QLinearConv": (0, 3), "ConvTranspose": (0, 1),
    "Gemm": (0, 1), "MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3),
    "FusedMatMul": (0, 1),
}
INTEGER_OPS = {"ConvInteger", "QLinearConv", "MatMulInteger", "QLinearMatMul"}
# Recurrent cells and their gates: each time step multiplies the input by W and the hidden
# state by R for every gate (ONNX LSTM: i, o, f, c; GRU: z, r, h; RNN: one).
RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# Element operations per output element, in units of one add, for ops that do more than one
# pass or evaluate a polynomial (exp, erf) per element.
ELEMENT_FACTOR = {"Softmax": 4, "LogSoftmax": 4, "LayerNormalization": 4, "Erf": 4, "Exp": 2,
                  "Tanh": 3, "Sigmoid": 3, "InstanceNormalization": 4, "Resize": 2}


@dataclass
class Op:
    """One kernel call after fusion."""

    name: str
    op_type: str  # the fused chain, e.g. "Conv+BatchNormalization+Relu"
    kind: str  # one of KINDS, or "alias" (reshape-like: no data moved)
    int8: bool
    macs: int  # multiply-accumulates (conv, gemm) or element operations (elementwise)
    out_elems: int  # elements written (the output pass: activation, requantization, layout)
    act_bytes: int  # activation bytes read and written
    weight_bytes: int
    inputs: list[str] = field(default_factory=list)  # activations read (after fusion)
    outputs: list[str] = field(default_factory=list)
    weight_names: list[str] = field(default_factory=list)  # constants read (weights, biases)
    inplace: bool = False  # may write its output over an input that dies here
    uncosted: str = ""  # why the cost model cannot cost it (timed on the host instead)
    int16: bool = False  # a 16x8 integer kernel (int16 activations): ``cost.REFERENCE_16X8``
    int32_bias: bool = False  # ... written with an int32 bias: LiteRT's optimized kernel, as int8

    @property
    def dtype(self) -> str:
        return "int8" if self.int8 else "float32"


def _numel(graph: Graph, name: str) -> int:
    return graph.info(name).numel


def _shape(graph: Graph, name: str) -> tuple[int, ...]:
    return graph.info(name).shape or ()


def _prod(values: tuple[int, ...] | list[int]) -> int:
    result = 1
    for value in values:
        result *= int(value)
    return result


def recurrent_macs(graph: Graph, node: Node) -> int:
    """Multiply-accumulates of an LSTM/GRU/RNN unrolled over its sequence: every step runs
    ``W`` ([directions, gates x hidden, input]) on the input and ``R`` ([directions, gates x
    hidden, hidden]) on the hidden state, so steps x batch x (|W| + |R|). A 3-layer LSTM
    speaker encoder (40 mel -> 256, 160 frames) is about 216 M; counted as its output
    elements it was 65.5 k."""
    x = _shape(graph, node.inputs[0])
    if len(x) != 3 or len(node.inputs) < 3:
        return 0
    steps, batch = (x[1], x[0]) if node.attrs.get("layout", 0) else (x[0], x[1])
    weights = _prod(_shape(graph, node.inputs[1])) + _prod(_shape(graph, node.inputs[2]))
    return int(steps) * int(batch) * weights


def mac_work(graph: Graph, node: Node) -> tuple[str, int]:
    """(kind, MACs) of a MAC-heavy node; ("elementwise", element ops) otherwise."""
    if node.op_type in RECURRENT_GATES:
        return "gemm", recurrent_macs(graph, node)
    if node.op_type in MAC_OPS:
        act, weight = MAC_OPS[node.op_type]
        if len(node.inputs) <= weight:
            return "gemm", 0
        w_shape = _shape(graph, node.inputs[weight])
        out = sum(_numel(graph, o) for o in node.outputs[:1] if o)
        if node.op_type in ("Conv", "ConvInteger", "QLinearConv"):
            if len(w_shape) < 3:
                return "conv", 0
            group = int(node.attrs.get("group", 1))
            kind = "depthwise" if group > 1 and w_shape[1] == 1 else (
                "stem" if w_shape[1] <= STEM_MAX_CHANNELS else "conv")
            return kind, out * _prod(w_shape[1:])
        if node.op_type == "ConvTranspose":
            return "conv", _numel(graph, node.inputs[act]) * _prod(w_shape[1:])
        a_shape = _shape(graph, node.inputs[act])
        if not a_shape:
            return "gemm", 0
        if node.op_type == "Gemm":
            k = a_shape[0] if node.attrs.get("transA", 0) else a_shape[-1]
        elif node.op_type == "FusedMatMul" and node.attrs.get("transA", 0) and len(a_shape) > 1:
            k = a_shape[-2]
        else:
            k = a_shape[-1]
        return "gemm", out * int(k)
    if node.op_type in ("MaxPool", "AveragePool", "LpPool"):
        kernel = node.attrs.get("kernel_shape", [1])
        return "elementwise", sum(_numel(graph, o) for o in node.outputs if o) * _prod(kernel)
    if node.op_type.startswith(("Global", "Reduce")):
        return "elementwise", sum(_numel(graph, i) for i in node.inputs[:1] if i)
    factor = ELEMENT_FACTOR.get(node.op_type, 1)
    elems = max([_numel(graph, o) for o in node.outputs if o] + [0])
    return "elementwise", elems * factor


def _last_two_swapped(node: Node) -> bool:
    perm = list(node.attrs.get("perm", []))
    n = len(perm)
    return n >= 2 and perm == list(range(n - 2)) + [n - 1, n - 2]


def _can_fuse(group: list[Node], node: Node, graph: Graph) -> bool:
    lead = group[0]
    if node.uncosted or lead.uncosted:  # a foreign-domain "Relu" is not onnxruntime's
        return False
    types = {n.op_type for n in group}
    other_const = all(i in graph.consts for i in node.inputs[1:] if i) and len(node.inputs) > 1
    if node.op_type in ACTIVATIONS:
        if types & ACTIVATIONS:
            return False
        return lead.op_type in ("Conv", "ConvTranspose", "Gemm", "QLinearConv") or (
            node.int8 and lead.int8 and lead.op_type in MAC_OPS)
    if types & ACTIVATIONS:
        return False
    if node.op_type == "BatchNormalization":
        return lead.op_type == "Conv" and len(group) == 1
    if node.op_type in ("Add", "Mul", "Sub", "Div") and other_const and node.int8 == lead.int8:
        if lead.op_type in ("Conv", "MatMul", "Gemm") and len(group) <= 2:
            return True
    if node.op_type == "Erf":
        return lead.op_type in ("Div", "Mul") and len(group) == 1
    if "Erf" in types and node.op_type in ("Add", "Mul") and len(group) < 5:
        return True
    if node.op_type == "LayerNormalization":
        return lead.op_type == "Add" and len(group) == 1 and not lead.int8
    return False


def group_nodes(graph: Graph) -> list[list[Node]]:
    """Executed nodes grouped into kernel calls, in execution order."""
    uses: Counter[str] = Counter(i for n in graph.nodes for i in n.inputs if i)
    uses.update(graph.outputs)
    group_of: dict[str, int] = {}
    groups: list[list[Node]] = []
    for node in graph.nodes:
        target = None
        for name in node.inputs:
            if not name or name in graph.consts or uses[name] != 1 or name not in group_of:
                continue
            index = group_of[name]
            if groups[index][-1].outputs[0] == name and _can_fuse(groups[index], node, graph):
                target = index
                break
        if target is None:
            groups.append([node])
            target = len(groups) - 1
        else:
            groups[target].append(node)
        for out in node.outputs:
            if out:
                group_of[out] = target
    return groups


def build_ops(graph: Graph) -> list[Op]:
    """The kernel calls of ``graph`` with their work and traffic."""
    groups = group_nodes(graph)
    readers: Counter[str] = Counter(i for n in graph.nodes for i in n.inputs if i)
    consumer_of: dict[str, Node] = {}
    for node in graph.nodes:
        for name in node.inputs:
            consumer_of.setdefault(name, node)
    ops: list[Op] = []
    for group in groups:
        lead = group[0]
        produced = {o for n in group for o in n.outputs if o}
        inputs = list(dict.fromkeys(i for n in group for i in n.inputs
                                    if i and i not in produced and i not in graph.consts))
        weights = list(dict.fromkeys(i for n in group for i in n.inputs
                                     if i and i in graph.consts))
        internal_reads = Counter(i for n in group for i in n.inputs if i in produced)
        outputs = [o for o in produced if o in graph.outputs or readers[o] > internal_reads[o]]
        kind, macs = ("elementwise", 0) if lead.uncosted else mac_work(graph, lead)
        if kind == "elementwise" and not lead.uncosted:  # a fused elementwise chain does each member's work;
            for member in group[1:]:  # what fuses into a conv/gemm rides on its output pass
                macs += mac_work(graph, member)[1]
        name = "+".join(n.op_type for n in group)
        folded = (lead.op_type == "Transpose" and len(group) == 1 and _last_two_swapped(lead)
                  and readers[lead.outputs[0]] == 1
                  and consumer_of.get(lead.outputs[0]) is not None
                  and consumer_of[lead.outputs[0]].op_type == "MatMul")
        if (lead.op_type in ALIAS_OPS and len(group) == 1) or folded:
            kind, macs = "alias", 0
        int8 = lead.int8 or lead.op_type in INTEGER_OPS
        ops.append(Op(
            name=lead.name, op_type=name, kind=kind, int8=int8, macs=int(macs),
            out_elems=sum(graph.info(t).numel for t in outputs) if kind != "alias" else 0,
            act_bytes=sum(graph.info(t).nbytes for t in inputs + outputs) if kind != "alias"
            else 0,
            weight_bytes=sum(graph.info(w).nbytes for w in weights) if kind != "alias" else 0,
            inputs=inputs, outputs=outputs, weight_names=weights if kind != "alias" else [],
            inplace=kind == "elementwise" and lead.op_type in INPLACE_OPS,
            uncosted=lead.uncosted, int16=lead.int16 and kind in MAC_KINDS,
            int32_bias=lead.int32_bias,
        ))
    return ops
