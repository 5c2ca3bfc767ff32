"""Small real ONNX models packed as ``.edgekit`` artifacts, for the runtime tests.

Random weights (fixed seed): these tests check batching, tuning and power logic, not accuracy.
The manifests follow ``edgekit/artifact/archive.py``'s schema with the real rpi4 (or host) profile.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from edgekit.targets import load_profile

from edgekit.artifact.archive import TEST_VECTORS, encode_test_vectors, write_artifact


def _onnx_model(nodes: list, inputs: list, outputs: list, inits: list) -> bytes:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def mlp_onnx(features: int = 16, hidden: int = 32, classes: int = 10, batch: int | str = "N",
             poison_gather: bool = False, seed: int = 0) -> bytes:
    """x[batch, features] -> softmax(relu(x W1 + b1) W2 + b2).

    ``poison_gather`` adds ``+ table[int(x[:, 0])]``: a request whose first feature is outside
    0..9 makes onnxruntime raise (Gather index out of bounds), a real backend error.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 0.3, (features, hidden)).astype(np.float32)
    b1 = rng.normal(0, 0.1, hidden).astype(np.float32)
    w2 = rng.normal(0, 0.3, (hidden, classes)).astype(np.float32)
    b2 = rng.normal(0, 0.1, classes).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"),
                                                         (b2, "b2"))]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["l0"]),
        helper.make_node("Add", ["l0", "b2"], ["logits"]),
    ]
    last = "logits"
    if poison_gather:
        table = rng.normal(0, 1, (10, classes)).astype(np.float32)
        inits += [numpy_helper.from_array(table, "table"),
                  numpy_helper.from_array(np.array([0], np.int64), "zero"),
                  numpy_helper.from_array(np.array([1], np.int64), "one")]
        nodes += [
            helper.make_node("Slice", ["x", "zero", "one", "one"], ["col0"]),  # x[:, 0:1]
            helper.make_node("Cast", ["col0"], ["idx2"], to=TensorProto.INT64),
            helper.make_node("Squeeze", ["idx2", "one"], ["idx"]),
            helper.make_node("Gather", ["table", "idx"], ["bias"], axis=0),
            helper.make_node("Add", ["logits", "bias"], ["logits2"]),
        ]
        last = "logits2"
    nodes.append(helper.make_node("Softmax", [last], ["probs"], axis=-1))
    return _onnx_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, features])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, classes])],
        inits,
    )


def conv_onnx(size: int = 32, channels: int = 32, classes: int = 10, in_channels: int = 1,
              batch: int | str = "N", seed: int = 0) -> bytes:
    """x[batch, in_channels, size, size] -> two 3x3 conv + relu, global average pool, gemm."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    c1 = rng.normal(0, 0.2, (channels, in_channels, 3, 3)).astype(np.float32)
    c2 = rng.normal(0, 0.05, (channels, channels, 3, 3)).astype(np.float32)
    fc = rng.normal(0, 0.2, (channels, classes)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((c1, "c1"), (c2, "c2"), (fc, "fc"))]
    nodes = [
        helper.make_node("Conv", ["x", "c1"], ["a1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("Conv", ["r1", "c2"], ["a2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    return _onnx_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, in_channels, size, size])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, classes])],
        inits,
    )


def minimal_manifest(target: str = "rpi4", inputs: list[dict] | None = None,
                     outputs: list[dict] | None = None, model_bytes: int = 0) -> dict:
    """A manifest that passes ``Manifest.from_dict`` (one onnx model in ``model.onnx``)."""
    profile = load_profile(target)
    return {
        "edgekit_version": "0.1.0", "created": "2025-01-01T00:00:00+00:00",
        "target": {"name": profile.name, "sha256": profile.sha256, "profile": profile.to_dict()},
        "source": {"name": "test", "format": "onnx", "sha256": "", "bytes": model_bytes},
        "stages": [], "quantization": {},
        "inputs": inputs if inputs is not None else [{"name": "x", "shape": [1, 4],
                                                      "dtype": "float32"}],
        "outputs": outputs if outputs is not None else [{"name": "y", "shape": [1, 2],
                                                         "dtype": "float32"}],
        "models": [{"format": "onnx", "path": "model.onnx", "runtime": "onnxruntime",
                    "bytes": model_bytes}],
        "validation": {},
    }


def write_model_artifact(path: str | Path, model: bytes, input_shape: list, classes: int = 10,
                         target: str = "rpi4", preprocess: dict | None = None,
                         vectors: np.ndarray | None = None, labels: list[str] | None = None
                         ) -> Path:
    """Pack a float ONNX model with a hand-written manifest (schema of edgekit/artifact/archive.py)."""
    batch = input_shape[0]
    inp = {"name": "x", "shape": list(input_shape), "dtype": "float32",
           "layout": "NCHW" if len(input_shape) == 4 else ""}
    if preprocess:
        inp["preprocess"] = preprocess
    out = {"name": "probs", "shape": [batch, classes], "dtype": "float32", "kind": "classifier"}
    if labels:
        out["labels"] = labels
    members = {"model.onnx": model}
    manifest = minimal_manifest(target, inputs=[inp], outputs=[out], model_bytes=len(model))
    if vectors is not None:
        members[TEST_VECTORS] = encode_test_vectors({"in/x": vectors.astype(np.float32)})
        manifest["test_vectors"] = {"path": TEST_VECTORS, "count": len(vectors), "tolerance": 0}
    write_artifact(path, manifest, members)
    return Path(path)


def set_in(data: dict, path: tuple, value: object) -> None:
    """Set (or, with None, delete) one value deep inside a manifest: a test's corruption."""
    *parents, last = path
    for key in parents:
        data = data[key]
    if value is None:
        del data[last]
    else:
        data[last] = value
