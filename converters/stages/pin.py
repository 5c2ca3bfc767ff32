"""Pin: give every model input fixed numbers, and freeze the inputs the user made constant.

Models exported with dynamic axes (H/W of a detector, the width of a text line) leave
dims symbolic; the .tflite writer and the estimator need numbers. The numbers come from
``--input-shape NAME=DIMS`` when given, else from the calibration data (whose arrays must
agree with each other and with the validation data on every symbolic dim). The batch is
pinned to 1 unless ``--dynamic-batch`` keeps it open. ``--const NAME=VALUE`` replaces an
input by a constant before anything else, so ``If`` branches and shapes built on it fold.

The folding itself is onnxruntime's graph optimizer at the basic level, run by the
``prepare`` stage right after this one (``quant_pre_process`` saves the optimized model):
once the inputs are fixed, Shape/Range/Expand/ConstantOfShape chains become constants.
The pinned shapes go into the manifest's ``inputs[]``, so ``predict`` with another shape
is an ``InputError`` naming the pinned one.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from edgekit.converters.graph.io_spec import named_shapes

from edgekit.errors import CalibrationError, UserError

from ..context import BuildContext, Dataset
from ..pipeline import Stage

NUMPY_TYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64,
               "int64": np.int64, "int32": np.int32, "int8": np.int8, "uint8": np.uint8,
               "bool": np.bool_}


def const_value(spec: dict[str, Any], value: Any) -> np.ndarray:
    """The array a ``--const`` freezes input ``spec`` to: ``value`` broadcast to its shape
    (symbolic dims as 1), in its element type."""
    dtype = NUMPY_TYPES.get(spec.get("dtype", "float32"), np.float32)
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec["shape"]]
    try:
        array = np.asarray(value, dtype=dtype)
        if array.size == 1:
            return np.full(shape, array.reshape(()), dtype=dtype)
        return np.ascontiguousarray(array.reshape(shape))
    except ValueError as exc:
        raise UserError(f"--const {spec['name']}={value!r}: cannot make a {spec['dtype']} "
                        f"array of shape {spec['shape']} from it ({exc})") from exc


def data_shape(spec: dict[str, Any], data: Dataset) -> tuple[int, ...]:
    """The model-input shape one sample of ``data`` has (batch axis set to 1)."""
    axis = spec.get("batch_axis", 0)
    rest = list(data.arrays[spec["name"]].shape[1:])
    rest.insert(axis, 1)
    return tuple(rest)


def shapes_from_data(inputs: list[dict[str, Any]], datasets: list[Dataset],
                     dynamic_batch: bool) -> dict[str, tuple[int, ...]]:
    """Each input with a symbolic dim pinned to what the data shows, axis by axis. Every
    dataset must agree, and one symbol (e.g. 'height') must get one value across inputs."""
    pinned: dict[str, tuple[int, ...]] = {}
    symbols: dict[str, tuple[int, str]] = {}
    for spec in inputs:
        if all(isinstance(d, int) and d > 0 for d in spec["shape"]):
            continue
        seen = {data.source or "data": data_shape(spec, data) for data in datasets
                if spec["name"] in data.arrays}
        if len(set(seen.values())) > 1:
            raise CalibrationError(
                f"input {spec['name']!r} {spec['shape']} has symbolic dims, and the data "
                "disagrees on them: " + "; ".join(f"{src} gives {list(s)}" for src, s in
                                                  seen.items())
                + ": pass --input-shape NAME=DIMS, or data of one shape")
        shape = list(next(iter(seen.values())))
        batch_axis = spec.get("batch_axis", 0)
        for axis, want in enumerate(spec["shape"]):
            if isinstance(want, int) and want > 0:
                continue
            if axis == batch_axis:
                shape[axis] = -1 if dynamic_batch else 1
                continue
            key = str(want)
            # within one input a shared name binds nothing (Paddle names H and W alike);
            # across inputs it is the model's statement that two dims agree
            if key not in ("?", "") and key in symbols and symbols[key][0] != shape[axis] \
                    and symbols[key][1] != spec["name"]:
                raise CalibrationError(
                    f"symbolic dim {key!r} is {symbols[key][0]} in the data for input "
                    f"{symbols[key][1]!r} but {shape[axis]} for input {spec['name']!r}")
            symbols.setdefault(key, (shape[axis], spec["name"]))
        pinned[spec["name"]] = tuple(shape)
    return pinned


def _pinned_output_shapes(model: Any, outputs: list[dict[str, Any]]) -> None:
    """Outputs whose shape onnx's inference fixes once the inputs are pinned get it."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - the shapes stay as exported; nothing depends on them
        return
    for vi in inferred.graph.output:
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in
                vi.type.tensor_type.shape.dim]
        spec = next((o for o in outputs if o["name"] == vi.name), None)
        if spec is not None and dims and all(d > 0 for d in dims) and len(dims) == len(
                spec["shape"]):
            spec["shape"] = dims


class PinShapes(Stage):
    name = "pin"
    requires = frozenset({"calib", "float_model", "float_path", "inputs", "outputs", "val"})
    provides = frozenset({"float_model", "float_path", "inputs", "outputs"})

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, Any] = {}

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.used

    def run(self, ctx: BuildContext) -> None:
        import onnx
        from edgekit.converters.graph.fold_branches import fold_constant_branches
        from edgekit.converters.graph.shapes import freeze_inputs, pin_inputs

        config = ctx.config
        model = ctx.float_model
        consts = dict(config.consts or {})
        # (unknown names in --const were refused by the data stage, before reading data)
        if consts:
            frozen = {i["name"]: const_value(i, consts[i["name"]]) for i in ctx.inputs
                      if i["name"] in consts}
            model = freeze_inputs(model, frozen)
            ctx.inputs = [i for i in ctx.inputs if i["name"] not in consts]
            if not ctx.inputs:
                raise UserError(f"--const froze every input ({sorted(consts)}); the model "
                                "needs at least one input left")
        asked = named_shapes(config.input_shape, ctx.inputs) if ctx.source_info.get(
            "format") == "onnx" else {}
        pinned = shapes_from_data([i for i in ctx.inputs if i["name"] not in asked],
                                  [ctx.calib, ctx.val], config.dynamic_batch)
        pinned.update(asked)
        # (the data stage read the data at the --input-shape sizes: they agree)
        if pinned:  # -1: the batch --dynamic-batch keeps open
            model = pin_inputs(model, pinned)
        if not consts and not pinned:
            self.used = {"pinned": {}}
            self._measure_outputs(ctx, model)
            return
        model, branches = fold_constant_branches(model)  # before onnxruntime's optimizer
        for spec in ctx.inputs:
            if spec["name"] in pinned:
                spec["shape"] = [old if d == -1 else d  # -1: the batch --dynamic-batch keeps
                                 for d, old in zip(pinned[spec["name"]], spec["shape"],
                                                   strict=True)]
        _pinned_output_shapes(model, ctx.outputs)
        self._measure_outputs(ctx, model)
        ctx.float_model = model
        ctx.float_path = ctx.workdir / "pinned.onnx"
        onnx.save_model(model, str(ctx.float_path))
        os.chmod(ctx.float_path, 0o600)
        self.used = {"pinned": {n: list(s) for n, s in pinned.items()},
                     "from": "--input-shape" if asked else "calibration data",
                     "consts": {k: np.asarray(v).tolist() for k, v in consts.items()},
                     **({"folded_branches": branches} if branches else {}),
                     **self.used}
        ctx.report("  pinned " + ", ".join(f"{n} {list(s)}" for n, s in pinned.items())
                   + (f"; frozen {', '.join(sorted(consts))}" if consts else ""))

    def _measure_outputs(self, ctx: BuildContext, model: Any) -> None:
        """Every output's real shape and samples' axis (``converters/core/output_axes.py``), for
        every later join of per-run outputs: on the datasets and in the manifest."""
        from edgekit.converters.core.output_axes import measure_outputs

        axes = measure_outputs(model, ctx.inputs, ctx.outputs, ctx.val or ctx.calib)
        for data in (ctx.calib, ctx.val):
            if data is not None:
                data.out_axes = dict(axes)
        if axes:
            self.used["output_batch_axes"] = axes
