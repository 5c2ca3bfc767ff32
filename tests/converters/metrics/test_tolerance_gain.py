"""The output layer's gain widens the max-steps bound: one step of a coarse int8 input through
a large weight moves a fine output grid by several steps (mtcnn_pnet's box head: 5.8)."""

from __future__ import annotations

import numpy as np
from edgekit.converters.metrics.tolerance import BASE_STEPS, head_gain, output_tolerance
from onnx import TensorProto, helper, numpy_helper


def qdq_conv(weights: np.ndarray, w_scale: np.ndarray, in_scale: float, out_scale: float,
             squash: str = ""):  # noqa: ANN201
    """x -> Q/DQ (in_scale) -> Conv(int8 weights, per-channel w_scale) -> Q/DQ (out_scale),
    with ``squash`` (Softmax, Sigmoid) between the Conv and the output's Q/DQ if given."""
    zero = numpy_helper.from_array(np.array(0, np.uint8), "zero")
    inits = [zero, numpy_helper.from_array(np.array(in_scale, np.float32), "s_in"),
             numpy_helper.from_array(np.array(out_scale, np.float32), "s_out"),
             numpy_helper.from_array(weights.astype(np.int8), "w_q"),
             numpy_helper.from_array(w_scale.astype(np.float32), "s_w"),
             numpy_helper.from_array(np.zeros(len(w_scale), np.int8), "w_zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "zero"], ["x_q"]),
             helper.make_node("DequantizeLinear", ["x_q", "s_in", "zero"], ["x_dq"]),
             helper.make_node("DequantizeLinear", ["w_q", "s_w", "w_zero"], ["w"], axis=0),
             helper.make_node("Conv", ["x_dq", "w"], ["y"])]
    if squash:
        nodes.append(helper.make_node(squash, ["y"], ["y_squashed"]))
    nodes += [helper.make_node("QuantizeLinear", ["y_squashed" if squash else "y", "s_out",
                                                  "zero"], ["y_q"]),
             helper.make_node("DequantizeLinear", ["y_q", "s_out", "zero"], ["out"])]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 2, 4, 4])], inits)
    return helper.make_model(graph)


def test_gain_is_largest_weight_times_input_step_in_output_steps():
    weights = np.array([[[[100]], [[-20]]], [[[10]], [[-127]]]])  # 2 out x 2 in 1x1
    model = qdq_conv(weights, np.array([0.001, 0.002]), in_scale=0.1, out_scale=0.004)
    # channel 1: 127 x 0.002 = 0.254 per input step of 0.1 -> 0.0254 = 6.35 output steps
    assert abs(head_gain(model, "out") - 6.35) < 1e-4
    expected = np.random.default_rng(0).normal(size=(2, 2, 4, 4)).astype(np.float32)
    assert output_tolerance(expected, 0.004, layers=5, gain=6.35).max_steps == 8.0
    # a small gain leaves the study's base bound alone
    assert output_tolerance(expected, 0.004, layers=5, gain=0.2).max_steps == BASE_STEPS
    assert head_gain(model, "x") == 0.0  # not produced by a weighted layer


def test_a_transposed_convolution_widens_the_bounds():
    """dbnet's ConvTranspose head: LiteRT on the Arm CPUs 93.67% within 1 step, max 3."""
    expected = np.random.default_rng(0).normal(size=(2, 1, 16, 16)).astype(np.float32)
    plain = output_tolerance(expected, 0.004, layers=28)
    wide = output_tolerance(expected, 0.004, layers=28, transposed=True)
    assert (plain.within_1_step, plain.max_steps) == (0.98, BASE_STEPS + 1)
    assert (wide.within_1_step, wide.max_steps) == (0.90, BASE_STEPS + 2)


def test_a_softmax_or_sigmoid_head_carries_the_gain_at_its_largest_slope():
    """mtcnn_pnet's probs (Conv -> Softmax): 4 steps off the host on the emulated A72 in onnx
    against a bound of 2 while no gain was seen through the Softmax; now 9.2 -> 11."""
    weights = np.array([[[[100]], [[-20]]], [[[10]], [[-127]]]])
    plain = head_gain(qdq_conv(weights, np.array([0.001, 0.002]), 0.1, 0.004), "out")
    for squash, slope in (("Softmax", 0.5), ("Sigmoid", 0.25)):
        model = qdq_conv(weights, np.array([0.001, 0.002]), 0.1, 0.004, squash=squash)
        assert abs(head_gain(model, "out") - plain * slope) < 1e-6
    relu = qdq_conv(weights, np.array([0.001, 0.002]), 0.1, 0.004, squash="Relu")
    assert head_gain(relu, "out") == 0.0  # no known slope: no gain claimed
