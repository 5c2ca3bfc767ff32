"""The graph check: after a stage changes a model, the model is still a valid ONNX graph.

On in debug and test runs (``EDGEKIT_CHECK_GRAPHS=1``; ``tests/conftest.py`` sets it), off
by default for users' speed. A model a stage wrote must:

- pass ``onnx.checker.check_model(full_check=True)`` (the schema of every node in the
  model's opset, SSA form, strict shape inference);
- load in onnxruntime (its own schema checks and type inference, no graph optimization);
- have unique node names and unique tensor names (one producer per tensor, no node output
  shadowing a graph input or initializer): the guard and the per-layer report address
  nodes by name.

A failure is an ``InternalError`` naming the stage, the file and the problem. A model checked
once (same file, size and modification time) is not checked again.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from edgekit.errors import InternalError

ENV = "EDGEKIT_CHECK_GRAPHS"
_checked: set[tuple[str, int, int]] = set()


def enabled() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0", "false", "no")


def name_problems(graph: Any) -> list[str]:
    """Node names given twice, tensors written twice (or shadowing an input/initializer)."""
    problems = []
    nodes = Counter(n.name for n in graph.node if n.name)
    twice = sorted(n for n, c in nodes.items() if c > 1)
    if twice:
        problems.append(f"{len(twice)} node name(s) used more than once: {twice[:5]}")
    written = Counter(o for n in graph.node for o in n.output if o)
    written.update(i.name for i in graph.input)
    written.update(i.name for i in graph.initializer
                   if i.name not in {g.name for g in graph.input})  # an input's default value
    twice = sorted(t for t, c in written.items() if c > 1)
    if twice:
        problems.append(f"{len(twice)} tensor name(s) written more than once: {twice[:5]}")
    return problems


def problems(path: Path) -> list[str]:
    """What is wrong with the model file at ``path`` (empty: nothing)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    found = name_problems(model.graph)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001 - every checker failure is reported as found
        found.append(f"onnx checker: {type(exc).__name__}: {str(exc).strip()[:400]}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - as above
        found.append(f"onnxruntime: {str(exc).strip()[:400]}")
    return found


def check_model_file(path: Path, stage: str) -> None:
    """Raise an ``InternalError`` if the model ``stage`` wrote at ``path`` is not valid."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key in _checked:
        return
    found = problems(path)
    if found:
        raise InternalError(f"stage {stage} wrote an invalid model ({path.name}): "
                            + "; ".join(found))
    _checked.add(key)


def check_stage(stage: str, ctx: Any) -> None:
    """The models a stage may have written into ``ctx``: the float model and the quantized
    candidates (a file checked before and unchanged since is skipped)."""
    if not enabled():
        return
    paths = []
    if getattr(ctx, "float_path", None):
        paths.append(ctx.float_path)
    paths += list((getattr(ctx, "candidates", None) or {}).values())
    for path in paths:
        if Path(path).is_file():
            check_model_file(Path(path), stage)
