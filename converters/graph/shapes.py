"""Pin a model's symbolic input dims to numbers, position by position.

An input's dims are set per axis, whatever their names: exporters do not name dims
reliably (Paddle2ONNX writes the PP-OCR angle classifier's input as ``[-1, 3, '?', '?']``,
H and W under one name), so a name is never taken for one dimension of the input.
A name that ends up with one value on every axis it names is replaced by that value through
the whole graph (onnxruntime's ``make_dim_param_fixed``), so intermediate shapes agree with
the pinned inputs; a shape that names one pinned to several values is dropped for the next
shape inference to redo. Two policies, different on purpose:

* the estimator costs one inference at some batch: every open dim is pinned, the leading
  one to ``batch`` and the others to 1 (``others=1``);
* a converter that can only size a symbolic batch (the tflite writer) pins the leading dim
  and refuses any other open dim (``others=None``), naming the input and axis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from edgekit.errors import InternalError, UnsupportedModelError


def _open(dim: Any) -> bool:
    return not dim.HasField("dim_value") or dim.dim_value <= 0


def _names_any(value_info: Any, symbols: set[str]) -> bool:
    return value_info.type.HasField("tensor_type") and any(
        d.HasField("dim_param") and d.dim_param in symbols
        for d in value_info.type.tensor_type.shape.dim)


def set_input_dims(graph: Any, shapes: Mapping[str, Sequence[int | None]]) -> None:
    """Set the named inputs of ``graph`` (in place) to these dims, axis by axis; ``None``
    (or -1) leaves an axis open (``--dynamic-batch``'s batch). A fixed dim that disagrees is
    an ``InternalError``: the callers pin open dims only."""
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed, remove_invalid_dim_values

    remove_invalid_dim_values(graph)  # Paddle's -1 dims, anywhere in the graph
    values: dict[str, set[int]] = {}
    kept_open: set[str] = set()
    found = set()
    for vi in graph.input:
        if vi.name not in shapes:
            continue
        found.add(vi.name)
        want = list(shapes[vi.name])
        dims = vi.type.tensor_type.shape.dim
        if len(dims) != len(want):
            raise InternalError(f"input {vi.name!r} has rank {len(dims)}; asked to pin it "
                                f"to {want}")
        for axis, (dim, value) in enumerate(zip(dims, want, strict=True)):
            if value is None or value < 0:
                if dim.HasField("dim_param"):
                    kept_open.add(dim.dim_param)
                continue
            if not _open(dim):
                if dim.dim_value != value:
                    raise InternalError(f"input {vi.name!r} axis {axis} is fixed at "
                                        f"{dim.dim_value}; asked to pin it to {value}")
                continue
            if dim.HasField("dim_param"):
                values.setdefault(dim.dim_param, set()).add(int(value))
            dim.Clear()
            dim.dim_value = int(value)
    missing = sorted(set(shapes) - found)
    if missing:
        raise InternalError(f"no graph input named {missing}; inputs: "
                            f"{[vi.name for vi in graph.input]}")
    ambiguous = {s for s, v in values.items() if len(v) > 1 or s in kept_open}
    for symbol, value in values.items():
        if symbol not in ambiguous:
            make_dim_param_fixed(graph, symbol, next(iter(value)))
    if ambiguous:
        stale = [vi for vi in graph.value_info if _names_any(vi, ambiguous)]
        for vi in stale:
            graph.value_info.remove(vi)
        for out in graph.output:  # an output keeps its rank: the checker wants a shape
            for dim in out.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in ambiguous:
                    dim.Clear()


def fixed_input_shapes(model: Any, batch: int, others: int | None = 1,
                       who: str = "this converter") -> Any:
    """A copy of ``model`` (an ``onnx.ModelProto``) with its symbolic input dims pinned.

    ``others`` is the value for open dims past axis 0; None makes them an
    ``UnsupportedModelError`` (``who`` names the converter in that message)."""
    import onnx

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    initializers = {i.name for i in fixed.graph.initializer}
    shapes: dict[str, list[int]] = {}
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
        shapes[vi.name] = shape
    set_input_dims(fixed.graph, shapes)
    return fixed


def pin_inputs(model: Any, shapes: Mapping[str, Sequence[int]]) -> Any:
    """A copy of ``model`` with the named inputs set to these shapes (-1 keeps an axis
    open: ``--dynamic-batch``'s batch); stale intermediate shapes are dropped so the next
    shape inference starts from the pinned inputs."""
    import onnx

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    set_input_dims(fixed.graph, shapes)
    del fixed.graph.value_info[:]
    for out in fixed.graph.output:  # open dims unknown, the rank kept (the checker wants it)
        for dim in out.type.tensor_type.shape.dim:
            if _open(dim):
                dim.Clear()
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


def batch_freed(model: Any, axes: Mapping[str, int], inputs: Iterable[str], symbol: str,
                outputs: bool = False) -> Any:
    """A copy of ``model`` whose named ``inputs`` take any sample count on their batch axis
    (``axes``, 0 when not named), as dim ``symbol``; value_info dropped (it would pin the old
    shapes); ``outputs``: every output dim symbolic too. For running a batch-1 export on many
    samples at once (bias correction) or seeing which output axis grows (core/output_axes.py)."""
    import onnx

    free = onnx.ModelProto()
    free.CopyFrom(model)
    del free.graph.value_info[:]
    names = set(inputs)
    for vi in free.graph.input:
        dims = vi.type.tensor_type.shape.dim
        axis = axes.get(vi.name, 0)
        if vi.name in names and len(dims) > axis:
            dims[axis].Clear()
            dims[axis].dim_param = symbol
    if outputs:
        for vi in free.graph.output:
            for dim in vi.type.tensor_type.shape.dim:
                dim.Clear()
    return free
