"""Legal ONNX models that break a naive batcher, packed as ``.edgekit`` artifacts.

* ``batch_mean``  y[1, 3] = mean over the batch of x[N, 3]      (rows cannot be split)
* ``batch_mix``   y[N, 3] = x - mean over the batch             (rows follow, values mix)
* ``scalar``      y[] = sum of x                                (no batch axis at all)
* ``endless``     y = 2 x after x[0, 0] iterations of a Loop    (x[0, 0] = 1e12: never ends)
"""

from __future__ import annotations

from pathlib import Path

from edgekit.artifact.archive import write_artifact
from tools.studies.resource_bombs import endless_onnx, huge_activation_tflite

from .runtime_models import _onnx_model, minimal_manifest

FEATURES = 3


def hostile_onnx(kind: str) -> tuple[bytes, list]:
    """The model's bytes and its output shape (as the manifest states it)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])
    if kind == "batch_mean":
        nodes = [helper.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)]
        shape: list = [1, FEATURES]
    elif kind == "batch_mix":
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1),
                 helper.make_node("Sub", ["x", "m"], ["y"])]
        shape = ["N", FEATURES]
    elif kind == "scalar":
        nodes = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)]
        shape = []
    elif kind == "endless":  # the resource-bomb study's graph, one builder for both
        return endless_onnx(), ["N", FEATURES]
    else:
        raise ValueError(kind)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    return _onnx_model(nodes, [x], [y], []), shape


def hostile_artifact(path: Path, kind: str) -> Path:
    model, shape = hostile_onnx(kind)
    manifest = minimal_manifest(
        "host", inputs=[{"name": "x", "shape": ["N", FEATURES], "dtype": "float32"}],
        outputs=[{"name": "y", "shape": shape, "dtype": "float32"}], model_bytes=len(model))
    write_artifact(path, manifest, {"model.onnx": model})
    return path


def huge_activation_artifact(path: Path) -> Path:
    model = huge_activation_tflite()
    manifest = minimal_manifest(
        inputs=[{"name": "x", "shape": [1, FEATURES], "dtype": "float32"}],
        outputs=[{"name": "y", "shape": [1, FEATURES], "dtype": "float32"}])
    manifest["models"] = [{"format": "tflite", "path": "model.tflite", "runtime": "litert"}]
    write_artifact(path, manifest, {"model.tflite": model})
    return path
