"""Pin a model's symbolic input dims to numbers, with onnxruntime's own tool.

``onnxruntime.tools.onnx_model_utils.make_input_shape_fixed`` sets an input's shape and
replaces a named dim (``"batch"``) everywhere in the graph, so intermediate shapes agree
with the pinned inputs. Two policies, different on purpose:

* the estimator costs one inference at some batch: every open dim is pinned, the leading
  one to ``batch`` and the others to 1 (``others=1``);
* a converter that can only size a symbolic batch (the tflite writer) pins the leading dim
  and refuses any other open dim (``others=None``), naming the input and axis.
"""

from __future__ import annotations

from typing import Any

from edgekit.errors import UnsupportedModelError


def _open(dim: Any) -> bool:
    return not dim.HasField("dim_value") or dim.dim_value <= 0


def fixed_input_shapes(model: Any, batch: int, others: int | None = 1,
                       who: str = "this converter") -> Any:
    """A copy of ``model`` (an ``onnx.ModelProto``) with its symbolic input dims pinned.

    ``others`` is the value for open dims past axis 0; None makes them an
    ``UnsupportedModelError`` (``who`` names the converter in that message)."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    initializers = {i.name for i in fixed.graph.initializer}
    for vi in fixed.graph.input:
        if vi.name in initializers or not vi.type.HasField("tensor_type"):
            continue
        dims = list(vi.type.tensor_type.shape.dim)
        if not any(_open(d) for d in dims):
            continue
        shape = []
        for axis, dim in enumerate(dims):
            if not _open(dim):
                shape.append(int(dim.dim_value))
            elif axis == 0:
                shape.append(batch)
            elif others is None:
                raise UnsupportedModelError(
                    f"input {vi.name!r} axis {axis} is symbolic ({dim.dim_param!r}); "
                    f"{who} supports a symbolic batch (axis 0) only")
            else:
                shape.append(others)
        make_input_shape_fixed(fixed.graph, vi.name, shape)
    return fixed


def pin_inputs(model: Any, shapes: dict[str, tuple[int, ...]]) -> Any:
    """A copy of ``model`` with the named inputs set to these exact shapes (every dim a
    number), through onnxruntime's ``make_input_shape_fixed``; stale intermediate shapes
    are dropped so the next shape inference starts from the pinned inputs."""
    import onnx
    from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for name, shape in shapes.items():
        make_input_shape_fixed(fixed.graph, name, list(shape))
    del fixed.graph.value_info[:]
    for out in fixed.graph.output:
        if any(_open(d) for d in out.type.tensor_type.shape.dim):
            out.type.tensor_type.ClearField("shape")
    return fixed


def freeze_inputs(model: Any, values: dict[str, Any]) -> Any:
    """A copy of ``model`` where each named input is a constant (an initializer holding the
    numpy array given): branches and shapes that depend on it can then be folded."""
    import onnx
    from onnx import numpy_helper

    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    keep = [vi for vi in frozen.graph.input if vi.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    for name, array in values.items():
        frozen.graph.initializer.append(numpy_helper.from_array(array, name))
    return frozen


def folded(model: Any, folder: Any) -> Any:
    """``model`` after onnxruntime's basic graph optimizations (constant folding, dead
    code), saved by onnxruntime itself: with the inputs pinned, shape subgraphs
    (Shape/Range/Expand/ConstantOfShape) become constants. QDQ weights keep their
    DequantizeLinear nodes. ``folder`` holds the two files (the build's temp folder)."""
    from pathlib import Path

    import onnx
    import onnxruntime as ort

    src, dst = Path(folder) / "to-fold.onnx", Path(folder) / "folded.onnx"
    onnx.save_model(model, str(src))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(dst)
    options.log_severity_level = 3
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return onnx.load(str(dst))


def has_open_inputs(model: Any) -> bool:
    initializers = {i.name for i in model.graph.initializer}
    return any(_open(d) for vi in model.graph.input if vi.name not in initializers
               for d in vi.type.tensor_type.shape.dim)
