"""Example inputs for a PyTorch export: from ``example_inputs``, ``--input-shape`` or the program.

Also checks them against the model before the (slow) export runs: the number of inputs against
``forward``'s parameters, the rank against the first layer, float dtypes, a fixed batch of 1, and
one real forward pass, so that a wrong shape gives a message about the shape rather than an
exporter traceback.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import ExportError, UserError

from .source import TorchSource

SEED = 0
_CONV = re.compile(r"^Conv(Transpose)?([123])d$")


@dataclass
class Traced:
    """What one forward pass on the example inputs showed."""

    args: tuple[Any, ...]  # torch tensors, one per model input
    input_names: list[str]  # forward's parameter names (or the program's)
    output_names: list[str]  # dict keys when the model returns a dict, else output / output_<i>


# --------------------------------------------------------------------------- shapes
def parse_input_shape(text: str) -> tuple[Any, ...]:
    """'1x3x224x224' -> (1, 3, 224, 224); '1x16x64,1x16' -> ((1, 16, 64), (1, 16))."""
    shapes = []
    for part in text.split(","):
        try:
            dims = tuple(int(d) for d in part.strip().lower().split("x"))
        except ValueError:
            raise UserError(
                f"--input-shape expects dims joined by 'x' such as 1x3x224x224 (several inputs "
                f"separated by commas), got {text!r}"
            ) from None
        if not dims or any(d <= 0 for d in dims):
            raise UserError(f"--input-shape dims must be positive integers, got {text!r}")
        shapes.append(dims)
    return shapes[0] if len(shapes) == 1 else tuple(shapes)


def shape_list(value: Any) -> list[tuple[int, ...]] | None:
    """``BuildConfig.input_shape`` (a string, one shape or a tuple of shapes) as a list of shapes."""
    if value is None:
        return None
    if isinstance(value, dict):  # NAME=DIMS items, in forward's order as given
        return [tuple(v) for v in value.values()]
    if isinstance(value, str):
        value = parse_input_shape(value)
    items = list(value)
    if items and all(isinstance(d, int) for d in items):
        return [tuple(items)]
    if items and all(isinstance(s, (tuple, list)) and all(isinstance(d, int) for d in s)
                     for s in items):
        return [tuple(s) for s in items]
    raise UserError(f"input_shape expects a shape such as (1, 3, 224, 224) or a tuple of shapes, "
                    f"got {value!r}")


def fmt(shape: Any) -> str:
    return "x".join(str(d) for d in shape)


# --------------------------------------------------------------------------- names
def forward_names(src: TorchSource) -> tuple[list[str], int, bool]:
    """(parameter names, how many are required, whether *args takes more) of the model's forward."""
    model = src.model
    if src.kind == "exported_program":
        names = [str(n) for n in model.graph_signature.user_inputs]
        return names, len(names), False
    if src.kind == "torchscript":
        args = [a for a in model.forward.schema.arguments[1:]]  # [0] is self
        return [a.name for a in args], sum(not a.has_default_value() for a in args), False
    params = list(inspect.signature(model.forward).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(p.default is p.empty for p in positional)
    return [p.name for p in positional], required, any(p.kind == p.VAR_POSITIONAL for p in params)


# --------------------------------------------------------------------------- example inputs
def example_inputs(src: TorchSource, given: Any, shapes: Any, dynamic_batch: bool,
                   calib: Any = None) -> Traced:
    """Tensors to trace with, checked against the model by a forward pass. ``calib`` (the
    build's calibration data) only shapes the hint when no shape is given."""
    names, required, varargs = forward_names(src)
    program_shapes = _program_shapes(src) if src.kind == "exported_program" else None
    if given is not None:
        args = _as_tensors(given)
    elif shapes is not None:
        args = _random(shape_list(shapes))
    elif program_shapes is not None and all(None not in s for s in program_shapes):
        args = _program_args(src, program_shapes)
    else:
        what = "a TorchScript module" if src.kind == "torchscript" else f"{src.label}.forward"
        raise ExportError(
            f"{src.name}: missing --input-shape: {what} does not say what shape it takes "
            f"(inputs: {', '.join(names) or '?'}); pass e.g. --input-shape "
            f"{shape_hint(calib) or '1x3x224x224'}, or example_inputs= from Python"
        )
    label = f"{src.label}.forward({', '.join(names)})"
    if len(args) < required or (len(args) > len(names) and not varargs):
        raise ExportError(
            f"{label} takes {required if required == len(names) else f'{required} to {len(names)}'} "
            f"input(s); got {len(args)} shape(s): {', '.join(fmt(a.shape) for a in args)}"
        )
    _check_dtypes(args)
    _check_batch(args, dynamic_batch)
    if program_shapes is not None:
        _check_program(src, args, program_shapes)
    outputs = _dry_run(src, args)
    names = names[:len(args)] + [f"input_{i}" for i in range(len(names), len(args))]
    return Traced(args, names, outputs)


def shape_hint(calib: Any) -> str | None:
    """``--input-shape`` as the calibration data gives it, one sample each ([540, 1, 8, 8]
    -> "1x1x8x8"): arrays, dicts of them, a .npy or a .npz (its 'y' labels left out)."""
    import numpy as np

    arrays: list[Any] = []
    if isinstance(calib, dict):
        arrays = [v for k, v in calib.items() if k != "y"]
    elif isinstance(calib, np.ndarray):
        arrays = [calib]
    elif isinstance(calib, (str, Path)) and str(calib).endswith((".npz", ".npy")) \
            and Path(calib).is_file():
        try:
            loaded = np.load(calib, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            return None  # the data stage says what is wrong with it
        if isinstance(loaded, np.ndarray):
            arrays = [loaded]
        else:
            with loaded:
                arrays = [loaded[k] for k in loaded.files if k != "y"]
    shapes = [np.shape(a)[1:] for a in arrays if np.ndim(a) >= 2]
    return ",".join("x".join(str(d) for d in (1, *s)) for s in shapes) or None


def _as_tensors(given: Any) -> tuple[Any, ...]:
    import numpy as np
    import torch

    items = list(given) if isinstance(given, (tuple, list)) else [given]
    out = []
    for item in items:
        if isinstance(item, np.ndarray):
            item = torch.from_numpy(np.ascontiguousarray(item))
        if not isinstance(item, torch.Tensor):
            raise ExportError(f"example_inputs: expected tensors or numpy arrays, got a "
                              f"{type(item).__name__}")
        out.append(item.detach().cpu())
    return tuple(out)


def _random(shapes: list[tuple[int, ...]]) -> tuple[Any, ...]:
    import torch

    gen = torch.Generator().manual_seed(SEED)
    return tuple(torch.randn(shape, generator=gen) for shape in shapes)


def _program_shapes(src: TorchSource) -> list[tuple[int | None, ...]]:
    """The program's user input shapes; None where a dim is symbolic (dynamic)."""
    users = set(src.model.graph_signature.user_inputs)
    shapes = []
    for node in src.model.graph.nodes:
        if node.op == "placeholder" and node.name in users:
            val = node.meta.get("val")
            dims = getattr(val, "shape", ())
            shapes.append(tuple(d if isinstance(d, int) else None for d in dims))
    return shapes


def _program_args(src: TorchSource, shapes: list[tuple[int | None, ...]]) -> tuple[Any, ...]:
    saved = getattr(src.model, "example_inputs", None)
    if saved and saved[0] and not saved[1]:
        return tuple(t.detach() for t in saved[0])
    return _random([tuple(int(d) for d in s) for s in shapes])


def _check_dtypes(args: tuple[Any, ...]) -> None:
    for i, arg in enumerate(args):
        if not arg.is_floating_point():
            raise ExportError(
                f"example input {i} has dtype {arg.dtype}; int8 builds take float inputs "
                "(token ids and masks: embed them inside the model, or export ONNX yourself)"
            )


def _check_batch(args: tuple[Any, ...], dynamic_batch: bool) -> None:
    ranks = [a.dim() for a in args]
    if 0 in ranks:
        raise ExportError(f"example inputs need a leading batch axis; got shapes "
                          f"{[list(a.shape) for a in args]}")
    batches = {a.shape[0] for a in args}
    if len(batches) > 1:
        raise ExportError(f"the inputs' batch sizes differ: {[list(a.shape) for a in args]}")
    batch = batches.pop()
    if batch != 1 and not dynamic_batch:
        raise ExportError(
            f"input shape {fmt(args[0].shape)}: a fixed batch must be 1 (got {batch}); pass "
            f"--dynamic-batch to build a model that takes any batch size"
        )


def _check_program(src: TorchSource, args: tuple[Any, ...],
                   shapes: list[tuple[int | None, ...]]) -> None:
    for arg, want in zip(args, shapes, strict=False):
        fits = len(want) == arg.dim() and all(w is None or w == g for w, g in zip(want, arg.shape,
                                                                                  strict=True))
        if not fits:
            shown = "x".join("?" if d is None else str(d) for d in want)
            kind = "rank" if len(want) != arg.dim() else "shape"
            raise ExportError(
                f"{src.name}: input shape {fmt(arg.shape)} has the wrong {kind}: the "
                f"ExportedProgram was exported for {shown} (rank {len(want)}); re-export it with "
                "torch.export at the shape you want, or drop --input-shape"
            )


# --------------------------------------------------------------------------- forward pass
def first_layer(model: Any) -> tuple[str, int | None, int | None, int | None] | None:
    """(description, input rank, channels at axis 1, last dim) of the first layer with weights."""
    for module in model.modules():
        own = dict(module.named_parameters(recurse=False))
        if "weight" not in own:
            continue
        kind = getattr(module, "original_name", None) or type(module).__name__
        weight = own["weight"]
        match = _CONV.match(kind)
        if match:
            groups = int(getattr(module, "groups", 1))
            channels = weight.shape[0] if match.group(1) else weight.shape[1] * groups
            return f"{kind}(in_channels={channels})", int(match.group(2)) + 2, channels, None
        if kind == "Linear":
            return f"Linear(in_features={weight.shape[1]})", None, None, int(weight.shape[1])
        return None
    return None


def _rank_problem(src: TorchSource, args: tuple[Any, ...]) -> tuple[str, bool] | None:
    """Why the (single) input shape does not fit the first layer, and whether that is certain.

    Only a failed run is explained with it: the model's own ``forward`` decides what it takes
    (an audio CNN may reshape [N, L] into the [N, 1, L, 1] its first Conv2d wants).
    """
    if src.kind == "exported_program" or len(args) != 1:
        return None
    hint = first_layer(src.model)
    if hint is None:
        return None
    desc, rank, channels, last = hint
    shape = tuple(args[0].shape)
    if rank is not None and len(shape) != rank:
        axes = {3: "N, C, L", 4: "N, C, H, W", 5: "N, C, D, H, W"}[rank]
        return (f"input shape {fmt(shape)} has rank {len(shape)}; {src.label}'s first layer "
                f"{desc} takes rank {rank} [{axes}] with C = {channels}"), True
    if channels is not None and shape[1] != channels:
        return (f"input shape {fmt(shape)} has {shape[1]} channel(s) at axis 1; {src.label}'s "
                f"first layer {desc} takes {channels}"), False
    if last is not None and shape[-1] != last:
        return (f"input shape {fmt(shape)} ends in {shape[-1]}; {src.label}'s first layer "
                f"{desc} takes a last dim of {last}"), False
    return None


def _dry_run(src: TorchSource, args: tuple[Any, ...]) -> list[str]:
    """Run the model once; return default output names. A failure names the shape problem."""
    import torch

    problem = _rank_problem(src, args)
    try:
        with torch.no_grad(), one_thread():
            out = run_model(src, args)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
        raise ExportError(
            (problem[0] + f" (running it failed: {reason})") if problem else
            f"running {src.label} on input shape(s) {', '.join(fmt(a.shape) for a in args)} "
            f"failed: {reason}"
        ) from exc
    return output_names(out)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread, then restore the caller's setting.

    These are small batch-1 reference runs, not a speed path: torch's OpenMP pool spins when the
    cores are shared with other work (the build's own onnxruntime sessions, a busy CI box), which
    made batch-1 runs here 30-80x slower on 2 threads than on one.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_model(src: TorchSource, args: tuple[Any, ...]) -> Any:
    model = src.model.module() if src.kind == "exported_program" else src.model
    return model(*args)


def flat_outputs(out: Any) -> list[Any]:
    """The output tensors in the order the exporters emit them (pytree leaves)."""
    import torch
    from torch.utils._pytree import tree_flatten

    return [leaf for leaf in tree_flatten(out)[0] if isinstance(leaf, torch.Tensor)]


def output_names(out: Any) -> list[str]:
    leaves = flat_outputs(out)
    if not leaves:
        raise ExportError(f"the model returned {type(out).__name__}; expected tensor output(s)")
    if isinstance(out, dict) and len(out) == len(leaves) and all(
            isinstance(k, str) and k.isidentifier() for k in out):
        return list(out)
    return ["output"] if len(leaves) == 1 else [f"output_{i}" for i in range(len(leaves))]
