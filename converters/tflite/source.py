"""A float .tflite source as the ONNX graph every later stage works on.

tflite2onnx (a pure-Python FlatBuffer reader; tf2onnx's ``--tflite`` path imports TensorFlow)
writes the graph in ONNX's NCHW layout and so moves a 4-D input to NCHW. The caller's
calibration data is laid out as the .tflite wants it, so each moved input and output gets a
Transpose back to the .tflite's own shape: the ONNX graph takes and gives what the .tflite
does. The conversion is then checked against LiteRT running the .tflite itself on one input.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.tflite.source_fp16 import fold_fp16_dequantize

from edgekit.errors import ModelFormatError, UnsupportedModelError, UserError

# NHWC (the .tflite's layout) -> NCHW (tflite2onnx's), and back
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)
# what the ONNX conversion may differ from LiteRT by, relative to the output's largest value
MATCH_TOLERANCE = 1e-3


def is_tflite(path: Path) -> bool:
    """The .tflite suffix, or the FlatBuffer file identifier 'TFL3' at byte 4."""
    with path.open("rb") as handle:
        head = handle.read(8)
    return path.suffix.lower() == ".tflite" or head[4:8] == b"TFL3"


def tflite_io_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Name -> shape of the .tflite's graph inputs and outputs (its first subgraph)."""
    from ai_edge_litert.interpreter import Interpreter

    try:
        interpreter = Interpreter(model_path=str(path))
    except (ValueError, RuntimeError) as exc:
        raise ModelFormatError(f"{path}: not a readable .tflite model (expected a TFLite "
                               f"FlatBuffer; the file may be truncated): {exc}") from exc
    details = interpreter.get_input_details() + interpreter.get_output_details()
    return {d["name"]: tuple(int(s) for s in d["shape"]) for d in details}


def _set_dims(value: Any, dims: tuple[int, ...]) -> None:
    value.type.tensor_type.shape.ClearField("dim")
    for d in dims:
        value.type.tensor_type.shape.dim.add().dim_value = d


def _retranspose(model: Any, shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """Give each graph input/output the .tflite's shape again where tflite2onnx moved it to
    NCHW (a Transpose at the edge, the old tensor renamed inside); returns the names so
    restored."""
    from onnx import helper

    graph, moved = model.graph, []
    edges = [(v, True) for v in graph.input] + [(v, False) for v in graph.output]
    for value, is_input in edges:
        dims = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
        want = shapes.get(value.name)
        if want is None or len(want) != 4 or dims == want:
            continue
        perm = TO_NCHW if is_input else TO_NHWC
        if (tuple(want[p] for p in perm) if is_input else tuple(dims[p] for p in perm)) != \
                (dims if is_input else want):
            continue
        name, inner = value.name, f"{value.name}__nchw"
        for node in graph.node:
            node.input[:] = [inner if i == name else i for i in node.input]
            node.output[:] = [inner if o == name else o for o in node.output]
        for info in graph.value_info:
            if info.name == name:
                info.name = inner
        edge = helper.make_node("Transpose", [name] if is_input else [inner],
                                [inner] if is_input else [name], perm=list(perm),
                                name=f"{name}__to_{'nchw' if is_input else 'nhwc'}")
        if is_input:
            graph.node.insert(0, edge)
        else:
            graph.node.append(edge)
        _set_dims(value, want)
        moved.append(name)
    return moved


def _check_against_litert(source: Path, converted: Path) -> float:
    """The worst output's largest difference (relative to its largest value) between
    onnxruntime on the converted graph and LiteRT on the .tflite, on one random input."""
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(source))
    interpreter.allocate_tensors()
    rng = np.random.default_rng(0)
    feeds = {}
    for detail in interpreter.get_input_details():
        if detail["dtype"] != np.float32:
            raise UnsupportedModelError(
                f"{source}: input {detail['name']!r} is {np.dtype(detail['dtype']).name}; a "
                ".tflite source must be a float model (expected float32 inputs)")
        x = rng.uniform(-1, 1, detail["shape"]).astype(np.float32)
        interpreter.set_tensor(detail["index"], x)
        feeds[detail["name"]] = x
    interpreter.invoke()
    session = ort.InferenceSession(str(converted), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
    worst = 0.0
    for detail in interpreter.get_output_details():
        want = interpreter.get_tensor(detail["index"])
        have = got[detail["name"]]
        if have.shape != want.shape:
            raise UnsupportedModelError(f"{source}: output {detail['name']!r} converts to shape "
                                        f"{list(have.shape)}, the .tflite gives {list(want.shape)}")
        scale = float(np.abs(want).max()) or 1.0
        worst = max(worst, float(np.abs(have - want).max()) / scale)
    return worst


def failed_at(exc: BaseException) -> str:
    """The tflite2onnx operator (or tensor, with the ops around it) an exception was raised
    in: the innermost ``self`` of its traceback that is one. "an unknown op" otherwise."""
    import traceback

    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    for frame in reversed(frames):
        owner = frame.f_locals.get("self")
        module = type(owner).__module__ if owner is not None else ""
        if not module.startswith("tflite2onnx"):
            continue
        try:
            if module.startswith("tflite2onnx.op"):
                return f"op {owner.name!r} ({owner.type})"
            if module == "tflite2onnx.tensor":
                ops = [f"{op.name!r} ({op.type})" for op in owner.producers + owner.consumers]
                return f"tensor {owner.name!r} of op {', '.join(ops) or 'none'}"
        except Exception:  # noqa: BLE001, S112 - a half-built object: try the outer frames
            continue
    return "an unknown op"


def tflite_to_onnx(source: Path, out: Path) -> list[str]:
    """Write the ONNX graph of the float .tflite ``source`` to ``out``; returns report lines.
    An op tflite2onnx cannot convert, or a result that differs from LiteRT's, is an
    ``UnsupportedModelError`` naming it."""
    try:
        import tflite2onnx
    except ImportError as exc:
        raise UserError(f"{source}: a .tflite source is converted to ONNX with tflite2onnx, "
                        "which is not installed (expected: pip install 'edgekit[build]', or "
                        "pip install tflite2onnx)") from exc
    import onnx

    shapes = tflite_io_shapes(source)
    raw = out.with_name(out.stem + ".tflite2onnx.onnx")
    flat, halves = fold_fp16_dequantize(source.read_bytes())
    readable = out.with_name(out.stem + ".fp32.tflite") if halves else source
    if halves:
        readable.write_bytes(flat)  # a copy beside the output: the source is never modified
    quiet = logging.getLogger("tflite2onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "float16 not supported/tested": checked below instead
    try:
        tflite2onnx.convert(str(readable), str(raw))
    except Exception as exc:  # noqa: BLE001 - any failure of the converter is the model's
        raise UnsupportedModelError(
            f"{source}: tflite2onnx {tflite2onnx.__version__} cannot convert this model "
            f"(at {failed_at(exc)}): {type(exc).__name__}: {exc}; export the original model "
            "to ONNX instead") from exc
    finally:
        quiet.setLevel(level)
        if halves:
            readable.unlink(missing_ok=True)
    model = onnx.load(str(raw))
    moved = _retranspose(model, shapes)
    onnx.save_model(model, str(out))
    raw.unlink()
    worst = _check_against_litert(source, out)
    if worst > MATCH_TOLERANCE:
        raise UnsupportedModelError(
            f"{source}: its ONNX conversion (tflite2onnx {tflite2onnx.__version__}) differs from "
            f"LiteRT running the .tflite by {worst:.2%} of an output's largest value "
            f"(expected <= {MATCH_TOLERANCE:.1%}); export the original model to ONNX instead")
    notes = [f"converted the .tflite to ONNX with tflite2onnx {tflite2onnx.__version__} "
             f"(matches LiteRT within {worst:.1e} of each output's largest value)"]
    if halves:
        notes.append(f"read {halves} float16 weights (DEQUANTIZE of a constant) as float32")
    if moved:
        notes.append(f"kept the .tflite's NHWC layout for {', '.join(moved)} (a Transpose "
                     "at the graph's edge)")
    return notes
