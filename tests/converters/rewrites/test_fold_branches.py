"""A frozen input's ``If``s are inlined before onnxruntime's optimizer sees them (silero-vad
6.2.3 with ``--const sr=16000``: onnxruntime's own inlining of its nested branches failed,
and the file its pre-processing wrote crashed onnxruntime; ``test_real_graphs`` builds it)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from edgekit.converters.graph.fold_branches import fold_constant_branches
from edgekit.converters.graph.shapes import freeze_inputs, pin_inputs

from .graphs import nested_branches


def test_branches_a_frozen_input_and_pinned_shapes_decide_are_inlined(tmp_path):
    source = nested_branches(tmp_path / "vad.onnx")
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    want = ort.InferenceSession(str(source)).run(None, {"x": x, "sr": np.array(16000)})[0]
    model = pin_inputs(freeze_inputs(onnx.load(str(source)), {"sr": np.array(16000, np.int64)}),
                       {"x": (1, 8)})
    folded, gone = fold_constant_branches(model)
    assert gone == 1 and not any(n.op_type == "If" for n in folded.graph.node)
    onnx.checker.check_model(folded, full_check=True)
    got = ort.InferenceSession(folded.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    assert any(n.op_type == "If" for n in model.graph.node)  # the model given is unchanged


def test_a_graph_without_control_flow_is_left_as_it_is(tmp_path):
    from .graphs import layernorm_tail

    model = onnx.load(str(layernorm_tail(tmp_path / "ln.onnx")))
    assert fold_constant_branches(model) == (model, 0)
