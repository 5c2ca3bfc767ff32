"""torch -> one self-contained ONNX file: the dynamo exporter first, the TorchScript one as fallback.

The dynamo exporter (``torch.export`` + onnxscript) gives cleaner graphs at opset 18; models it
cannot trace (data-dependent control flow, TorchScript modules) go through the TorchScript
exporter, and the build says which was used and why. When both fail the error names the op.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.errors import ExportError, InternalError

from .inputs import Traced, one_thread
from .source import TorchSource

DYNAMO_OPSET = 18  # the dynamo exporter's native opset: no version-conversion pass
TORCHSCRIPT_OPSET = 17  # LayerNormalization is 17+; the TorchScript exporter is well tested here
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_OP_PATTERNS = (
    re.compile(r"operator '([\w.:]+)'"),  # TorchScript: Exporting the operator 'aten::x' ...
    re.compile(r"op='([\w.:]+)'"),  # dynamo: No ONNX function found for <OpOverload(op='prims.x'
    re.compile(r"target=torch\.ops\.([\w.]+)"),
    re.compile(r"\b(aten::\w+)"),
)


@dataclass
class Exported:
    """The exported ONNX file and how it was made (recorded in the manifest)."""

    path: Path
    exporter: str  # "dynamo" | "torchscript"
    opset: int
    fallback_reason: str | None = None
    tracer_warnings: list[str] = field(default_factory=list)


def export(src: TorchSource, traced: Traced, path: Path, input_names: list[str],
           output_names: list[str], dynamic_batch: bool) -> Exported:
    """Export ``src`` to ``path``: dynamo first, TorchScript exporter if that fails."""
    import torch

    args = traced.args
    if dynamic_batch and args[0].shape[0] == 1:
        # torch.export specialises size-1 dims to constants: trace a batch of 2 to keep it symbolic
        args = tuple(torch.cat([a, a]) for a in args)
    names = {"input_names": input_names, "output_names": output_names}
    dynamo_exc: BaseException | None = None
    if src.kind == "torchscript":
        reason = "torch.export (the dynamo exporter) cannot trace a TorchScript module"
    else:
        try:
            _quiet(lambda: _dynamo(src, args, path, names, dynamic_batch))
            return _checked(Exported(path, "dynamo", DYNAMO_OPSET))
        except ExportError:
            raise
        except Exception as exc:  # any dynamo failure: try the other exporter, loudly
            dynamo_exc = exc
            reason = f"the dynamo exporter failed: {_reason(exc)}"
    try:
        caught = _quiet(lambda: _torchscript(src, args, path, names, dynamic_batch))
    except Exception as exc:
        raise _both_failed(src, reason, exc, dynamo_exc) from exc
    return _checked(Exported(path, "torchscript", TORCHSCRIPT_OPSET, reason, caught))


def _dynamo(src: TorchSource, args: tuple[Any, ...], path: Path, names: dict[str, list[str]],
            dynamic_batch: bool) -> None:
    import torch

    shapes = None
    if src.kind == "exported_program":
        batch_dims = {_is_symbolic(s) for s in _user_input_batch_dims(src.model)}
        if dynamic_batch and batch_dims != {True}:
            raise ExportError(
                f"{src.name}: --dynamic-batch, but the ExportedProgram fixes its batch size; "
                "re-export it with torch.export.Dim on axis 0, or build without --dynamic-batch"
            )
        args = ()  # the program carries its own example inputs and shapes
    elif dynamic_batch:
        batch = torch.export.Dim("batch")
        shapes = tuple({0: batch} for _ in args)
    torch.onnx.export(src.model, args, str(path), dynamo=True, external_data=False,
                      opset_version=DYNAMO_OPSET, dynamic_shapes=shapes, verbose=False,
                      optimize=True, **names)


def _torchscript(src: TorchSource, args: tuple[Any, ...], path: Path,
                 names: dict[str, list[str]], dynamic_batch: bool) -> None:
    import torch

    model = src.model.module() if src.kind == "exported_program" else src.model
    axes = None
    if dynamic_batch:
        axes = {n: {0: "batch"} for n in names["input_names"] + names["output_names"]}
    torch.onnx.export(model, args, str(path), dynamo=False, opset_version=TORCHSCRIPT_OPSET,
                      dynamic_axes=axes, **names)


def _user_input_batch_dims(program: Any) -> list[Any]:
    users = set(program.graph_signature.user_inputs)
    dims = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in users:
            shape = getattr(node.meta.get("val"), "shape", ())
            dims.append(shape[0] if len(shape) else 1)
    return dims


def _is_symbolic(dim: Any) -> bool:
    return not isinstance(dim, int)


def _quiet(fn: Any) -> list[str]:
    """Run an exporter without its console chatter; return its TracerWarnings (they matter)."""
    out = io.StringIO()
    torch_log = logging.getLogger("torch")  # symbolic-shape notes while a dynamo export fails
    level = torch_log.level
    torch_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out), one_thread():
            warnings.simplefilter("always")
            fn()
    finally:
        torch_log.setLevel(level)
    found: list[str] = []
    for w in caught:
        text = str(w.message).strip().splitlines()[0].split(". ")[0][:200]
        if w.category.__name__ == "TracerWarning" and text not in found:
            found.append(text)
    return found


def _checked(result: Exported) -> Exported:
    side = result.path.with_name(result.path.name + ".data")
    if side.exists():  # external_data=False should keep the weights inside the file
        raise InternalError(f"expected the weights inside {result.path}, got a side file {side}")
    if not result.path.is_file():
        raise InternalError(f"the {result.exporter} exporter reported success but wrote no file")
    return result


# --------------------------------------------------------------------------- error messages
def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _reason(exc: BaseException) -> str:
    """The line of a (long) exporter error that says what went wrong."""
    text = _ANSI.sub("", str(exc))
    if "## Exception summary" in text:
        after = text.split("## Exception summary", 1)[1].strip().splitlines()
        if after:
            return re.sub(r"^<class '[\w.]+'>:\s*", "", after[0])[:300]
    chain = _chain(exc)
    inner = chain[-1]
    lines = [line for line in _ANSI.sub("", str(inner)).splitlines() if line.strip()]
    return f"{type(inner).__name__}: {lines[0][:300] if lines else ''}"


def unsupported_ops(*excs: BaseException | None) -> list[str]:
    """Op names the exporters' errors mention, most specific first, without duplicates."""
    ops: list[str] = []
    for exc in excs:
        if exc is None:
            continue
        text = " ".join(_ANSI.sub("", str(e)) for e in _chain(exc))
        for pattern in _OP_PATTERNS:
            for name in pattern.findall(text):
                name = name.removesuffix(".default")
                if name not in ops:
                    ops.append(name)
    return ops


def _both_failed(src: TorchSource, dynamo_reason: str, ts_exc: BaseException,
                 dynamo_exc: BaseException | None) -> ExportError:
    ops = unsupported_ops(ts_exc, dynamo_exc)
    head = (f"{src.name}: op {' / '.join(ops[:3])} cannot be exported to ONNX" if ops else
            f"{src.name}: could not be exported to ONNX")
    return ExportError(
        f"{head}: {dynamo_reason}; the TorchScript exporter failed too: {_reason(ts_exc)}. "
        "Replace the op with supported ones, or export the model to ONNX yourself and build that"
    )
