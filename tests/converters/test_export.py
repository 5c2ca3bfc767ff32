"""PyTorch sources that cannot be built: each gives a typed error naming what was wrong.

Plus the exporter mechanics: the TorchScript fallback (with its warning and manifest record)
and the export check that stops a build whose trace does not reproduce torch.
"""

from __future__ import annotations

import pytest
import torch
from edgekit.converters import build
from edgekit.converters.pytorch.inputs import parse_input_shape
from edgekit.converters.pytorch.onnx_export import unsupported_ops

from edgekit.cli import main as cli_main
from edgekit.errors import ExportError, UserError

from ..conftest import DIGITS_NPZ
from .torch_nets import Bessel, Branchy, TinyNet, forget, tiny, write_project

PACKAGE = "edgekit_export_nets"
FAST = {"target": "host", "formats": ["onnx"], "method": "minmax", "calib_samples": 16,
        "val_samples": 32, "quiet": True}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user project in the cwd: PACKAGE/models.py with TinyNet and factories."""
    models = write_project(tmp_path, PACKAGE)
    monkeypatch.chdir(tmp_path)
    forget(PACKAGE)
    yield models
    forget(PACKAGE)


def _build(source, tmp_path, **options):
    return build(source, calib=str(DIGITS_NPZ), output=tmp_path / "out.edgekit",
                 **{**FAST, **options})


def _no_artifact(tmp_path):
    return not list(tmp_path.glob("*.edgekit")) and not list(tmp_path.glob("*.tmp"))


# --------------------------------------------------------------------------- resolving the source
def test_module_callable_that_does_not_import(tmp_path):
    with pytest.raises(ExportError, match=r"cannot import module 'no_such_pkg_x\.models'"):
        _build("no_such_pkg_x.models:make_net", tmp_path, input_shape=(1, 1, 8, 8))
    assert _no_artifact(tmp_path)


def test_name_not_in_the_module_lists_what_is(project, tmp_path):
    with pytest.raises(ExportError) as err:
        _build(f"{PACKAGE}.models:MakeNet", tmp_path, input_shape=(1, 1, 8, 8))
    message = str(err.value)
    assert "has no class or function 'MakeNet'" in message
    assert "TinyNet" in message and "make_tiny" in message  # what the module does define


def test_name_that_is_not_a_model(project, tmp_path):
    with pytest.raises(ExportError, match="names a float, not an nn.Module"):
        _build(f"{PACKAGE}.models:SCALE", tmp_path, input_shape=(1, 1, 8, 8))


def test_factory_that_needs_arguments(project, tmp_path):
    with pytest.raises(ExportError, match="make_with_args.*with no arguments failed"):
        _build(f"{PACKAGE}.models:make_with_args", tmp_path, input_shape=(1, 1, 8, 8))


def test_python_file_that_does_not_exist(tmp_path):
    with pytest.raises(ExportError, match="no such Python file"):
        _build(str(tmp_path / "net.py") + ":Net", tmp_path, input_shape=(1, 1, 8, 8))


def test_missing_model_file(tmp_path):
    with pytest.raises(ExportError, match="missing.pt: no such model file"):
        _build(str(tmp_path / "missing.pt"), tmp_path, input_shape=(1, 1, 8, 8))


def test_state_dict_given_as_the_model_points_to_weights(tmp_path):
    path = tmp_path / "net.pt"
    torch.save(tiny().state_dict(), path)
    with pytest.raises(ExportError, match="not a TorchScript archive.*--weights"):
        _build(str(path), tmp_path, input_shape=(1, 1, 8, 8))


# --------------------------------------------------------------------------- weights
def test_weights_that_do_not_match_name_the_first_keys(project, tmp_path):
    other = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.Linear(4, 2))
    weights = tmp_path / "other.pth"
    torch.save(other.state_dict(), weights)
    with pytest.raises(ExportError) as err:
        _build(f"{PACKAGE}.models:make_tiny", tmp_path, weights=str(weights),
               input_shape=(1, 1, 8, 8))
    message = str(err.value)
    assert "other.pth do not match" in message
    assert "missing from the weights: conv.weight, conv.bias, fc.weight" in message
    assert "not in the model: 0.weight, 0.bias" in message
    assert _no_artifact(tmp_path)


def test_weights_with_the_wrong_shapes(project, tmp_path):
    weights = tmp_path / "five.pth"
    torch.save(TinyNet(classes=5).state_dict(), weights)
    with pytest.raises(ExportError, match=r"shape mismatch: fc\.weight \(weights \[5, 128\] vs "
                                          r"model \[10, 128\]\), fc\.bias"):
        _build(f"{PACKAGE}.models:TinyNet", tmp_path, weights=str(weights),
               input_shape=(1, 1, 8, 8))


def test_weights_are_loaded_with_weights_only(project, tmp_path):
    pickled = tmp_path / "whole_model.pth"
    torch.save(tiny(), pickled)  # a pickled module, not a state dict: needs code to unpickle
    with pytest.raises(ExportError, match="weights_only=True"):
        _build(f"{PACKAGE}.models:TinyNet", tmp_path, weights=str(pickled),
               input_shape=(1, 1, 8, 8))


# --------------------------------------------------------------------------- input shapes
def test_missing_input_shape_for_a_module(project, tmp_path):
    with pytest.raises(ExportError, match=r"missing --input-shape: TinyNet\.forward"):
        _build(f"{PACKAGE}.models:TinyNet", tmp_path)


def test_missing_input_shape_for_torchscript(tmp_path):
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(tiny()), path)
    with pytest.raises(ExportError, match="missing --input-shape: a TorchScript module"):
        _build(str(path), tmp_path)


def test_input_shape_of_the_wrong_rank(project, tmp_path):
    with pytest.raises(ExportError, match=r"input shape 1x8x8 has rank 3; TinyNet's first layer "
                                          r"Conv2d\(in_channels=1\) takes rank 4 \[N, C, H, W\]"):
        _build(f"{PACKAGE}.models:TinyNet", tmp_path, input_shape=(1, 8, 8))


def test_input_shape_with_the_wrong_channels(tmp_path):
    with pytest.raises(ExportError, match="3 channel.*takes 1"):
        _build(tiny(), tmp_path, input_shape=(1, 3, 8, 8))


def test_input_shape_the_model_cannot_run(tmp_path):
    # right rank and channels, but the flattened features no longer fit the Linear layer
    with pytest.raises(ExportError, match=r"running TinyNet on input shape\(s\) 1x1x16x16 failed"):
        _build(tiny(), tmp_path, input_shape=(1, 1, 16, 16))


def test_fixed_batch_above_one_asks_for_dynamic_batch(tmp_path):
    with pytest.raises(ExportError, match="fixed batch must be 1 .*--dynamic-batch"):
        _build(tiny(), tmp_path, input_shape=(4, 1, 8, 8))


def test_names_must_match_the_model(tmp_path):
    with pytest.raises(ExportError, match="--input-names gave 2 name.*1 input"):
        _build(tiny(), tmp_path, input_shape=(1, 1, 8, 8), input_names=["a", "b"])


def test_cli_wrong_rank_exits_2_with_the_message(project, tmp_path, capsys):
    code = cli_main(["build", f"{PACKAGE}.models:TinyNet", "--target", "host", "--input-shape",
                     "1x8x8", "--calib", str(DIGITS_NPZ), "-o", str(tmp_path / "o.edgekit"), "-q"])
    assert code == 2
    assert "has rank 3" in capsys.readouterr().err


def test_parse_input_shape():
    assert parse_input_shape("1x3x224x224") == (1, 3, 224, 224)
    assert parse_input_shape("1x16x64, 1x16") == ((1, 16, 64), (1, 16))
    for bad in ("1x3xfoo", "1x0x8", ""):
        with pytest.raises(UserError, match="--input-shape"):
            parse_input_shape(bad)


# --------------------------------------------------------------------------- exporting
def test_model_that_fails_to_export_names_the_op(tmp_path):
    with pytest.raises(ExportError) as err:
        _build(Bessel().eval(), tmp_path, input_shape=(1, 1, 8, 8))
    message = str(err.value)
    assert "op aten::special_bessel_j0" in message
    assert "dynamo exporter failed" in message and "TorchScript exporter failed too" in message
    assert _no_artifact(tmp_path)


def test_unsupported_ops_reads_both_exporters_messages():
    dynamo = RuntimeError("No ONNX function found for <OpOverload(op='prims.erfcx', "
                          "overload='default')>")
    legacy = RuntimeError("Exporting the operator 'aten::special_erfcx' to ONNX opset 17")
    assert unsupported_ops(legacy, dynamo) == ["aten::special_erfcx", "prims.erfcx"]


def test_dynamo_failure_falls_back_to_torchscript_and_says_why(tmp_path):
    # the branch is never taken on real digits (mean < 10), so the trace is right and it builds
    result = _build(Branchy(threshold=10.0).eval(), tmp_path, input_shape=(1, 1, 8, 8))
    export = result.manifest["export"]
    assert export["exporter"] == "torchscript" and result.manifest["source"]["opset"] == 17
    assert "dynamo exporter failed" in export["fallback_reason"]
    assert "data-dependent" in export["fallback_reason"]
    assert any("TorchScript exporter" in w and "because the dynamo" in w for w in result.warnings)
    assert export["check"]["max_rel_error"] <= 1e-4


def test_export_that_does_not_reproduce_torch_stops_the_build(tmp_path):
    # traced on zeros (the else side); real digits have a mean above 0.2, so torch triples them
    model = Branchy(threshold=0.2).eval()
    with pytest.raises(ExportError) as err:
        _build(model, tmp_path, example_inputs=torch.zeros(1, 1, 8, 8))
    message = str(err.value)
    assert "does not match torch on the calibration inputs" in message
    assert "largest mismatch at output 'output'" in message and "allowed 0.0001" in message
    assert _no_artifact(tmp_path)
