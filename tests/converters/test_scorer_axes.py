"""The task score pairs samples: an output batched off axis 0 (a recurrent state [L, N, H], as
silero-vad's) is left out of it rather than read as rows of samples (silero-vad's build was an
internal error: 'index 64 is out of bounds for axis 0 with size 64')."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.context import BuildConfig, Dataset
from edgekit.converters.metrics.task_accuracy import Scorer
from onnx import TensorProto, helper


def model_with_a_state_output(path: Path) -> Path:
    """x [N, 4] -> y = x @ W [N, 3] (batch on axis 0), state = Unsqueeze(x, 0) tiled to [2, N, 4]."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], np.linspace(-1, 1, 12).tolist())
    reps = helper.make_tensor("reps", TensorProto.INT64, [3], [2, 1, 1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]),
         helper.make_node("Unsqueeze", ["x", "axes"], ["x1"]),
         helper.make_node("Tile", ["x1", "reps"], ["state"])],
        "state_out",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "N", 4])],
        [w, reps, axes])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_output_batched_on_axis_1_is_left_out_of_the_score(tmp_path: Path) -> None:
    path = model_with_a_state_output(tmp_path / "m.onnx")
    val = Dataset({"x": np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)})
    scorer = Scorer(BuildConfig(source=str(path)), path, val, ["y", "state"])
    assert scorer.kept == [0] and scorer.names == ["y"]
    _metrics, score = scorer.score(path)  # the float model against itself: no loss
    assert score.drop == 0.0
    assert score.result.per_sample is None or len(score.result.per_sample) == 16
