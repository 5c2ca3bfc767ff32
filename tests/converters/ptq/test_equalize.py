"""Cross-layer equalization: channel ranges equalized, float outputs unchanged, Relu6 left alone."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from edgekit.converters.stages.equalize import HEADROOM, channel_ranges, equalize

from .nets import conv_act_depthwise


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(None, {"input": x[i:i + 1]})[0] for i in range(len(x))])


def test_equalization_levels_the_depthwise_input_channels_and_keeps_the_function() -> None:
    x = np.random.default_rng(1).normal(size=(16, 3, 6, 6)).astype(np.float32)
    feeds = [{"input": x[i:i + 1]} for i in range(len(x))]
    model = conv_act_depthwise("Relu")
    before_ranges = channel_ranges(model, ["a1"], feeds)["a1"]
    before = _run(model, x)
    done = equalize(model, feeds)
    after_ranges = channel_ranges(model, ["a1"], feeds)["a1"]
    assert done["pairs"] == 1
    assert before_ranges.max() / before_ranges.min() > 100  # the spread the net was made with
    # every channel raised to 1/HEADROOM of the range or more; the widest one left where it was
    assert np.isclose(after_ranges.max(), before_ranges.max(), rtol=1e-4)
    low = before_ranges < before_ranges.max() / HEADROOM
    np.testing.assert_allclose(after_ranges[low], before_ranges.max() / HEADROOM, rtol=1e-4)
    np.testing.assert_allclose(after_ranges[~low], before_ranges[~low], rtol=1e-4)
    np.testing.assert_allclose(_run(model, x), before, rtol=1e-4, atol=1e-4 * np.abs(before).max())


def test_relu6_pairs_are_not_rescaled() -> None:
    model = conv_act_depthwise("Clip")
    weights = {t.name: onnx.numpy_helper.to_array(t).copy() for t in model.graph.initializer}
    x = np.random.default_rng(2).normal(size=(4, 3, 6, 6)).astype(np.float32)
    done = equalize(model, [{"input": x}])
    assert done == {"pairs": 0, "skipped_clip": 1}
    for t in model.graph.initializer:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(t), weights[t.name])
