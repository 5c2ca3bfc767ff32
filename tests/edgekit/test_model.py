"""edgekit.load / Model.predict: numpy in, numpy out, clear errors for wrong inputs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import edgekit
from edgekit.errors import InputError


@pytest.fixture(scope="module")
def model(digits_onnx_artifact):
    with edgekit.load(digits_onnx_artifact) as m:
        yield m


def test_inputs_and_outputs_describe_the_model(model):
    assert [s.name for s in model.inputs] == ["image"]
    assert model.inputs[0].shape[1:] == (1, 8, 8)
    assert model.outputs[0].shape[-1] == 10
    assert model.runtime == "onnxruntime"


def test_float64_input_is_accepted(model, digits_data):
    x, y = digits_data
    out = model.predict(x[:4].astype(np.float64))
    assert out.dtype == np.float32 and out.shape == (4, 10)
    assert (out.argmax(1) == y[:4]).all()


def test_dict_input_by_name(model, digits_data):
    x, _ = digits_data
    np.testing.assert_array_equal(model.predict({"image": x[:2]}), model.predict(x[:2]))


def test_wrong_shape_names_expected_and_got(model):
    with pytest.raises(InputError, match=r"expected shape .*8, 8.*got \[1, 1, 28, 28\]"):
        model.predict(np.zeros((1, 1, 28, 28), np.float32))


def test_wrong_rank(model):
    with pytest.raises(InputError, match="4 dims.*got.*3 dims"):
        model.predict(np.zeros((1, 8, 8), np.float32))


def test_wrong_dtype(model):
    with pytest.raises(InputError, match="expected dtype float32.*got int64"):
        model.predict(np.zeros((1, 1, 8, 8), np.int64))


def test_wrong_input_name(model):
    with pytest.raises(InputError, match="missing.*image.*unknown.*pixels"):
        model.predict({"pixels": np.zeros((1, 1, 8, 8), np.float32)})


def test_import_edgekit_stays_light(digits_onnx_artifact):
    """The on-device path never imports onnx, torch or the converters."""
    code = (
        "import sys, edgekit\n"
        f"m = edgekit.load({str(digits_onnx_artifact)!r})\n"
        "import numpy as np; m.predict(np.zeros((1, 1, 8, 8), np.float32))\n"
        "heavy = [n for n in ('onnx', 'torch', 'edgekit.converters', 'PIL') if n in sys.modules]\n"
        "print(heavy); sys.exit(1 if heavy else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
