"""Prepare the float model for quantization: shape inference and onnxruntime's pre-processing
(constant folding, BatchNorm fusion), which makes calibration ranges match the fused graph;
then every node gets a name of its own (``graph_names.name_nodes``)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from ..context import BuildContext
from ..graph_names import name_nodes
from ..pipeline import Stage


class Prepare(Stage):
    name = "prepare"
    requires = frozenset({"float_model", "float_path"})
    provides = frozenset({"float_model", "float_path"})

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, Any] = {}

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.used

    def run(self, ctx: BuildContext) -> None:
        import onnx
        from onnxruntime.quantization.shape_inference import quant_pre_process

        src = ctx.float_path
        dst = ctx.workdir / "prepared.onnx"
        logging.getLogger("onnxruntime").setLevel(logging.ERROR)
        # Symbolic shape inference fails on some exporter outputs; plain ONNX inference is
        # then enough for quantization, so retry without it rather than stop the build.
        for symbolic in (True, False):
            try:
                # onnxruntime's symbolic shape inference, when it gives up, saves
                # sym_shape_infer_temp.onnx and a <uuid>.data into the working directory:
                # make that the build's own temp folder (the user's may be read-only)
                with contextlib.chdir(ctx.workdir):
                    quant_pre_process(str(src), str(dst), skip_symbolic_shape=not symbolic,
                                      skip_optimization=False, skip_onnx_shape=False)
                self.used = {"quant_pre_process": True, "symbolic_shape_inference": symbolic}
                break
            except Exception as exc:  # noqa: BLE001 - both are attempts; the last one reports
                last = exc
        else:
            ctx.warn(f"onnxruntime pre-processing failed ({last}); using shape inference only")
            model = onnx.shape_inference.infer_shapes(ctx.float_model)
            onnx.save_model(model, str(dst))
            self.used = {"quant_pre_process": False, "error": str(last)[:200]}
        model = onnx.load(str(dst))
        # every node addressable by name from here on (the guard's --keep-float, the int16
        # rung, the layer report): the pre-processing leaves the nodes it inlines unnamed
        named = name_nodes(model.graph)
        if named:
            onnx.save_model(model, str(dst))
            self.used["named_nodes"] = named
        ctx.float_path = dst
        ctx.float_model = model
