"""Run a model sample by sample over a validation set: the float ONNX source and onnxruntime's
own int8 model in onnxruntime, the edgekit artifact through ``edgekit.load`` (the runtime a user
gets), and stack the outputs for the metric."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .metrics import Outputs


def sample(arrays: dict[str, np.ndarray], axes: dict[str, int], ranks: dict[str, int],
           index: int) -> dict[str, np.ndarray]:
    """One sample of each array in the model input's own rank (batch 1)."""
    out = {}
    for name, array in arrays.items():
        axis = axes.get(name, 0)
        if array.ndim == ranks[name] + 1 and axis == 0:
            out[name] = array[index]
        else:
            out[name] = np.take(array, [index], axis=axis)
    return out


def count(arrays: dict[str, np.ndarray], axes: dict[str, int]) -> int:
    name, array = next(iter(arrays.items()))
    return array.shape[axes.get(name, 0)]


def stack(rows: list[dict[str, np.ndarray]]) -> Outputs:
    return {k: np.concatenate([np.asarray(r[k]).reshape(1, *np.shape(r[k])) for r in rows])
            for k in rows[0]} if rows else {}


def run_onnx(path: Path, arrays: dict[str, np.ndarray], axes: dict[str, int],
             consts: dict[str, int], basic: bool = False) -> Outputs:
    """onnxruntime one sample at a time (all optimizations, or only the basic ones), tensor
    outputs only (a ZipMap's list of dicts is left out)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if basic:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    types = {i.name: i.type for i in session.get_inputs()}
    ranks = {i.name: len(i.shape) for i in session.get_inputs()}
    feeds_const = {k: np.array(v, np.int64 if "int64" in types.get(k, "") else np.int32)
                   for k, v in consts.items() if k in types}
    names = [o.name for o in session.get_outputs()]
    rows = []
    for i in range(count(arrays, axes)):
        feeds = sample(arrays, axes, ranks, i)
        values = session.run(None, {**feeds, **feeds_const})
        rows.append({n: v for n, v in zip(names, values, strict=True) if isinstance(v, np.ndarray)})
    return stack(rows)


def run_artifact(path: Path, arrays: dict[str, np.ndarray], axes: dict[str, int],
                 ranks: dict[str, int], backend: str | None = None) -> Outputs:
    """The artifact as a user runs it: ``edgekit.load(path).predict(sample)``."""
    import edgekit

    model = edgekit.load(path, backend=backend, threads=1)
    try:
        rows = []
        first_output = model.artifact.spec.outputs[0].name
        for i in range(count(arrays, axes)):
            result = model.predict(sample(arrays, axes, ranks, i))
            if not isinstance(result, dict):  # one output comes back bare
                result = {first_output: result}
            rows.append({k: np.asarray(v) for k, v in result.items()})
        return stack(rows)
    finally:
        model.close()


def input_ranks(path: Path) -> dict[str, int]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    return {i.name: len(i.type.tensor_type.shape.dim) for i in model.graph.input
            if i.name not in inits}
