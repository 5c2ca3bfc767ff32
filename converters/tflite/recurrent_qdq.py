"""Keep the data moves around a recurrent cell integer: the DEQUANTIZE goes right before the
cell, the QUANTIZE right after it.

onnxruntime's QDQ quantizer leaves LSTM/GRU float, and with them the byte movers a PyTorch
export puts on their output (bidirectional stacking: ``Y [T, 2, N, H] -> Transpose ->
Reshape [T, N, 2H]``, then ``batch_first``'s Transpose). Those movers then ran float in the
.tflite, between the cells::

    LSTM -> Transpose -> Reshape -> LSTM -> Transpose -> Reshape -> Q

This pass inserts Q/DQ pairs so that each mover reads a DequantizeLinear and feeds a
QuantizeLinear, and the writer moves the bytes on integer tensors:

- a chain that ends in a QuantizeLinear takes that Q's parameters for every pair. Moving
  bytes and quantizing per tensor commute, so the values are exactly onnxruntime's;
- a chain that ends in the next cell's input takes int16 at scale 1/32767, zero
  point 0: a cell's output ``h`` lies in (-1, 1) (LSTM: ``o * tanh(c)``; GRU: a convex mix
  of ``tanh`` values and its initial state, so only GRUs whose initial state is absent or a
  constant within [-1, 1]),
  so the bound holds for any input and the added rounding is at most 1.5e-5 (LiteRT runs
  RESHAPE and TRANSPOSE on int16; its QUANTIZE/DEQUANTIZE take int16 too).

The ONNX int8 model is not changed; only the writer's copy is.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.qdq_fill import SAME_SCALE
from onnx import helper, numpy_helper

RECURRENT = ("LSTM", "GRU")
_H_SCALE = np.float32(1.0 / 32767)  # |h| < 1 on the int16 grid


def quantize_recurrent_moves(model: onnx.ModelProto, keep_float: set[str]) -> int:
    """Insert Q/DQ pairs in place around the byte movers after recurrent cells; returns how
    many pairs were inserted."""
    graph = model.graph
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    after: dict[str, list[str]] = {}  # tensor -> Q/DQ args for the pair to insert after it
    for node in graph.node:
        if node.op_type not in RECURRENT or node.name in keep_float:
            continue
        for k, name in enumerate(node.output):
            chain = _mover_chain(name, consumers, outputs, keep_float) if name else []
            if not chain or chain[-1] in outputs:
                continue  # an int16 model output would change the artifact's contract
            end_users = consumers.get(chain[-1], [])
            params = {tuple(u.input[1:]) for u in end_users}
            if end_users and all(u.op_type == "QuantizeLinear" for u in end_users) and \
                    len(params) == 1:
                args = list(params.pop())
                if any(a not in consts for a in args if a):
                    continue
                tensors = chain[:-1]  # the last mover already feeds its Q
            elif _bounded(node, k, consts) and end_users and \
                    all(u.op_type in RECURRENT and u.name not in keep_float and
                        u.input[0] == chain[-1] for u in end_users):
                args = _int16_args(graph, name)
                tensors = chain
            else:
                continue  # into a float op that is no cell: integer bytes would not help
            for t in tensors:
                after[t] = args
    if not after:
        return 0
    ordered: list[onnx.NodeProto] = []
    for node in graph.node:
        ordered.append(node)
        for out in node.output:
            if out in after:
                ordered.extend(_pair(out, after[out], consumers))
    del graph.node[:]
    graph.node.extend(ordered)
    return len(after)


def _bounded(node: onnx.NodeProto, k: int, consts: dict[str, np.ndarray]) -> bool:
    """Output ``k`` lies in [-1, 1] whatever the input: Y and Y_h of an LSTM; of a GRU
    only when its initial state is absent or a constant within [-1, 1]."""
    if k not in (0, 1):
        return False
    if node.op_type == "GRU" and len(node.input) > 5 and node.input[5]:
        h0 = consts.get(node.input[5])
        return h0 is not None and float(np.max(np.abs(h0), initial=0.0)) <= 1.0
    return True


def _mover_chain(name: str, consumers: dict, outputs: set[str], keep_float: set[str]
                 ) -> list[str]:
    """``name`` and the outputs of the byte movers that follow it one after another (each the
    only consumer of the previous tensor); empty when no mover follows."""
    chain = [name]
    while len(chain) < 8:
        users = consumers.get(chain[-1], [])
        if chain[-1] in outputs or len(users) != 1 or users[0].op_type not in SAME_SCALE or \
                users[0].name in keep_float or users[0].input[0] != chain[-1]:
            break
        chain.append(users[0].output[0])
    return chain if len(chain) > 1 else []


def _int16_args(graph: onnx.GraphProto, name: str) -> list[str]:
    scale, zero = f"{name}_edgekit_h16_scale", f"{name}_edgekit_h16_zero"
    graph.initializer.extend([numpy_helper.from_array(np.array(_H_SCALE), scale),
                              numpy_helper.from_array(np.array(0, np.int16), zero)])
    return [scale, zero]


def _pair(name: str, args: list[str], consumers: dict) -> list[onnx.NodeProto]:
    """Q -> DQ after ``name``; its consumers read the DQ."""
    q_name, dq_name = f"{name}_edgekit_rq", f"{name}_edgekit_rdq"
    pair = [helper.make_node("QuantizeLinear", [name, *args], [q_name], name=q_name),
            helper.make_node("DequantizeLinear", [q_name, *args], [dq_name], name=dq_name)]
    for user in consumers.get(name, []):
        for i, inp in enumerate(user.input):
            if inp == name:
                user.input[i] = dq_name
    return pair
