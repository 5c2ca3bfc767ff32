"""``runner.run_dataset`` keeps outputs by content: a rewritten model file runs anew, and a
caller changing the outputs it got does not change what the next caller gets."""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.context import Dataset
from edgekit.converters.core.runner import run_dataset
from onnx import TensorProto, helper, numpy_helper


def scale_model(factor: float) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])], "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(np.array(factor, np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_a_rewritten_file_runs_again(tmp_path):
    path = tmp_path / "m.onnx"
    data = Dataset({"x": np.ones((3, 4), np.float32)})
    path.write_bytes(scale_model(2.0))
    assert run_dataset(path, data)[0][0, 0] == 2.0
    path.write_bytes(scale_model(3.0))  # same path, same size, new content
    assert run_dataset(path, data)[0][0, 0] == 3.0
    other = Dataset({"x": np.full((3, 4), 2.0, np.float32)})
    assert run_dataset(path, other)[0][0, 0] == 6.0


def test_callers_get_their_own_copies(tmp_path):
    model = scale_model(5.0)
    data = Dataset({"x": np.ones((2, 4), np.float32)})
    first = run_dataset(model, data)
    first[0][:] = -1.0
    assert np.all(run_dataset(model, data)[0] == 5.0)
    assert onnx.load_model_from_string(model).graph.node[0].op_type == "Mul"


def test_views_of_the_same_samples_are_hashed_once(monkeypatch):
    """A build looks its passes up through views of one set of samples (``take(slice)``): the
    digest is computed once for that memory, and it is the digest of the content."""
    import hashlib

    from edgekit.converters.core import runner

    hashed = []
    sha256 = hashlib.sha256

    def counting(*args):
        hashed.append(1)
        return sha256(*args)

    data = Dataset({"x": np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)})
    first = runner.data_digest(data)
    monkeypatch.setattr(runner.hashlib, "sha256", counting)
    assert runner.data_digest(data.take(slice(0, 6))) == first
    assert runner.data_digest(data.take(slice(0, 6))) == first
    assert not hashed
    assert runner.data_digest(data.take(slice(0, 5))) != first  # other samples: hashed anew
    assert hashed


def test_new_samples_in_freed_memory_get_their_own_digest():
    """Samples loaded where freed ones lay (numpy reuses the memory of an array of the same
    size) are hashed anew: the digest ends with the array owning the memory."""
    import gc

    from edgekit.converters.core import runner

    digests, addresses = set(), set()
    for value in range(6):
        data = Dataset({"x": np.full((64, 1024), float(value), np.float32)})
        addresses.add(data.arrays["x"].__array_interface__["data"][0])
        digests.add(runner.data_digest(data))
        del data
        gc.collect()
    assert len(digests) == 6
    assert len(addresses) < 6  # the memory was reused: the case this guards
