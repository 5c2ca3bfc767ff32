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


def test_the_stage_measures_ranges_on_every_calibration_sample(tmp_path) -> None:
    """A weak channel that peaks only in late calibration samples is not raised past the range
    the calibration (every sample) gives the tensor: measured on the first 64 of 100 it was,
    widening the tensor's int8 range for every channel (b9a98c5)."""
    from edgekit.converters import plan_for
    from edgekit.converters.context import BuildConfig, BuildContext, temp_under
    from edgekit.converters.pipeline import Pipeline
    from edgekit.targets import load_profile

    model = conv_act_depthwise("Relu")
    w1 = onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "w1"))[:, :, 0, 0]
    src = tmp_path / "cle.onnx"
    onnx.save(model, str(src))
    rng = np.random.default_rng(3)
    x = rng.normal(size=(100, 3, 6, 6)).astype(np.float32)
    # samples the stage sees last, along the one input direction channels 0 and 2 (the strong
    # ones) ignore: weak channel 1 then reaches many times its usual range, still under channel 2's
    v = np.cross(w1[0], w1[2])
    v *= np.sign(w1[1] @ v) * 0.5 * channel_ranges(model, ["a1"], _rows(x[:64]))["a1"].max() / abs(w1[1] @ v)
    seed = BuildConfig(source=str(src)).seed
    late = np.random.default_rng(seed).permutation(len(x))[70:]  # after data.split's shuffle
    x[late] += v[None, :, None, None].astype(np.float32)
    config = BuildConfig.from_options(source=str(src), target="host", calib=x, quiet=True, formats=["onnx"])
    ctx = BuildContext(config=config, profile=load_profile("host"), workdir=tmp_path / "w",
                       report=lambda m: None)
    ctx.workdir.mkdir()
    with temp_under(ctx.workdir):
        Pipeline(plan_for(config).until("equalize")).run(ctx)
    before = channel_ranges(model, ["a1"], _rows(x))["a1"]
    after = channel_ranges(onnx.load(str(ctx.float_path)), ["a1"], _rows(x))["a1"]
    assert ctx.quantization["equalization"]["pairs"] == 1
    first = x[np.random.default_rng(seed).permutation(len(x))[:64]]
    assert before[1] > 2 * channel_ranges(model, ["a1"], _rows(first))["a1"][1]  # the late peak
    assert after.max() <= before.max() * (1 + 1e-4)  # the tensor's range is not widened
    assert after[3] > before[3]  # and the other weak channel is still raised


def _rows(x: np.ndarray) -> list[dict[str, np.ndarray]]:
    return [{"input": x[i:i + 1]} for i in range(len(x))]
