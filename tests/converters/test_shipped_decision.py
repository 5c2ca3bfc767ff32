"""The accuracy decision judges the format that ships (issue 31): a build shipping a .tflite is
scored on that .tflite run by LiteRT, a build shipping ONNX on the ONNX int8 graph; the .tflite
in the artifact is the very one judged. Real digits CNN, real LiteRT and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from edgekit.converters import build
from edgekit.converters.core.runner import compare

import edgekit
from edgekit.artifact.archive import read_artifact

from ..conftest import DIGITS_NPZ, DIGITS_ONNX

VAL = 48


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, np.ndarray]:
    folder = tmp_path_factory.mktemp("shipped-data")
    with np.load(DIGITS_NPZ) as npz:
        x = npz["x"]
    calib, val = folder / "calib.npz", folder / "val.npz"
    np.savez(calib, x=x[:64])
    np.savez(val, x=x[-VAL:])  # unlabelled: the decision is agreement with float
    return str(calib), str(val), x[-VAL:]


def _outputs(artifact, backend: str, x: np.ndarray) -> np.ndarray:
    with edgekit.load(artifact, backend=backend, threads=1) as model:
        return np.concatenate([np.asarray(model.predict(x[i:i + 1])) for i in range(len(x))])


def test_a_tflite_build_is_judged_on_its_tflite(tmp_path, data) -> None:
    """The manifest's validation figures are those of the shipped .tflite on LiteRT, not of the
    QDQ graph on onnxruntime (they differ in the last digits: rounding of another kernel)."""
    calib, val, x = data
    out = tmp_path / "digits.edgekit"
    build(str(DIGITS_ONNX), target="rpi4", calib=calib, val=val, output=out, quiet=True, formats=["tflite"])
    manifest = read_artifact(out).manifest
    validation = manifest["validation"]
    assert validation["samples"] == VAL
    assert validation["accuracy_budget"]["format"] == "tflite" and "LiteRT" in validation["accuracy_budget"]["line"]
    assert validation["metric"]["format"] == "tflite"
    reference = ort.InferenceSession(str(DIGITS_ONNX), providers=["CPUExecutionProvider"])
    want = reference.run(None, {reference.get_inputs()[0].name: x})[0]
    shipped = _outputs(out, "litert", x)
    assert validation["cosine"] == pytest.approx(compare(want, shipped)["cosine"], abs=1e-9)
    # the reference PTQ is judged the same way
    assert validation["reference_ptq"].get("format") == "tflite"


def test_an_onnx_build_is_judged_on_its_onnx(tmp_path, data) -> None:
    calib, val, x = data
    out = tmp_path / "digits-onnx.edgekit"
    build(str(DIGITS_ONNX), target="rpi4", calib=calib, val=val, output=out, quiet=True, formats=["onnx"])
    validation = read_artifact(out).manifest["validation"]
    assert validation["accuracy_budget"]["format"] == "onnx"
    assert "onnxruntime" in validation["accuracy_budget"]["line"]


def test_the_reference_is_compared_in_the_format_the_artifact_was_judged_in() -> None:
    """An artifact that fell back to ONNX (its .tflite could not be written) is compared with the
    reference PTQ's ONNX figures, not with the reference's .tflite ones."""
    from types import SimpleNamespace

    from edgekit.converters.metrics.evidence import PerSample
    from edgekit.converters.stages.validate import reference_in

    as_tflite, as_onnx = PerSample.decisions(np.ones(4)), PerSample.decisions(np.zeros(4))
    ctx = SimpleNamespace(evidence={"reference": as_tflite, "reference_format": "tflite",
                                    "reference_onnx": as_onnx})
    assert reference_in(ctx, "tflite") is as_tflite
    assert reference_in(ctx, "onnx") is as_onnx
