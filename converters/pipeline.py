"""Stages, the one stage order, and the pipeline that runs stages over a ``BuildContext``.

A stage is a small class with one job, in the manner of Olive's passes: it declares its
``name``, the context fields it ``requires`` and ``provides``, and a typed ``Config`` (a
frozen dataclass) that ``configure`` derives from the ``BuildConfig``; a caller (the budget
search) may hand it another config instead. It says which parameters it used (recorded in
the manifest) and does its work in ``run``. Heavy imports (onnx, onnxruntime, torch) happen
inside ``run``, never at module import time.

The order is written once, in ``STAGES``; ``plan`` picks a build's stages from it, and
``Pipeline`` checks before running anything that every stage's requirements are provided
by the context or by a stage before it.
"""

from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from edgekit.converters.graph.check import check_stage

from edgekit.errors import EdgekitError, InternalError, UserError

from .context import BuildContext

# The stage order, written once: name -> "module:Class" (lazy, so listing stages imports
# nothing heavy). This is the order of a build that prunes; see ``plan`` for the others.
STAGES: dict[str, str] = {
    "load": "edgekit.converters.stages.load:LoadOnnx",
    "export": "edgekit.converters.stages.export:ExportTorch",
    "data": "edgekit.converters.stages.data:LoadData",
    "pin": "edgekit.converters.stages.pin:PinShapes",
    "prune": "edgekit.converters.stages.prune:Prune",
    "prepare": "edgekit.converters.stages.prepare:Prepare",
    "check_export": "edgekit.converters.stages.check_export:CheckExport",
    "equalize": "edgekit.converters.stages.equalize:Equalize",
    "narrow_outputs": "edgekit.converters.stages.narrow_outputs:NarrowOutputs",
    "calibrate": "edgekit.converters.stages.calibrate:Calibrate",
    "quantize": "edgekit.converters.stages.quantize:Quantize",
    "validate": "edgekit.converters.stages.validate:Validate",
    "accuracy_decision": "edgekit.converters.search.decision_stages:AccuracyDecision",
    "speed_choice": "edgekit.converters.search.decision_stages:SpeedChoice",
    "layer_speed": "edgekit.converters.search.decision_stages:LayerSpeed",
    "convert_tflite": "edgekit.converters.stages.convert_tflite:ConvertTflite",
    "estimate": "edgekit.converters.stages.estimate:Estimate",
    "package": "edgekit.converters.stages.package:Package",
}


@dataclass(frozen=True)
class StageConfig:
    """A stage's knobs. Stages without any use this empty one; equal configs mean equal
    work, which lets the budget search reuse a stage's result (``search/cache.py``)."""


class Stage(ABC):
    """One step of a build."""

    name: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()  # BuildContext fields read
    provides: ClassVar[frozenset[str]] = frozenset()  # BuildContext fields written
    Config: ClassVar[type[StageConfig]] = StageConfig

    def __init__(self) -> None:
        self.config: StageConfig = StageConfig()

    def configure(self, ctx: BuildContext) -> StageConfig:
        """This stage's config for a plain build, from the user's ``BuildConfig``."""
        return self.Config()

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        """Parameters this stage ran with, for the manifest."""
        return {}

    def applies(self, ctx: BuildContext) -> bool:
        """False to skip this stage for this build (e.g. tflite conversion for onnx-only)."""
        return True

    @abstractmethod
    def run(self, ctx: BuildContext) -> None:
        """Do the work, reading ``requires`` and writing ``provides`` of ``ctx``."""


class Rejected(Exception):  # noqa: N818 - a verdict, not a failure
    """A stage declined its input (e.g. a pruned architecture over a budget); the caller
    that asked for the check decides what follows. Never reaches the user."""


def stage_class(name: str) -> type[Stage]:
    if name not in STAGES:
        raise InternalError(f"unknown stage {name!r}; registered: {', '.join(STAGES)}")
    module, _, cls = STAGES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def stage(name: str) -> Stage:
    """Instantiate a registered stage by name."""
    return stage_class(name)()


@dataclass(frozen=True)
class Plan:
    """The stages one build runs, in order (a selection of ``STAGES``)."""

    names: tuple[str, ...]

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def until(self, name: str) -> tuple[str, ...]:
        """The stages up to and including ``name``."""
        return self.names[:self.names.index(name) + 1]

    def after(self, name: str) -> tuple[str, ...]:
        """The stages after ``name``."""
        return self.names[self.names.index(name) + 1:]

    def before(self, name: str) -> str:
        """The stage right before ``name``."""
        return self.names[self.names.index(name) - 1]


# taken by a plain build after validate; a budget-fitting search takes them among its candidates
DECISIONS = ("accuracy_decision", "speed_choice", "layer_speed")


def plan(source_kind: str, prune: bool, search: bool = False) -> Plan:
    """The stages of a build of an ``onnx`` or ``torch`` source, pruning or not, searching or not.

    ``prepare`` always follows ``pin``: the symbolic dims are pinned from the calibration
    data first, so that onnxruntime's optimizer in ``prepare`` folds the shape subgraphs.
    ``convert_tflite`` is always planned and skips itself when no tflite ships.
    """
    skip = {"export" if source_kind == "onnx" else "load"}
    if source_kind == "onnx":
        skip.add("check_export")  # exported ONNX vs torch: torch sources only
    if not prune:
        skip.add("prune")
    if search:
        skip.update(DECISIONS)
    return Plan(tuple(n for n in STAGES if n not in skip))


def check_order(names: Iterable[str], available: frozenset[str]) -> None:
    """Every stage's requirements are available before it runs; else an ``InternalError``
    naming the stage and what it lacks (a wrong plan is a bug, not bad input)."""
    have = set(available)
    for name in names:
        cls = stage_class(name)
        missing = sorted(cls.requires - have)
        if missing:
            raise InternalError(f"stage {name!r} requires {', '.join(missing)}, which no "
                                f"stage before it provides (available: {', '.join(sorted(have))})")
        have |= cls.provides


class Pipeline:
    """Runs stages in order, timing each and recording its parameters in the context."""

    def __init__(self, names: Iterable[str],
                 configs: Mapping[str, StageConfig] | None = None) -> None:
        self.stages = [stage(n) for n in names]
        self.configs = dict(configs or {})

    def run(self, ctx: BuildContext) -> BuildContext:
        check_order([s.name for s in self.stages], ctx.available())
        for step in self.stages:
            step.config = self.configs.get(step.name) or step.configure(ctx)
            if not step.applies(ctx):
                continue
            ctx.report(f"[{step.name}] ...")
            start = time.perf_counter()
            try:
                step.run(ctx)
            except (EdgekitError, Rejected):
                raise
            except MemoryError as exc:
                raise UserError(f"stage {step.name}: out of memory ({exc})") from exc
            except Exception as exc:
                raise InternalError(
                    f"stage {step.name} failed unexpectedly: {type(exc).__name__}: {exc}"
                ) from exc
            seconds = time.perf_counter() - start
            check_stage(step.name, ctx)  # EDGEKIT_CHECK_GRAPHS=1 (tests): the models it wrote are valid
            ctx.mark(step.name, *step.provides)
            ctx.stages.append({"name": step.name, "params": step.params(ctx),
                               "seconds": round(seconds, 3)})
            ctx.timings.seconds[f"stages.{step.name}"] = round(seconds, 3)  # package's too
        return ctx
