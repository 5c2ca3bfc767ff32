"""The LiteRT backend on real built artifacts: profile order picks it, it takes and returns
the manifest's NCHW float arrays (transposing and quantizing for the NHWC int8 model),
runs larger batches on a batch-1 model, and fails with typed errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.artifact.archive import read_artifact
from edgekit.backends import BackendOptions, TensorSpec, by_name
from edgekit.backends.litert import LiteRTBackend, TFLiteRuntimeBackend
from edgekit.errors import ArtifactError, InputError, RuntimeUnavailableError


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory) -> Path:
    """A conv net with a 4-D (NCHW) output, built for rpi4 as tflite + onnx."""
    torch = pytest.importorskip("torch")
    from edgekit.converters import build
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 5, 1)).eval()
    work = tmp_path_factory.mktemp("seg")
    src = work / "seg.onnx"
    torch.onnx.export(net, (torch.randn(1, 3, 12, 10),), str(src), dynamo=False,
                      input_names=["image"], output_names=["mask"], opset_version=17)
    out = work / "seg.rpi4.edgekit"
    build(str(src), target="rpi4", calib="synthetic", method="minmax", quiet=True,
          output=out, formats=["tflite", "onnx"])
    return out


def test_rpi4_artifact_loads_on_litert_by_default(digits_artifact, digits_data):
    x, y = digits_data
    with edgekit.load(digits_artifact) as model:
        assert model.runtime == "litert" and model.format == "tflite"
        logits = model.predict(x[:200])  # symbolic batch in the manifest, batch 1 model
    assert logits.shape == (200, 10) and logits.dtype == np.float32
    assert (logits.argmax(1) == y[:200]).mean() >= 0.95


def test_nchw_in_nchw_out_matches_onnxruntime(segmenter):
    x = np.random.default_rng(0).standard_normal((3, 3, 12, 10)).astype(np.float32)
    entry = next(m for m in read_artifact(segmenter).manifest["models"]
                 if m["format"] == "tflite")
    assert entry["inputs"][0]["shape"] == [1, 12, 10, 3]  # the model itself is NHWC
    with edgekit.load(segmenter, backend="litert") as lite, \
            edgekit.load(segmenter, backend="onnxruntime") as ort:
        got, want = lite.predict(x), ort.predict(x)
    assert got.shape == want.shape == (3, 5, 12, 10)
    step = entry["outputs_quantization"]["mask"]["scale"]
    assert (np.abs(got - want) <= step * 1.001).mean() >= 0.99


def test_threads_and_missing_entry(segmenter):
    artifact = read_artifact(segmenter)
    spec = artifact.spec
    tflite = spec.model("tflite")
    assert tflite is not None
    entry = tflite.data
    data = artifact.read(tflite.path)
    inputs = [TensorSpec.from_manifest(i.data) for i in spec.inputs]
    outputs = [TensorSpec.from_manifest(o.data) for o in spec.outputs]
    x = {"image": np.random.default_rng(1).standard_normal((1, 3, 12, 10)).astype(np.float32)}
    one = LiteRTBackend(data, inputs, outputs, BackendOptions(threads=1), entry=entry).run(x)
    two = LiteRTBackend(data, inputs, outputs, BackendOptions(threads=2), entry=entry).run(x)
    # without the entry the layout is recognised from the shapes ([1,3,12,10] vs [1,12,10,3])
    bare = LiteRTBackend(data, inputs, outputs, BackendOptions()).run(x)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[0], bare[0])
    assert one[0].shape == (1, 5, 12, 10)


def test_typed_errors(segmenter):
    spec = read_artifact(segmenter).spec
    inputs = [TensorSpec.from_manifest(i.data) for i in spec.inputs]
    outputs = [TensorSpec.from_manifest(o.data) for o in spec.outputs]
    with pytest.raises(ArtifactError, match="litert could not load"):
        LiteRTBackend(b"not a flatbuffer" * 8, inputs, outputs, BackendOptions())
    with edgekit.load(segmenter, backend="litert") as model:
        with pytest.raises(InputError, match="expects"):
            model.backend.run({"image": np.zeros((1, 3, 10, 12), np.float32)})


def test_tflite_runtime_fallback_is_registered_and_reports_missing(segmenter, monkeypatch):
    cls = by_name("tflite-runtime")
    assert cls is TFLiteRuntimeBackend and cls.format == "tflite"
    assert cls.package == "tflite-runtime" and LiteRTBackend.available()
    # whatever is installed here, available() must agree with what loading it does
    if cls.available():
        with edgekit.load(segmenter, backend="tflite-runtime") as model:
            assert model.runtime == "tflite-runtime"
    else:
        with pytest.raises(RuntimeUnavailableError, match="pip install tflite-runtime"):
            edgekit.load(segmenter, backend="tflite-runtime")
    # a runtime whose import fails (a broken wheel, numpy 2 against tflite-runtime) is not
    # available, and the artifact falls back to the next format the profile lists
    monkeypatch.setitem(sys.modules, LiteRTBackend.module, None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, TFLiteRuntimeBackend.module, None)
    assert not LiteRTBackend.available() and not cls.available()
    with edgekit.load(segmenter) as model:
        assert model.runtime == "onnxruntime" and model.format == "onnx"


def test_forcing_an_uninstalled_runtime_says_how_to_install(segmenter):
    if TFLiteRuntimeBackend.available():
        pytest.skip("tflite-runtime is installed here")
    with pytest.raises(RuntimeUnavailableError, match="pip install tflite-runtime"):
        edgekit.load(segmenter, backend="tflite-runtime")
