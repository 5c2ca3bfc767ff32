"""Stages and the pipeline that runs them over a ``BuildContext``.

A stage is a small class with one job. It declares its ``name``, says which parameters
it used (recorded in the manifest) and does its work in ``run``. Heavy imports (onnx,
onnxruntime, torch) happen inside ``run``, never at module import time.
"""

from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from typing import Any

from edgekit.errors import EdgekitError, InternalError, UserError

from .context import BuildContext

# name -> "module:Class" (lazy, so listing stages imports nothing heavy)
STAGES: dict[str, str] = {
    "load": "edgekit.converters.stages.load:LoadOnnx",
    "export": "edgekit.converters.stages.export:ExportTorch",
    "prepare": "edgekit.converters.stages.prepare:Prepare",
    "data": "edgekit.converters.stages.data:LoadData",
    "check_export": "edgekit.converters.stages.check_export:CheckExport",
    "prune": "edgekit.converters.stages.prune:Prune",
    "calibrate": "edgekit.converters.stages.calibrate:Calibrate",
    "quantize": "edgekit.converters.stages.quantize:Quantize",
    "validate": "edgekit.converters.stages.validate:Validate",
    "convert_tflite": "edgekit.converters.stages.convert_tflite:ConvertTflite",
    "estimate": "edgekit.converters.stages.estimate:Estimate",
    "package": "edgekit.converters.stages.package:Package",
}


class Stage(ABC):
    """One step of a build."""

    name: str = ""

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        """Parameters this stage ran with, for the manifest."""
        return {}

    def applies(self, ctx: BuildContext) -> bool:
        """False to skip this stage for this build (e.g. tflite conversion for onnx-only)."""
        return True

    @abstractmethod
    def run(self, ctx: BuildContext) -> None:
        """Do the work, reading and writing ``ctx``."""


def stage(name: str) -> Stage:
    """Instantiate a registered stage by name."""
    if name not in STAGES:
        raise InternalError(f"unknown stage {name!r}; registered: {', '.join(STAGES)}")
    module, _, cls = STAGES[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


class Pipeline:
    """Runs stages in order, timing each and recording its parameters in the context."""

    def __init__(self, names: list[str]) -> None:
        self.stages = [stage(n) for n in names]

    def run(self, ctx: BuildContext) -> BuildContext:
        for step in self.stages:
            if not step.applies(ctx):
                continue
            ctx.report(f"[{step.name}] ...")
            start = time.perf_counter()
            try:
                step.run(ctx)
            except EdgekitError:
                raise
            except MemoryError as exc:
                raise UserError(f"stage {step.name}: out of memory ({exc})") from exc
            except Exception as exc:
                raise InternalError(
                    f"stage {step.name} failed unexpectedly: {type(exc).__name__}: {exc}"
                ) from exc
            seconds = time.perf_counter() - start
            ctx.stages.append({"name": step.name, "params": step.params(ctx),
                               "seconds": round(seconds, 3)})
        return ctx
