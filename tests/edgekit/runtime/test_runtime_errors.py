"""Runtime failures are typed and alike on every backend: closed models, empty and
non-finite inputs, and a runtime's own exception (real onnxruntime and LiteRT)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.errors import InferenceError, InputError, ModelClosedError
from edgekit.model import SUM_CHECK_MAX

from ..runtime_models import mlp_onnx, write_model_artifact

BACKENDS = ["onnxruntime", "litert"]


def digits_input(rows: int = 1) -> np.ndarray:
    return np.random.default_rng(0).random((rows, 1, 8, 8), dtype=np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_predict_after_close_raises_the_same_typed_error(digits_artifact: Path, backend: str,
                                                         tmp_path: Path) -> None:
    model = edgekit.load(digits_artifact, backend=backend, power_root=str(tmp_path))
    x = digits_input()
    model.predict(x)
    model.predict(x)  # now on the fast path
    live = model.backend
    model.close()
    for _ in range(2):
        with pytest.raises(ModelClosedError, match=f"{backend} session is closed"):
            model.predict(x)
    with pytest.raises(ModelClosedError):
        live.run({"image": x})
    with pytest.raises(ModelClosedError, match="after close"):
        model.submit(x)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # allow_nonfinite
@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_rows_and_non_finite_inputs_are_refused_alike(digits_artifact: Path, backend: str,
                                                           tmp_path: Path) -> None:
    with edgekit.load(digits_artifact, backend=backend, power_root=str(tmp_path)) as model:
        with pytest.raises(InputError, match=r"at least one element, got shape \[0, 1, 8, 8\]"):
            model.predict(digits_input(0))
        for value in (np.nan, np.inf, -np.inf):
            x = digits_input()
            model.predict(x)  # the shape is known: the next call takes the fast path
            x[0, 0, 3, 4] = value
            with pytest.raises(InputError, match="1 NaN or infinite element"):
                model.predict(x)
            with pytest.raises(InputError, match="NaN or infinite"):
                model.submit(x)
            if backend == "litert":  # an NHWC image: LiteRT's write finds it (refuse_nonfinite)
                nhwc = np.ascontiguousarray(digits_input().transpose(0, 2, 3, 1))
                model.predict(nhwc)
                nhwc[0, 3, 4, 0] = value
                with pytest.raises(InputError, match="1 NaN or infinite element"):
                    model.predict(nhwc)
        big = digits_input() * np.float32(3e19)  # finite, yet its sum of squares overflows
        assert model.predict(big).shape == (1, 10)
    with edgekit.load(digits_artifact, backend=backend, allow_nonfinite=True,
                      power_root=str(tmp_path)) as model:
        x = digits_input()
        x[0, 0, 0, 0] = np.nan
        assert model.predict(x).shape == (1, 10)  # the caller asked for it


def test_the_fast_path_checks_small_and_large_inputs_for_non_finite_values(
        tmp_path: Path) -> None:
    """Up to model.SUM_CHECK_MAX floats a Python float sum, above it a dot product."""
    artifact = write_model_artifact(tmp_path / "mlp.edgekit", mlp_onnx(), ["N", 16])
    with edgekit.load(artifact, threads=1, power_root=str(tmp_path)) as model:
        for rows in (2, 9):  # 32 and 144 floats
            for value in (np.nan, np.inf, -np.inf):
                x = np.ones((rows, 16), np.float32)
                model.predict(x)  # the next call takes the fast path
                x[-1, -1] = value
                with pytest.raises(InputError, match="1 NaN or infinite element"):
                    model.predict(x)
            x[-1, -1] = 1.0
            x[-1, :2] = [np.inf, -np.inf]  # a sum of NaN
            with pytest.raises(InputError, match="2 NaN or infinite element"):
                model.predict(x)
        assert {rows * 16 <= SUM_CHECK_MAX for rows in (2, 9)} == {True, False}


def test_a_runtime_failure_is_an_inference_error_naming_runtime_and_input(
        tmp_path: Path) -> None:
    artifact = write_model_artifact(tmp_path / "mlp.edgekit", mlp_onnx(poison_gather=True),
                                    ["N", 16])
    x = np.zeros((2, 16), np.float32)
    with edgekit.load(artifact, threads=1, power_root=str(tmp_path)) as model:
        model.predict(x)
        x[1, 0] = 99.0  # Gather index out of bounds inside onnxruntime
        for _ in range(2):  # the checked path, then the fast path
            with pytest.raises(InferenceError,
                               match=r"onnxruntime failed running input x float32\[2, 16\]") as e:
                model.predict(x)
            assert e.value.__cause__ is not None and "Gather" in str(e.value.__cause__)
