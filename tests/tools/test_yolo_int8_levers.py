"""The YOLOv8n int8 levers' mechanisms (tools/studies/yolo_int8_levers.py): MSE ranges, the
activation-slope weighted bias error, and which convs each activation reads."""

from __future__ import annotations

import numpy as np
from edgekit.converters.ptq.range_choice import fake_quant
from onnx import TensorProto, helper, numpy_helper

from tools.studies.yolo_int8_levers import activation_of, mse_range, weighted_shift


def test_the_mse_range_clips_long_tails_and_quantizes_closer() -> None:
    # a Laplace tensor (conv outputs look like it): its few extreme values cost the bulk resolution
    values = np.random.default_rng(2).laplace(size=65536)
    lo, hi = float(values.min()), float(values.max())
    low, high = mse_range(values, lo, hi, symmetric=False)
    assert lo < low and high < hi

    def mse(a: float, b: float) -> float:
        return float(np.mean((fake_quant(values, a, b, False) - values) ** 2))

    assert mse(low, high) < 0.95 * mse(lo, hi)


def test_the_mse_range_keeps_a_range_the_values_fill() -> None:
    values = np.random.default_rng(3).uniform(-1, 3, size=65536)
    assert mse_range(values, -1.0, 3.0, symmetric=False) == (-1.0, 3.0)
    assert mse_range(values, -3.0, 3.0, symmetric=True) == (-3.0, 3.0)


def test_background_logits_do_not_move_the_weighted_bias() -> None:
    # 99 background logits (-20) off by +5 in int8, one logit at the decision (-1) off by -0.2:
    # the plain mean error (+4.95) would push the decisive logit up by 5; the activation's
    # slope weighs the background at ~1e-16 of the decisive position
    x = np.full((1, 1, 100), -20.0)
    x[0, 0, 0] = -1.0
    q = x + 5.0
    q[0, 0, 0] = -1.2
    assert np.mean(q - x) > 4.9
    np.testing.assert_allclose(weighted_shift(x, q, "sigmoid"), [-0.2], atol=1e-6)
    np.testing.assert_allclose(weighted_shift(x, q, "silu"), [-0.2], atol=1e-6)  # its negative tail too


def test_a_silu_conv_and_a_class_logit_conv_are_told_apart() -> None:
    weight = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 2, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="silu_conv"),
             helper.make_node("Sigmoid", ["a"], ["gate"]), helper.make_node("Mul", ["a", "gate"], ["s"]),
             helper.make_node("Conv", ["s", "w"], ["logits"], name="class_conv"),
             helper.make_node("Reshape", ["logits", "shape"], ["flat"]),
             helper.make_node("Sigmoid", ["flat"], ["scores"]),
             helper.make_node("Conv", ["s", "w"], ["boxes"], name="box_conv")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("scores", "boxes")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              outputs, [weight, shape])
    # box_conv writes a graph output: no activation reads it
    assert activation_of(helper.make_model(graph)) == {"silu_conv": "silu", "class_conv": "sigmoid"}
