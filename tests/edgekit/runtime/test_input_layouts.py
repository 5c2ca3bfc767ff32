"""The input fast path (issue 17): NHWC float images and uint8 frames.

The LiteRT input buffer gets the same int8 codes whatever the caller's layout (NCHW through
the per-plane path, NHWC written as it is, many channels through one strided copy); predict
takes an NHWC image on both runtimes with the result of the NCHW one; ``submit`` takes a
uint8 camera frame with the result of ``predict_pixels``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.backends.tflite_io import InputPlan, dequantize, dequantize_table
from edgekit.errors import InputError


def reference(x: np.ndarray, scale: float, zp: int, dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    q = np.rint(x.transpose(0, 2, 3, 1) / np.float32(scale)) + zp
    return np.clip(q, info.min, info.max).astype(dtype)


@pytest.mark.parametrize("channels", [1, 3, 16])
@pytest.mark.parametrize(("dtype", "zp"), [(np.int8, -128), (np.uint8, 131)])
def test_every_layout_path_writes_the_same_codes(channels: int, dtype: type, zp: int) -> None:
    rng = np.random.default_rng(channels)
    scale = 0.0173
    x = rng.normal(0.0, 3.0, (2, channels, 5, 7)).astype(np.float32)
    x.flat[:30] = (np.arange(30) - 15) * np.float32(scale) * 0.5  # exact ties: half to even
    x.flat[30:32] = [1e9, -1e9]  # clipped
    plan = InputPlan(index=0, dtype=np.dtype(dtype), shape=(2, 5, 7, channels),
                     perm=(0, 2, 3, 1), scale=scale, zero_point=zp)
    want = reference(x, scale, zp, dtype)
    from_nchw = np.empty(plan.shape, dtype)
    plan.write(x, from_nchw)
    from_nhwc = np.empty(plan.shape, dtype)
    plan.write(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), from_nhwc, laid_out=True)
    from_view = np.empty(plan.shape, dtype)
    plan.write(x[:, :, ::-1, :][:, :, ::-1, :], from_view)  # a non-contiguous caller array
    for got in (from_nchw, from_nhwc, from_view):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["litert", "onnxruntime"])
def test_predict_takes_an_nhwc_image(digits_artifact: Path, backend: str) -> None:
    rng = np.random.default_rng(5)
    xs = rng.random((3, 1, 8, 8)).astype(np.float32)
    with edgekit.load(digits_artifact, backend=backend, threads=1) as model:
        nchw = model.predict(xs[:1])
        for _ in range(2):  # the checked path, then predict's fast path
            np.testing.assert_array_equal(model.predict(xs[:1].transpose(0, 2, 3, 1).copy()),
                                          nchw)
        np.testing.assert_array_equal(model.predict(xs.transpose(0, 2, 3, 1).copy()),
                                      model.predict(xs))
        assert model.submit(xs[:1].transpose(0, 2, 3, 1).copy()).result(30).shape == nchw.shape
        with pytest.raises(InputError, match=r"expected shape \[1, 1, 8, 8\]"):
            model.predict(np.zeros((1, 8, 7, 1), np.float32))  # neither layout


@pytest.mark.parametrize("backend", ["litert", "onnxruntime"])
def test_submit_takes_a_uint8_frame(digits_artifact: Path, backend: str) -> None:
    frames = (np.random.default_rng(6).random((4, 8, 8)) * 255).astype(np.uint8)
    with edgekit.load(digits_artifact, backend=backend, threads=1) as model:
        futures = [model.submit(f) for f in frames] + [model.submit(frames[0][None, :, :, None])]
        for frame, future in zip([*frames, frames[0]], futures, strict=True):
            np.testing.assert_array_equal(future.result(30), model.predict_pixels(frame))


@pytest.mark.parametrize(("dtype", "scale", "zp"), [(np.int8, 0.0039, -128), (np.uint8, 0.11, 7)])
def test_output_table_gives_the_dequantized_floats(dtype: type, scale: float, zp: int) -> None:
    codes = np.arange(256, dtype=np.uint8).view(dtype).reshape(16, 16)
    table = dequantize_table(np.dtype(dtype), scale, zp)
    np.testing.assert_array_equal(table.take(codes.view(np.uint8)), dequantize(codes, scale, zp))
    assert dequantize_table(np.dtype(np.float32), None, 0) is None
