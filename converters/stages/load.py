"""Load an ONNX source model (a float .tflite is converted to ONNX first: tflite_source.py):
read it (never modify the file), check it, describe its inputs/outputs; the copy the build
works on has one name per node and tensor outputs only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from edgekit.converters.graph.io_spec import describe_io, refuse_scalar_outputs
from edgekit.converters.graph.map_outputs import unzip_map_outputs
from edgekit.converters.graph.ml_ops import lower_ml_ops
from edgekit.converters.graph.names import name_nodes
from edgekit.converters.graph.opset import default_opset, merge_opset_imports
from edgekit.converters.tflite.source import is_tflite, tflite_to_onnx

from edgekit.artifact.archive import sha256_file
from edgekit.errors import ModelFormatError, UnsupportedModelError

from ..context import BuildContext
from ..pipeline import Stage

MIN_OPSET = 13  # per-channel QDQ (axis on QuantizeLinear/DequantizeLinear) needs opset 13
def external_files(model: Any, folder: Path) -> list[Path]:
    """The external data files the initializers of ``model`` (loaded without its external
    data) read, once each, resolved under ``folder``; a missing one is a ``ModelFormatError``."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    found: dict[str, Path] = {}
    for tensor in model.graph.initializer:
        if uses_external_data(tensor):
            location = ExternalDataInfo(tensor).location
            found.setdefault(location, folder / location)
    missing = [str(f) for f in found.values() if not f.is_file()]
    if missing:
        raise ModelFormatError(f"{folder}: the model's weights are in external data file(s) "
                               f"{', '.join(missing)}, which do not exist (expected beside the "
                               ".onnx file)")
    return list(found.values())


class LoadOnnx(Stage):
    name = "load"
    requires = frozenset({"config"})
    provides = frozenset({"float_model", "float_path", "inputs", "outputs", "source_info"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return {"opset": ctx.source_info.get("opset"), "ir_version": ctx.source_info.get("ir_version")}

    def run(self, ctx: BuildContext) -> None:
        import onnx
        from google.protobuf.message import DecodeError

        path = Path(str(ctx.config.source))
        if ctx.config.weights:
            ctx.warn(f"--weights applies to PyTorch sources only; ignored for the ONNX "
                     f"file {path.name} (its own weights are used)")
        if not path.is_file():
            raise ModelFormatError(f"{path}: no such model file (expected an .onnx file)")
        ctx.source_info.update(name=path.name, format="onnx", sha256=sha256_file(path))
        graph_path = path
        if is_tflite(path):  # a float .tflite: its ONNX graph, in the .tflite's own layout
            graph_path = ctx.workdir / "source-from-tflite.onnx"
            for note in tflite_to_onnx(path, graph_path):
                ctx.report(f"  {note}")
            ctx.source_info["converted_from"] = "tflite"
        try:
            model = onnx.load(str(graph_path), load_external_data=False)
            external = external_files(model, path.parent)
            if external:  # weights beside the graph (model.onnx.data): read from its folder
                onnx.load_external_data_for_model(model, str(path.parent))
        except (DecodeError, ValueError, RuntimeError, OSError) as exc:
            raise ModelFormatError(
                f"{path}: not a readable ONNX model (expected an ONNX protobuf; the file may be "
                f"truncated or of another format): {exc}"
            ) from exc
        # the source's size on disk: the graph and the external data files it reads
        ctx.source_info["bytes"] = path.stat().st_size + sum(f.stat().st_size for f in external)
        if external:
            ctx.source_info["external_data"] = [f.name for f in external]
        if not model.graph.node:
            raise ModelFormatError(f"{path}: the ONNX file holds no graph nodes (truncated or empty)")
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelFormatError(f"{path}: invalid ONNX model: {first}") from exc
        merge_opset_imports(model)  # skl2onnx may name the default domain twice
        opset = default_opset(model)
        if opset < MIN_OPSET:
            from onnx import version_converter

            try:
                model = version_converter.convert_version(model, MIN_OPSET)
            except Exception as exc:
                raise UnsupportedModelError(
                    f"{path}: opset {opset}; int8 builds need opset >= {MIN_OPSET} and the "
                    f"automatic upgrade failed: {exc}"
                ) from exc
            ctx.warn(f"upgraded the model from opset {opset} to {MIN_OPSET} for per-channel QDQ")
        ctx.source_info.update(opset=opset, ir_version=model.ir_version,
                               producer=f"{model.producer_name} {model.producer_version}".strip())
        for note in unzip_map_outputs(model):  # ZipMap's sequence of maps: its tensor
            ctx.report(f"  {note}")
        for note in lower_ml_ops(model):  # skl2onnx's LinearClassifier, Normalizer...
            ctx.report(f"  {note}")
        name_nodes(model.graph)  # unnamed or twice-named nodes (spox's 'F0::anon'): one name each
        refuse_scalar_outputs(model, str(path))
        ctx.inputs, ctx.outputs = describe_io(model)
        if not ctx.inputs:
            raise UnsupportedModelError(f"{path}: the model has no (non-initializer) inputs")
        ctx.float_model = model
        ctx.float_path = ctx.workdir / "float.onnx"
        onnx.save_model(model, str(ctx.float_path))
        os.chmod(ctx.float_path, 0o600)
