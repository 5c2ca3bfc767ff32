"""The float tail of an ``If`` whose branches read the outer scope (openWakeWord's
hey_jarvis: ``If(p >= 0.5, then: verifier(x), else: Identity(p))``, issue 30): the tail
graph must hold what the branches read, not only what ``node.input`` lists. Before the
fix the tail lacked the Sigmoid making ``p`` and the then-branch's weight, and onnxruntime
refused it ("input 'p' of node ... is not output of any previous nodes"): an internal
error at the package stage."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.core.runner import session
from edgekit.converters.graph.scopes import node_reads, outer_reads
from edgekit.converters.metrics.float_tail import float_step, int8_boundary, tail_model
from onnx import TensorProto, helper, numpy_helper

S_IN, S_P = 0.02, 1 / 255


def if_reading_the_outer_scope() -> onnx.ModelProto:
    """x -> Q/DQ -> Sigmoid -> p (float); p -> Q/DQ -> p_dq >= 0.5 -> cond;
    out = If(cond, then: Mul(x, w) (x and w from the outer scope), else: Identity(p))."""
    def init(name: str, value: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(value, name)

    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["then_out"])], "then", [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["p"], ["else_out"])], "else", [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "zero"], ["x_q"]),
        helper.make_node("DequantizeLinear", ["x_q", "s_in", "zero"], ["x_dq"]),
        helper.make_node("Sigmoid", ["x_dq"], ["p"]),
        helper.make_node("QuantizeLinear", ["p", "s_p", "zero_p"], ["p_q"]),
        helper.make_node("DequantizeLinear", ["p_q", "s_p", "zero_p"], ["p_dq"]),
        helper.make_node("GreaterOrEqual", ["p_dq", "half"], ["cond_v"]),
        helper.make_node("Squeeze", ["cond_v"], ["cond"]),
        helper.make_node("If", ["cond"], ["out"], then_branch=then_branch,
                         else_branch=else_branch),
    ]
    graph = helper.make_graph(
        nodes, "if_outer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [init("s_in", np.array(S_IN, np.float32)), init("zero", np.array(0, np.int8)),
         init("s_p", np.array(S_P, np.float32)), init("zero_p", np.array(0, np.uint8)),
         init("half", np.array(0.5, np.float32)), init("w", np.array([[3.0]], np.float32))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def test_a_branch_reads_its_outer_scope_recursively() -> None:
    model = if_reading_the_outer_scope()
    node = next(n for n in model.graph.node if n.op_type == "If")
    reads = node_reads(node)
    assert reads[0] == "cond" and sorted(reads[1:]) == ["p", "w", "x"]
    # a nested If: its own outputs and inputs are local, what it reads from above is not
    inner = helper.make_graph([node], "outer_body", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, None)], [helper.make_tensor_value_info(
            "out", TensorProto.FLOAT, None)])
    assert sorted(outer_reads(inner)) == ["cond", "p", "w"]
    # a branch that returns an outer tensor as it is, with no node, reads it too
    bare = helper.make_graph([], "bare", [], [helper.make_tensor_value_info(
        "p", TensorProto.FLOAT, None)])
    assert outer_reads(bare) == ["p"]


def test_the_tail_of_an_if_holds_what_its_branches_read() -> None:
    model = if_reading_the_outer_scope()
    # the branches' p comes from the Sigmoid on x_dq: both int8 tensors are the boundary
    assert int8_boundary(model, "out") == {"p_dq": "s_p", "x_dq": "s_in"}
    tail = tail_model(model, ["p_dq", "x_dq"], "out")
    session(tail.SerializeToString())  # onnxruntime loads it (it refused it before)
    assert {n.op_type for n in tail.graph.node} == {"Sigmoid", "GreaterOrEqual", "Squeeze", "If"}
    assert {"w", "half"} <= {t.name for t in tail.graph.initializer}
    # the probe runs: x well below 0 takes the else branch, out = sigmoid(x_dq), whose response
    # to one input step is at most sigmoid' (<= 1/4) times the step
    x = np.array([[-2.0]], np.float32)
    host = session(model.SerializeToString(), exact_int8=True).run(["out"], {"x": x})[0]
    assert host[0, 0] < 0.5
    step = float_step(model, "out", {"x": x})
    assert 0.0 < step <= 0.25 * S_IN + 1e-6
