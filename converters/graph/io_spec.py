"""What a model's inputs and outputs are (names, shapes, dtypes) and what ``--input-shape``
asks of them: read by the load/export/pin stages, the estimator and the estimate command
(a helper, so that the estimator need not import a stage)."""

from __future__ import annotations

from typing import Any

from edgekit.errors import UnsupportedModelError, UserError

FLOAT_TYPES = {1: "float32", 10: "float16", 11: "float64"}
# integer and boolean inputs (token ids, masks, sample rates) pass through unquantized
PASS_THROUGH_TYPES = {6: "int32", 7: "int64", 9: "bool"}



def tensor_shape(value_info: Any) -> list[int | str]:
    """ONNX ValueInfo shape as ints and symbol names ('?' when unnamed, or written as a
    negative number, as Paddle2ONNX writes a batch: -1)."""
    dims = []
    for dim in value_info.type.tensor_type.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(int(dim.dim_value))
        else:
            dims.append(dim.dim_param or "?")
    return dims


def refuse_scalar_outputs(model: Any, where: str) -> None:
    """A rank-0 output (``ReduceMean`` with ``keepdims=0`` over everything, ``x.mean()``) has
    no batch axis: calibration cannot stack it per sample and the runtime cannot split it per
    request, so the build refuses it before any work, naming the fix."""
    scalars = [vi.name for vi in model.graph.output
               if vi.type.tensor_type.HasField("shape") and not vi.type.tensor_type.shape.dim]
    if scalars:
        raise UnsupportedModelError(
            f"{where}: output(s) {scalars} are scalars (shape []); expected outputs with a "
            "batch axis, e.g. [1] or [N, ...]: keep the reduced axes (keepdims=1, "
            "x.mean(dim=..., keepdim=True)) or reshape the result to [1]")


def describe_io(model: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    initializers = {i.name for i in model.graph.initializer}
    inputs, outputs = [], []
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        elem = vi.type.tensor_type.elem_type
        if elem not in FLOAT_TYPES and elem not in PASS_THROUGH_TYPES:
            raise UnsupportedModelError(
                f"input {vi.name!r} has ONNX element type {elem}; builds take float inputs "
                f"({', '.join(FLOAT_TYPES.values())}) and pass "
                f"{', '.join(PASS_THROUGH_TYPES.values())} inputs through; freeze it with "
                f"--const {vi.name}=VALUE"
            )
        shape = tensor_shape(vi)
        layout = "NCHW" if len(shape) == 4 and elem in FLOAT_TYPES else ""
        dtype = PASS_THROUGH_TYPES.get(elem, "float32")
        inputs.append({"name": vi.name, "shape": shape, "dtype": dtype, "layout": layout})
    for vi in model.graph.output:
        # an integer output (a class label from ArgMax) keeps its type
        dtype = PASS_THROUGH_TYPES.get(vi.type.tensor_type.elem_type, "float32")
        outputs.append({"name": vi.name, "shape": tensor_shape(vi), "dtype": dtype})
    return inputs, outputs


def named_shapes(value: Any, inputs: list[dict[str, Any]]) -> dict[str, tuple[int, ...]]:
    """``--input-shape`` for an ONNX source: ``{name: dims}``, or one plain shape for a
    one-input model; an unknown name or a wrong rank is a ``UserError``."""
    if value is None:
        return {}
    names = [i["name"] for i in inputs]
    if not isinstance(value, dict):
        shapes = [tuple(value)] if value and all(isinstance(d, int) for d in value) else list(value)
        if len(shapes) != len(names):
            given = ", ".join("x".join(str(d) for d in shape) for shape in shapes)
            raise UserError(f"--input-shape gave {len(shapes)} shape(s) ({given}) for the model's "
                            f"{len(names)} inputs {names}: a shape's dims are joined by x and "
                            f"commas separate inputs, e.g. --input-shape {names[0]}=1x3x640x640")
        value = dict(zip(names, shapes, strict=True))
    out = {}
    for name, dims in value.items():
        spec = next((i for i in inputs if i["name"] == name), None)
        if spec is None:
            raise UserError(f"--input-shape names {name!r}; the model's inputs are {names}")
        dims = tuple(int(d) for d in dims)
        if len(dims) != len(spec["shape"]):
            raise UserError(f"--input-shape {name}={'x'.join(map(str, dims))} has rank "
                            f"{len(dims)}; input {name!r} is {spec['shape']} (rank "
                            f"{len(spec['shape'])})")
        for axis, (want, got) in enumerate(zip(spec["shape"], dims, strict=True)):
            if isinstance(want, int) and want > 0 and want != got:
                raise UserError(f"--input-shape {name}: axis {axis} of {spec['shape']} is fixed "
                                f"at {want} by the model; got {got}")
        out[name] = dims
    return out
