"""Package: assemble the manifest, compute test vectors on the real backends, write the artifact.

The artifact is written to a temp file beside the output and renamed, so an interrupted
build leaves nothing half-written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.builder import builder
from edgekit.converters.core.runner import joined
from edgekit.converters.graph.qdq import snap_to_grid
from edgekit.converters.inputs.datasets import data_label

import edgekit
from edgekit.artifact.archive import TEST_VECTORS, encode_test_vectors, sha256_bytes, write_artifact
from edgekit.backends import BackendOptions, TensorSpec, backends_for
from edgekit.errors import InternalError
from edgekit.numerics.clip_counts import calibration_record

from ..context import BuildContext
from ..metrics.float_tail import float_step
from ..metrics.jitter import jitter_moves
from ..metrics.tolerance import BASIS, depth, has_attention, head_gain, output_tolerance
from ..pipeline import Stage
from ..report.layers import layer_records
from ..report.why import wide_reasons


def onnx_entry(ctx: BuildContext) -> None:
    """Add the int8 ONNX model to the artifact's models."""
    data = ctx.quant_path.read_bytes()
    ctx.model_bytes["model.onnx"] = data
    # reduce_range: 7-bit weights, which fused x86 kernels without VNNI run exactly (edgekit/device/cpu.py)
    ctx.models.append({"format": "onnx", "path": "model.onnx", "runtime": "onnxruntime",
                       "bytes": len(data), "sha256": sha256_bytes(data),
                       "reduce_range": bool(ctx.quantization.get("reduce_range", False))})


def expected_outputs(entry: dict[str, Any], data: bytes, inputs: list[TensorSpec],
                     outputs: list[TensorSpec], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of the packaged model on the first installed backend for its format (host side)."""
    for cls in backends_for(entry["format"]):
        if cls.available():
            backend = cls(data, inputs, outputs, BackendOptions(threads=1), entry=entry)
            try:
                fixed = inputs[0].fixed_batch
                as_taken = all(tuple(feeds[i.name].shape) == tuple(i.shape) for i in inputs)
                if fixed is None or as_taken:  # as_taken: one sample, in the model's layout
                    return backend.run(feeds)
                # one vector at a time on each input's batch axis; each output joined on its
                # own (a CTC model's [T, N, C] logits, a recurrent state [L, N, H]), as the
                # device's row-by-row run joins them (edgekit/runtime/session.py)
                axes = {i.name: i.batch_axis for i in inputs}
                first = inputs[0]
                rows = [backend.run({k: np.take(v, [n], axis=axes.get(k, 0))
                                     for k, v in feeds.items()})
                        for n in range(feeds[first.name].shape[first.batch_axis])]
                return joined(rows, [o.batch_axis for o in outputs])
            finally:
                backend.close()
    raise InternalError(f"no installed backend for {entry['format']} to compute test vectors")


VECTOR_SHARE = 0.05  # test vectors may take this share of the model bytes (at least one vector)
VECTOR_FLOOR = 64 * 1024


def vector_count(ctx: BuildContext) -> int:
    """How many test vectors to bundle: as asked, but bounded so they never dominate the file."""
    per_vector = sum(
        int(np.prod(ctx.val.arrays[i["name"]].shape[1:])) * (1 if i.get("quantization") else 4)
        for i in ctx.inputs)
    budget = max(VECTOR_FLOOR, VECTOR_SHARE * sum(len(b) for b in ctx.model_bytes.values()))
    return max(1, min(ctx.config.test_vectors, len(ctx.val), int(budget // max(1, per_vector))))


def test_inputs(ctx: BuildContext, count: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The first validation samples as feeds, and their npz encoding.

    Inputs the model quantizes on entry are snapped to that grid and stored as integer
    codes: a 224x224x3 vector then costs 150 kB instead of 600 kB, with identical results.
    """
    feeds, vectors = {}, {}
    for spec in ctx.inputs:
        x = ctx.val.feeds(0, count)[spec["name"]]  # on the input's own batch axis
        q = spec.get("quantization")
        if q:
            codes, x = snap_to_grid(x, q)
            vectors[f"q/{spec['name']}"] = codes
            vectors[f"qparams/{spec['name']}"] = np.array([q["scale"], q["zero_point"]], np.float64)
        else:
            vectors[f"in/{spec['name']}"] = x
        feeds[spec["name"]] = x
    return feeds, vectors


def vector_tolerances(ctx: BuildContext, vectors: dict[str, np.ndarray],
                      feeds: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per output, the bounds ``verify`` holds every format to (the loosest slice floor over
    the formats: each is checked against its own recorded outputs and step). A float output
    computed from int8 layers counts them in its ``float_step`` (measured on ``feeds``)."""
    import onnx

    graph = onnx.load(str(ctx.quant_path))
    layers, attention = depth([n.op_type for n in graph.graph.node]), has_attention(graph)
    transposed = any(n.op_type == "ConvTranspose" for n in graph.graph.node)
    bounds: dict[str, Any] = {}
    float_steps: dict[str, float] = {}
    moves = jitter_moves(graph, feeds, [spec["name"] for spec in ctx.outputs], ctx.val.axes)
    for spec in ctx.outputs:
        name = spec["name"]
        for entry in ctx.models:
            q = (entry.get("outputs_quantization", {}).get(name) or spec.get("quantization")
                 or {})
            step = float(q.get("scale") or 0.0)
            if not step:  # a float output: one step at its int8 boundary, if it has one
                if name not in float_steps:
                    float_steps[name] = float_step(graph, name, feeds, ctx.val.axes)
                step = float_steps[name]
            # samples first, as verify reads them (a [T, N, C] output's slices are over C)
            stored = np.moveaxis(vectors[f"out/{entry['format']}/{name}"],
                                 int(spec.get("batch_axis") or 0), 0)
            tol = output_tolerance(stored, step, layers,
                                   attention, head_gain(graph, name), transposed,
                                   moves.get(name)).to_dict()
            kept = bounds.get(name)
            if kept is None or (tol["min_sqnr_db"] is not None and (
                    kept["min_sqnr_db"] is None or tol["min_sqnr_db"] < kept["min_sqnr_db"])):
                bounds[name] = tol
        if float_steps.get(name):  # a format whose output is float reads its bounds in it
            bounds[name]["float_step"] = float_steps[name]
    return bounds


def calibration_entries(ctx: BuildContext, vectors: dict[str, np.ndarray]
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The I/O entries with their ``calibration`` record (``edgekit/numerics/drift.py``): the range
    each int8 grid holds, and the share of the validation inputs outside it (per channel)
    and of the test-vector outputs at its limits: the drift watch's baseline on the device."""
    inputs = []
    for spec in ctx.inputs:
        values = ctx.val.arrays.get(spec["name"]) if not ctx.val.axes.get(spec["name"]) else None
        record = calibration_record(spec.get("quantization"), spec.get("layout", ""),
                                    spec["shape"], None if ctx.val.synthetic else values)
        inputs.append({**spec, "calibration": record} if record else dict(spec))
    fmt = next((m["format"] for m in ctx.models if m["format"] == "onnx"),
               ctx.models[0]["format"])
    outputs = []
    for spec in ctx.outputs:
        record = calibration_record(spec.get("quantization"), spec.get("layout", ""),
                                    spec["shape"], vectors.get(f"out/{fmt}/{spec['name']}"),
                                    output=True)
        outputs.append({**spec, "calibration": record} if record else dict(spec))
    return inputs, outputs


class Package(Stage):
    name = "package"
    requires = frozenset({"inputs", "outputs", "quant_path", "source_info", "val"})
    provides = frozenset({"artifact_bytes", "model_bytes", "models"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return {"output": str(ctx.output_path), "members": sorted(ctx.model_bytes)}

    def run(self, ctx: BuildContext) -> None:
        if "onnx" in ctx.formats and not any(m["format"] == "onnx" for m in ctx.models):
            onnx_entry(ctx)
        if not ctx.models:
            raise InternalError(f"no model was produced for formats {ctx.formats}")
        # models whose outputs carry no quantization yet read it from the onnx one
        inputs = [TensorSpec.from_manifest(i) for i in ctx.inputs]
        outputs = [TensorSpec.from_manifest(o) for o in ctx.outputs]
        count = vector_count(ctx)
        feeds, vectors = test_inputs(ctx, count)
        for entry in ctx.models:
            results = expected_outputs(entry, ctx.model_bytes[entry["path"]], inputs, outputs, feeds)
            for spec, value in zip(outputs, results, strict=True):
                vectors[f"out/{entry['format']}/{spec.name}"] = value
        members = dict(ctx.model_bytes)
        members[TEST_VECTORS] = encode_test_vectors(vectors)
        manifest = reproducible(self.manifest(ctx, count), ctx.timings.seconds)
        manifest["inputs"], manifest["outputs"] = calibration_entries(ctx, vectors)
        manifest["layers"] = self.layers(ctx)
        manifest["test_vectors"].update(outputs=vector_tolerances(ctx, vectors, feeds), basis=BASIS)
        ctx.artifact_bytes = write_artifact(ctx.output_path, manifest, members,
                                            sign_key=ctx.config.sign_key)

    @staticmethod
    def layers(ctx: BuildContext) -> list[dict[str, Any]]:
        """Each compute layer's precision and output SQNR against float (``converters/report``).
        A diagnostic: a graph it cannot read costs a warning, not the build."""
        speed = (ctx.extra_manifest.get("precision_speed") or {}).get("layers") or {}
        reasons = wide_reasons(ctx.extra_manifest.get("accuracy_guard"), ctx.config.keep_float,
                               ctx.quantization.get("keep_float") or (), speed.get("float") or ())
        try:
            records = layer_records(ctx.float_path, ctx.quant_path, ctx.val, reasons)
        except Exception as exc:  # onnx/onnxruntime raise their own types on odd graphs
            ctx.warn(f"per-layer record skipped: {type(exc).__name__}: {str(exc)[:200]}")
            return []
        tflite_float = {o.get("name") for m in ctx.models if m["format"] == "tflite"
                        for o in m.get("float_ops") or []}
        for record in records:
            # an fp16 layer is a float op in the .tflite too (FLOAT16 weights + DEQUANTIZE,
            # converters/tflite/fp16.py): the same precision in both formats
            if record["name"] in tflite_float and record["precision"] not in ("float", "fp16"):
                also = ", the .onnx runs it " + record["precision"] if "onnx" in ctx.formats else ""
                record.update(precision="float", reason="the .tflite runs it float (no integer "
                              f"kernel in the writer for it{also})")
        return records

    def manifest(self, ctx: BuildContext, vectors: int) -> dict[str, Any]:
        stages = ctx.stages + [{"name": self.name, "params": {"members": sorted(ctx.model_bytes)}}]
        float_bytes = ctx.float_path.stat().st_size if ctx.float_path else 0
        return {
            "schema_version": 1,
            "edgekit_version": edgekit.__version__,
            "builder": builder(),  # the version and, from a checkout, the git commit
            # no build time: the same inputs give the same bytes (converters/core/content_key.py)
            "content_key": ctx.content_key,
            "target": {"name": ctx.profile.name, "sha256": ctx.profile.sha256,
                       "profile": ctx.profile.to_dict()},
            "source": ctx.source_info,
            "stages": stages,
            "quantization": ctx.quantization,
            "inputs": ctx.inputs,
            "outputs": ctx.outputs,
            "models": ctx.models,
            "test_vectors": {"path": TEST_VECTORS, "count": vectors,
                             "tolerance": "per output: test_vectors.outputs"},
            "validation": {**ctx.validation, **({"source": data_label(ctx.validation["source"])}
                                                 if "source" in ctx.validation else {})},
            "sizes": {"source_bytes": ctx.source_info.get("bytes", 0),
                      "float_onnx_bytes": float_bytes,
                      **{f"{m['format']}_bytes": m["bytes"] for m in ctx.models}},
            "warnings": ctx.warnings,
            **ctx.extra_manifest,
        }


# Wall-clock durations (stage times, search candidates, the guard's attempts) differ on every
# run; they stay in the build's report, not in the artifact, so that builds are byte-identical.
WALL_CLOCK_KEYS = frozenset({"seconds"})


def reproducible(value: Any, removed: dict[str, float], where: str = "") -> Any:
    """``value`` without its wall-clock keys, at any depth; each one removed goes into
    ``removed`` by its place (``stages.calibrate``, ``accuracy_guard.attempts.0``)."""
    if isinstance(value, dict):
        for key in WALL_CLOCK_KEYS & value.keys():
            removed[where or key] = value[key]
        return {k: reproducible(v, removed, f"{where}.{k}".lstrip("."))
                for k, v in value.items() if k not in WALL_CLOCK_KEYS}
    if isinstance(value, list):
        return [reproducible(v, removed, f"{where}.{_item_name(v, i)}")
                for i, v in enumerate(value)]
    return value


def _item_name(item: Any, index: int) -> str:
    """A list item's place: its name when it has one (a stage), else its index."""
    name = item.get("name") if isinstance(item, dict) else None
    return name if isinstance(name, str) else str(index)


def default_output(source: Any, target: str) -> Path:
    if not isinstance(source, (str, Path)):
        stem = type(source).__name__
    elif ":" in str(source) and not Path(str(source)).exists():  # module:callable, file.py:Name
        stem = str(source).rsplit(":", 1)[1]
    else:
        stem = Path(str(source)).stem
    return Path.cwd() / f"{stem}.{target}.edgekit"
