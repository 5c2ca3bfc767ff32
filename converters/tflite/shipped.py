"""The format an artifact ships, as its accuracy decision sees it.

The accuracy decision (validate, the reference comparison, the guard's ceiling and attempts)
judges a candidate by the outputs a user will get. When the build ships a .tflite (the rpi4
default), that is the .tflite the writer makes from the candidate's QDQ graph, run by the LiteRT
interpreter, not the QDQ graph run by onnxruntime: the two can differ (PP-OCRv4 rec: a guard fix
that scored well on the ONNX graph shipped a .tflite matching 67% of float's lines against
float's 98%). When the build ships ONNX only, the ONNX graph (exact int8) is what ships.

``write_tflite`` is the one place a QDQ model becomes a .tflite; it keeps what it wrote by
(model path, keep_float, ranges), so the convert stage ships the very bytes the decision judged
and writes each of them once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import BuildContext, Dataset

from edgekit.errors import UnsupportedModelError

CACHE = "tflite_written"  # ctx.evidence key: (path, keep_float, ranges) -> TFLiteModel | error text
OUTPUTS = "tflite_outputs"  # ctx.evidence key: (model sha256, data digest) -> LiteRT outputs
KEPT_RUNS = 3
# what a figure was measured on: the format the artifact ships
FORMAT_NAMES = {"tflite": "the .tflite on LiteRT", "onnx": "the ONNX int8 graph on onnxruntime"}
THREADS = 1  # one interpreter thread: the same outputs whatever else the host runs


class _Kept(dict):
    """What the build wrote and ran, shared by its forks as they share datasets (a deep copy for
    each guard rebuild would duplicate megabytes of outputs)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> _Kept:
        return self


def output_ranges(model: Any, ranges: Path | None) -> dict[str, tuple[float, float]]:
    """The calibrated ranges of the graph outputs from a calibration cache: outputs onnxruntime
    left float get that scale in the .tflite (tflite/output_qdq.py)."""
    from edgekit.converters.tflite.output_qdq import read_output_ranges

    if ranges is None or not Path(ranges).exists():
        return {}
    return read_output_ranges(ranges, [o.name for o in model.graph.output])


def write_tflite(ctx: BuildContext, path: Path, keep_float: Iterable[str], ranges: Path | None) -> Any:
    """The .tflite (``tflite.convert.TFLiteModel``) of the QDQ model at ``path``; an
    ``UnsupportedModelError`` when the writer cannot write it. Written once per build."""
    import onnx
    from edgekit.converters.graph.shapes import fixed_input_shapes, folded, has_open_inputs
    from edgekit.converters.tflite import convert

    keep = tuple(sorted(set(keep_float)))
    key = (str(path), keep, str(ranges))
    cache = ctx.evidence.setdefault(CACHE, _Kept())
    if key in cache:
        if isinstance(cache[key], str):
            raise UnsupportedModelError(cache[key])
        return cache[key]
    try:
        quantized = onnx.load(str(path))
        if has_open_inputs(quantized):  # --dynamic-batch: the .tflite takes batch 1; its
            # shape subgraphs fold once that is fixed (onnxruntime's optimizer, not by hand)
            quantized = folded(fixed_input_shapes(quantized, 1, others=None, who="the tflite writer"),
                               ctx.workdir)
        model = convert(quantized, keep_float=set(keep), strict_int8=bool(ctx.config.strict_int8),
                        int8_io=not ctx.config.tflite_float_io, output_ranges=output_ranges(quantized, ranges))
    except UnsupportedModelError as exc:
        cache[key] = str(exc)
        raise
    cache[key] = model
    return model


def tflite_entry(ctx: BuildContext, model: Any, member: str = "model.tflite") -> dict[str, Any]:
    """The manifest's models[] entry of a written .tflite."""
    from edgekit.artifact.archive import sha256_bytes

    return {
        "format": "tflite", "path": member, "runtime": "litert",
        "bytes": len(model.data), "sha256": sha256_bytes(model.data),
        "inputs": model.inputs, "outputs": model.outputs,
        "outputs_quantization": {o["name"]: o["quantization"] for o in model.outputs if "quantization" in o},
        "float_ops": model.float_ops, "ops": model.op_counts,
        # how the graph's I/O is written: "int8" (the runtime quantizes into the input
        # buffer) or "float" (QUANTIZE/TRANSPOSE/DEQUANTIZE inside the graph)
        "io": "float" if ctx.config.tflite_float_io else "int8",
    }


def run_tflite(ctx: BuildContext, model: Any, data: Dataset) -> list[np.ndarray]:
    """The written .tflite on ``data`` through the LiteRT backend a device uses (it quantizes
    the inputs and dequantizes the outputs with the model's own scales), samples first.
    The last few runs are kept by content: the convert stage's parity check reuses the decision's."""
    import hashlib

    from edgekit.converters.core.runner import data_digest

    key = (hashlib.sha256(model.data).hexdigest(), data_digest(data))
    kept = ctx.evidence.setdefault(OUTPUTS, _Kept())
    if key not in kept:
        kept[key] = _run_tflite(ctx, model, data)
        while len(kept) > KEPT_RUNS:  # a 384x384 map on 64 samples is 38 MB a run
            kept.pop(next(iter(kept)))
    return [a.copy() for a in kept[key]]


def _run_tflite(ctx: BuildContext, model: Any, data: Dataset) -> list[np.ndarray]:
    from edgekit.converters.core.runner import samples_first

    from edgekit.backends import BackendOptions, TensorSpec
    from edgekit.backends.litert import LiteRTBackend

    backend = LiteRTBackend(model.data, [TensorSpec.from_manifest(i) for i in ctx.inputs],
                            [TensorSpec.from_manifest(o) for o in ctx.outputs],
                            BackendOptions(threads=THREADS), entry=tflite_entry(ctx, model))
    try:
        axes = [int(o.get("batch_axis") or 0) for o in ctx.outputs]
        if data.axes or any(axes):  # samples off axis 0 (a recurrent state, [T, N, C] logits)
            # one at a time, as the model takes them; each output joined on its own batch axis
            # and read samples first, as run_dataset gives the ONNX outputs
            rows = [backend.run(data.feeds(i, i + 1)) for i in range(len(data))]
            return samples_first(rows, axes)
        return backend.run(data.arrays)
    finally:
        backend.close()


class Shipped:
    """Runs a candidate QDQ model in the format the build ships: ``outputs(path, data)``."""

    def __init__(self, ctx: BuildContext) -> None:
        from edgekit.backends.litert import LiteRTBackend

        self.ctx = ctx
        self.tflite = "tflite" in ctx.formats and LiteRTBackend.available()

    def keep_float(self, widened: Iterable[str] = ()) -> list[str]:
        """The writer's keep_float for a build whose guard widened ``widened`` (fp16 / float
        rungs): the user's nodes, those, and the packed outputs' Concats (split_packed.py)."""
        split = {p["concat_kept_float"] for p in self.ctx.quantization.get("packed_outputs") or []
                 if p.get("concat_kept_float")}
        return sorted(set(self.ctx.config.keep_float) | set(widened) | split)

    def outputs(self, path: Path, data: Dataset, keep_float: Iterable[str] | None = None,
                ranges: Path | None = None) -> tuple[list[np.ndarray], str]:
        """(outputs of every graph output, the format that made them: "tflite" or "onnx")."""
        from edgekit.converters.executor.shards import build_outputs

        if self.tflite:
            keep = self.keep_float() if keep_float is None else keep_float
            try:
                model = write_tflite(self.ctx, path, keep, ranges)
            except UnsupportedModelError:
                pass  # no .tflite of this candidate: the build ships its ONNX (convert_tflite says why)
            else:
                try:
                    return run_tflite(self.ctx, model, data), "tflite"
                except Exception:  # noqa: BLE001 - LiteRT refuses the written model: a writer bug
                    pass  # the convert stage skips that .tflite (or fails when it was asked for)
        return build_outputs(self.ctx.config, path, data, exact_int8=True), "onnx"
