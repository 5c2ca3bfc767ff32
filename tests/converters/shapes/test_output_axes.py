"""Outputs whose samples are not on axis 0 (a CTC recognizer's ``[T, N, C]`` logits, as
ddddocr's, declared ``[1, 'seqlen']``; silero-vad's state ``[2, N, 128]``): every join of per-run outputs uses the output's own
batch axis, measured by the build (``converters/core/output_axes.py``), and the artifact records
the real shape, so its test vectors verify. Real onnxruntime and LiteRT, no mocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from edgekit.converters import build
from edgekit.converters.context import Dataset
from edgekit.converters.core.output_axes import batch_axis
from edgekit.converters.core.runner import run_dataset, session
from onnx import TensorProto, helper

from edgekit.ops.verify import verify_artifact

FEATURES, STEPS, SYMBOLS = 8, 5, 6


def time_major(path: Path, batch: int | str) -> Path:
    """x [N, F, T] -> Transpose -> [T, N, F] -> MatMul W -> Relu -> y [T, N, C], its shape
    declared unknown (``['?', '?', '?']``, as silero-vad's state; ddddocr's wrong-rank
    ``[1, 'seqlen']`` fails onnx's checker on a graph whose shapes it can infer)."""
    w = np.random.default_rng(0).normal(0, 0.5, (FEATURES, SYMBOLS)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
         helper.make_node("MatMul", ["t", "w"], ["m"]),
         helper.make_node("Relu", ["m"], ["y"])],
        "time_major",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, FEATURES, STEPS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None, None])],
        [helper.make_tensor("w", TensorProto.FLOAT, list(w.shape), w.ravel().tolist())])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def samples(count: int) -> np.ndarray:
    return np.random.default_rng(1).uniform(-1, 1, (count, FEATURES, STEPS)).astype(np.float32)


def one_by_one(path: Path, x: np.ndarray) -> np.ndarray:
    """[N, T, C]: each sample run alone, its [T, 1, C] output read at batch index 0."""
    sess = session(str(path))
    return np.stack([sess.run(None, {"x": x[i:i + 1]})[0][:, 0] for i in range(len(x))])


def test_the_runner_joins_an_output_on_its_batch_axis_and_gives_it_samples_first(tmp_path):
    path = time_major(tmp_path / "m.onnx", "N")
    x = samples(40)  # runs of 32 and 8: joined on axis 0 they did not even concatenate
    got = run_dataset(str(path), Dataset({"x": x}, out_axes={"y": 1}))[0]
    assert got.shape == (40, STEPS, SYMBOLS)
    np.testing.assert_allclose(got, one_by_one(path, x), rtol=1e-6, atol=1e-6)


def test_the_batch_axis_is_the_one_that_grows_from_one_to_two_samples():
    assert batch_axis((5, 1, 6), (5, 2, 6), None) == 1
    assert batch_axis((4, 1, 1, 6), (4, 1, 2, 6), None) == 2  # an LSTM's Y [T, dirs, N, H]
    assert batch_axis((1, 1), (2, 1), None) == 0
    assert batch_axis((5, 1, 6), None, None) == 1  # batch fixed inside: the only size-1 axis
    assert batch_axis((1, 1), None, 1) == 1  # several: the declared batch symbol's
    assert batch_axis((1, 1), None, None) == 0


@pytest.mark.parametrize("batch", [1, "N"])
def test_an_output_batched_on_axis_1_ships_with_its_real_shape_and_verifies(tmp_path, batch):
    path = time_major(tmp_path / "m.onnx", batch)
    x = samples(48)
    np.savez(tmp_path / "calib.npz", x=x)
    result = build(str(path), target="rpi4", calib=str(tmp_path / "calib.npz"),
                   formats=["onnx", "tflite"], output=tmp_path / "m.edgekit", quiet=True)
    manifest = result.manifest
    out = manifest["outputs"][0]
    assert out["shape"] == [STEPS, 1, SYMBOLS] and out["batch_axis"] == 1
    count = manifest["test_vectors"]["count"]
    assert count > 1
    assert {m["format"] for m in manifest["models"]} == {"onnx", "tflite"}
    from edgekit.artifact.archive import read_artifact

    vectors = read_artifact(result.path).test_vectors()
    for fmt in ("onnx", "tflite"):
        stored = vectors[f"out/{fmt}/y"]
        assert stored.shape == (STEPS, count, SYMBOLS)  # vectors side by side on axis 1
        # vector i's outputs are sample i's (joined on axis 0 they were rows of time steps)
        reference = one_by_one(path, vectors["in/x"] if "in/x" in vectors else x[:count])
        step = out["quantization"]["scale"] if "quantization" in out else 0.05
        assert np.abs(np.moveaxis(stored, 1, 0) - reference).max() <= 4 * step
    report = verify_artifact(result.path)
    assert report.passed, report.lines()
    assert {f.format for f in report.formats if not f.skipped} == {"onnx", "tflite"}
