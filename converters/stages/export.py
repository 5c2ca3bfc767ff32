"""Export a PyTorch source to ONNX and leave the context as the ONNX ``load`` stage would.

After this stage ``source_info``, ``inputs``/``outputs``, ``float_model`` and ``float_path`` are
set exactly as for an ONNX source, so the rest of the pipeline does not know the model came
from torch. The in-memory model is kept in ``ctx.torch_export`` for the ``check_export`` stage,
which compares the exported ONNX with torch on the calibration inputs.

``source_info`` ``sha256``/``bytes`` describe the file the user gave: the .pt/.pt2 archive, else
the ``--weights`` file, else (an in-memory module without weights) the exported float ONNX.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.converters.graph.io_spec import describe_io, refuse_scalar_outputs

from edgekit.artifact.archive import sha256_file
from edgekit.errors import ExportError, ModelFormatError

from ..context import BuildContext
from ..pipeline import Stage

MAX_TRACER_WARNINGS = 3


@dataclass
class ExportRecord:
    """What ``check_export`` needs: the torch model and the untouched exported ONNX file."""

    source: Any  # edgekit.converters.pytorch.source.TorchSource
    onnx_path: Path
    exporter: str


def _names(flag: str, given: list[str] | None, default: list[str], what: str) -> list[str]:
    if not given:
        return default
    if len(given) != len(default):
        raise ExportError(
            f"{flag} gave {len(given)} name(s) ({', '.join(given)}); the model has "
            f"{len(default)} {what}(s) (default names: {', '.join(default)})"
        )
    if len(set(given)) != len(given):
        raise ExportError(f"{flag} names must be unique, got {', '.join(given)}")
    return list(given)


class ExportTorch(Stage):
    name = "export"
    requires = frozenset({"config"})
    provides = frozenset({"extra_manifest", "float_model", "float_path", "inputs", "outputs", "source_info", "torch_export"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        section = ctx.extra_manifest.get("export", {})
        return {k: section.get(k) for k in ("form", "exporter", "opset", "torch_version",
                                            "dynamic_batch", "input_shapes")}

    def run(self, ctx: BuildContext) -> None:
        import onnx
        import torch
        from edgekit.converters.inputs.checks import check_weights_loaded

        from ..pytorch.inputs import example_inputs
        from ..pytorch.onnx_export import export
        from ..pytorch.source import resolve

        config = ctx.config
        src = resolve(config.source, config.weights)
        ctx.report(f"  {src.form} {src.name} ({src.kind}); tracing with a forward pass")
        traced = example_inputs(src, config.example_inputs, config.input_shape,
                                config.dynamic_batch, config.calib)
        # after the shapes: a source that cannot run at all says so first
        check_weights_loaded(config, src.form, src.weights is not None)
        input_names = _names("--input-names", config.input_names, traced.input_names, "input")
        output_names = _names("--output-names", config.output_names, traced.output_names, "output")
        path = ctx.workdir / "exported.onnx"
        result = export(src, traced, path, input_names, output_names, config.dynamic_batch)
        if result.fallback_reason:
            ctx.warn(f"exported with the TorchScript exporter (torch.onnx.export dynamo=False) "
                     f"because {result.fallback_reason}")
        for text in result.tracer_warnings[:MAX_TRACER_WARNINGS]:
            ctx.warn(f"TorchScript tracer: {text}")
        model = onnx.load(str(path))
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            raise ModelFormatError(f"the {result.exporter} exporter wrote an invalid ONNX model: "
                                   f"{str(exc).strip().splitlines()[0]}") from exc
        refuse_scalar_outputs(model, str(src.name))
        ctx.inputs, ctx.outputs = describe_io(model)
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        ctx.source_info.update(
            name=src.name, format={"module": "pytorch"}.get(src.kind, src.kind),
            **_hashed(src, path), opset=opset, ir_version=model.ir_version,
            producer=f"{model.producer_name} {model.producer_version}".strip(),
            exporter=result.exporter, torch_version=torch.__version__,
        )
        ctx.extra_manifest["export"] = {
            "form": src.form,
            "model": src.label,
            "exporter": result.exporter,
            "fallback_reason": result.fallback_reason,
            "torch_version": torch.__version__,
            "opset": opset,
            "dynamic_batch": config.dynamic_batch,
            "input_shapes": [list(a.shape) for a in traced.args],
            "input_names": input_names,
            "output_names": output_names,
            "weights": src.weights,
            **({"code_sha256": sha256_file(src.file)} if src.file and src.form != "torchscript"
               and src.form != "exported_program" else {}),
        }
        ctx.float_path = ctx.workdir / "float.onnx"
        shutil.copyfile(path, ctx.float_path)  # later stages may rewrite float.onnx; not this one
        os.chmod(ctx.float_path, 0o600)
        ctx.float_model = model
        ctx.torch_export = ExportRecord(src, path, result.exporter)
        ctx.report(f"  exported with {result.exporter} (opset {opset}): "
                   + ", ".join(f"{i['name']} {i['shape']}" for i in ctx.inputs)
                   + " -> " + ", ".join(f"{o['name']} {o['shape']}" for o in ctx.outputs))


def _hashed(src: Any, exported: Path) -> dict[str, Any]:
    if src.form in ("torchscript", "exported_program") and src.file:
        return {"sha256": sha256_file(src.file), "bytes": src.file.stat().st_size}
    if src.weights:
        return {"sha256": src.weights["sha256"], "bytes": src.weights["bytes"]}
    return {"sha256": sha256_file(exported), "bytes": exported.stat().st_size}
