"""Inputs of every type and outputs of every kind through the quantizer (issue 30):

- a classifier on int32 byte values whose dense layers carry [1, N] bias rows (as Keras and
  scikit-learn exporters write them): onnxruntime's quantizer raised "The truth value of
  an array with more than one element is ambiguous" on the Gemm its pre-processing made;
- scikit-learn's MLP as skl2onnx writes it by default: an int64 label and a ZipMap output
  (a sequence of maps) fed by the Softmax ('out_activations_result').
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from edgekit.converters import build, plan_for
from edgekit.converters.context import BuildConfig, BuildContext, temp_under
from edgekit.converters.pipeline import Pipeline
from edgekit.targets import load_profile

import edgekit

from .graphs import byte_classifier, twice_declared_opset, zipmap_mlp


def test_an_int32_byte_input_classifier_builds_and_matches_float(tmp_path):
    source = byte_classifier(tmp_path / "bytes.onnx")
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, (48, 32)).astype(np.int32)
    np.savez(tmp_path / "bytes.npz", bytes=data)
    result = build(str(source), target="rpi4", calib=str(tmp_path / "bytes.npz"), quiet=True,
                   output=tmp_path / "bytes.edgekit", guard_time=0)
    spec = result.manifest["inputs"][0]
    assert spec["dtype"] == "int32" and "quantization" not in spec  # passed through as is
    float_probs = ort.InferenceSession(str(source)).run(None, {"bytes": data[:8]})[0]
    model = edgekit.load(str(result.path))
    try:
        got = np.concatenate([model.predict(data[i:i + 1]) for i in range(8)])
    finally:
        model.close()
    assert np.abs(got - float_probs).max() < 0.05
    assert (got.argmax(1) == float_probs.argmax(1)).mean() >= 7 / 8


def test_a_zipmap_mlp_quantizes_with_its_probabilities_as_a_tensor(tmp_path):
    """Up to the quantizer's choice (``validate``): the estimator's reading of ``ai.onnx.ml``
    ops (the ArrayFeatureExtractor of the label) is another part of issue 30."""
    source = zipmap_mlp(tmp_path / "mlp.onnx")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((48, 16)).astype(np.float32)
    config = BuildConfig.from_options(source=str(source), target="rpi4", calib={"X": x},
                                      quiet=True)
    ctx = BuildContext(config=config, profile=load_profile("rpi4"), workdir=tmp_path / "w",
                       report=lambda m: None)
    ctx.workdir.mkdir()
    with temp_under(ctx.workdir):
        Pipeline(plan_for(config).until("validate")).run(ctx)
    outputs = {o["name"]: o for o in ctx.outputs}
    assert set(outputs) == {"output_label", "output_probability"}
    assert outputs["output_probability"]["shape"][1:] == [3]
    label, maps = ort.InferenceSession(str(source)).run(None, {"X": x[:8]})
    session = ort.InferenceSession(str(ctx.quant_path), providers=["CPUExecutionProvider"])
    got = [session.run(["output_label", "output_probability"], {"X": x[i:i + 1]}) for i in range(8)]
    probs = np.concatenate([g[1] for g in got])
    want = np.array([[m[k] for k in range(3)] for m in maps], np.float32)
    assert np.abs(probs - want).max() < 0.05  # the tensor the maps held, column k = label k
    assert (np.concatenate([g[0] for g in got]) == label).mean() >= 7 / 8


def test_a_model_naming_the_default_domain_twice_builds(tmp_path):
    """skl2onnx's LogisticRegression graph: onnxruntime's quantizer stopped at "Failed to find
    proper ai.onnx domain" on its two default-domain opset entries."""
    source = twice_declared_opset(tmp_path / "logreg.onnx")
    x = np.random.default_rng(5).standard_normal((48, 16)).astype(np.float32)
    np.savez(tmp_path / "x.npz", X=x)
    result = build(str(source), target="rpi4", calib=str(tmp_path / "x.npz"), quiet=True,
                   output=tmp_path / "logreg.edgekit", guard_time=0, formats=["onnx"])
    want = ort.InferenceSession(str(source)).run(None, {"X": x[:8]})[0]
    model = edgekit.load(str(result.path))
    try:
        got = np.concatenate([model.predict(x[i:i + 1]) for i in range(8)])
    finally:
        model.close()
    assert (got.argmax(1) == want.argmax(1)).mean() >= 7 / 8
