"""The LiteRT input path: quantizing into the interpreter's buffer gives exactly the codes of
the old numpy chain (so test vectors and validation figures do not move), and a uint8 NHWC
camera frame goes in through a table lookup with the same result as normalize + predict."""

from __future__ import annotations

import numpy as np
import pytest

import edgekit
from edgekit.backends.tflite_io import InputPlan, dequantize
from edgekit.runtime.preprocess import default_spec, normalize


def reference_quantize(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """The input path as it was before: transpose, divide, round, add, clip, cast."""
    q = np.rint(x.transpose(0, 2, 3, 1).astype(np.float32) / np.float32(scale)) + zp
    return np.clip(q, -128, 127).astype(np.int8)


@pytest.mark.parametrize(("scale", "zp"), [(1 / 255, -128), (0.0173, 3), (0.5, 0)])
def test_fused_write_matches_the_old_chain_bit_for_bit(scale: float, zp: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0.0, 2.0, (1, 3, 9, 7)).astype(np.float32)
    x.flat[:40] = (np.arange(40) - 20) * np.float32(scale) * 0.5  # exact .5 ties: half-even
    plan = InputPlan(index=0, dtype=np.dtype(np.int8), shape=(1, 9, 7, 3), perm=(0, 2, 3, 1),
                     scale=scale, zero_point=zp)
    target = np.empty((1, 9, 7, 3), np.int8)
    plan.write(x, target)
    np.testing.assert_array_equal(target, reference_quantize(x, scale, zp))
    codes = np.arange(-128, 128, dtype=np.int8)
    old = ((codes.astype(np.int32) - zp) * np.float32(scale)).astype(np.float32)
    np.testing.assert_array_equal(dequantize(codes, scale, zp), old)


@pytest.mark.parametrize(("dtype", "zp", "perm", "channels"), [
    (np.int8, -7, (0, 1, 2, 3), 3),  # an odd zero point, laid out already (identity)
    (np.int8, 0, (0, 2, 3, 1), 1),  # one channel: NCHW and NHWC hold the same bytes
    (np.uint8, 128, (0, 2, 3, 1), 3),  # uint8 codes
    (np.uint8, 77, (0, 1, 2, 3), 2),
])
def test_every_write_path_gives_the_reference_codes(dtype: type, zp: int,
                                                    perm: tuple[int, ...], channels: int) -> None:
    """The rounding add (tflite_io._MAGIC) on every path, with ties, saturation and huge
    values: exactly clip(rint(x / scale) + zp)."""
    scale = 0.0173
    x = np.random.default_rng(1).normal(0.0, 2.0, (2, channels, 5, 6)).astype(np.float32)
    x.flat[:30] = (np.arange(30) - 15) * np.float32(scale) * 0.5
    x.flat[30:34] = [1e30, -1e30, 127.5 * scale, -128.5 * scale]
    shape = tuple(x.shape[i] for i in perm)
    plan = InputPlan(index=0, dtype=np.dtype(dtype), shape=shape, perm=perm, scale=scale,
                     zero_point=zp)
    info = np.iinfo(dtype)
    want = np.clip(np.rint(x / np.float32(scale)) + zp, info.min, info.max).astype(dtype)
    np.testing.assert_array_equal(plan.quantize(x), want.transpose(perm))


def test_uint8_frame_equals_normalize_then_predict(digits_artifact) -> None:
    with edgekit.load(digits_artifact, backend="litert", threads=1) as model:
        spec = default_spec(model.inputs[0].shape, "NCHW")
        assert model.backend.pixel_input(spec)
        frames = np.random.default_rng(1).integers(0, 256, (5, 8, 8, 1), dtype=np.uint8)
        for frame in frames:
            direct = model.predict(frame)
            via_float = model.predict(normalize(frame, spec))
            np.testing.assert_array_equal(direct, via_float)
            np.testing.assert_array_equal(model.predict(frame[None]), via_float)
    with edgekit.load(digits_artifact, backend="onnxruntime", threads=1) as model:
        frame = frames[0]
        np.testing.assert_array_equal(model.predict(frame), model.predict(normalize(frame, spec)))


def test_rgb_table_covers_every_channel() -> None:
    plan = InputPlan(index=0, dtype=np.dtype(np.int8), shape=(1, 4, 5, 3), perm=(0, 2, 3, 1),
                     scale=0.02, zero_point=-5)
    spec = {"layout": "NCHW", "color": "rgb", "scale": 1 / 255, "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225]}
    frame = np.random.default_rng(2).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    target = np.empty((1, 4, 5, 3), np.int8)
    plan.write_pixels(frame, plan.pixel_table(spec), target)
    np.testing.assert_array_equal(target, reference_quantize(normalize(frame, spec), 0.02, -5))


def test_unfused_onnx_with_folded_weights_is_bit_identical(digits_artifact, digits_data,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact (unfused) ORT path dequantizes weights once at load: same outputs as the
    plain unfused graph, which re-dequantizes them every run. That path is taken only where
    fused int8 kernels saturate (x86 without VNNI): the detector says so for the test, so it
    runs on any CPU; elsewhere the backend runs fused (tests/edgekit/backends/test_ort_float_layers.py)."""
    import onnxruntime as ort

    from edgekit.artifact.archive import read_artifact
    from edgekit.backends import BackendOptions

    artifact = read_artifact(digits_artifact)
    entry = next(m for m in artifact.spec.models if m.format == "onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    plain = ort.InferenceSession(artifact.read(entry.path), so,
                                 providers=["CPUExecutionProvider"])
    x = digits_data[0][:32]
    with edgekit.load(digits_artifact, backend="onnxruntime", threads=1) as model:
        monkeypatch.setattr("edgekit.device.cpu.u8s8_saturates", lambda: True)
        backend = model.make_backend(BackendOptions(threads=1, extra={"exact_int8": True}))
        assert backend.unfused
        name = model.inputs[0].name
        for row in x[:, None]:  # the build pins batch 1
            np.testing.assert_array_equal(backend.run({name: row})[0],
                                          plain.run(None, {name: row})[0])
        backend.close()
