"""Prune: make the float model smaller before it is calibrated and quantized.

* PyTorch ``nn.Module`` sources: structured pruning (channels removed, counts multiples of
  8), then label-free recovery on the calibration inputs (distillation towards the dense
  model, BatchNorm re-estimation), then a fresh ONNX export that ``check_export`` verifies.
* ONNX sources (and TorchScript / ExportedProgram, which torch-pruning cannot edit):
  unstructured magnitude sparsity on the weights, which pays off in the zip-deflated artifact.

Runs after the ``data`` stage (recovery needs the calibration inputs) and before ``prepare``.
The manifest's ``pruning`` section says what was removed and what accuracy the pruned float
model keeps against the dense one on the validation data.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.runner import compare, run_dataset

from edgekit.errors import UnsupportedModelError, UserError

from ..context import BuildContext
from ..pipeline import Rejected, Stage, StageConfig

DISTILL_MAX_STEPS = 100_000  # with --distill-time: the time budget ends distillation
Precheck = Callable[[Path], bool]  # False: the pruned architecture already misses a budget


def check_ratio(value: Any) -> float:
    try:
        ratio = float(value)
    except (TypeError, ValueError):
        raise UserError(f"--prune expects a ratio in [0, 1) such as 0.3, got {value!r}") from None
    if not 0.0 <= ratio < 1.0:
        raise UserError(f"--prune expects a ratio in [0, 1) such as 0.3, got {ratio:g}")
    return ratio


@dataclass(frozen=True)
class PruneConfig(StageConfig):
    ratio: float = 0.0  # 0: the stage does not run
    finetune_steps: int | None = None  # structured pruning's distillation; None: by model size
    widths: str = "uniform"  # torch sources: "sensitivity" (pruning.widths) or "uniform"
    select: str = "reconstruction"  # torch sources: or "magnitude" (pruning.reconstruct)
    # the budget search's hooks; not part of what makes two prunings equal
    precheck: Precheck | None = field(default=None, compare=False)
    reference: list[np.ndarray] | None = field(default=None, compare=False, repr=False)


class Prune(Stage):
    """Prunes at ``config.ratio``; raises ``Rejected`` when ``config.precheck`` turns the
    pruned architecture down (the context is then left unchanged)."""

    name = "prune"
    Config = PruneConfig
    config: PruneConfig
    requires = frozenset({"calib", "float_path", "inputs", "outputs", "val"})
    provides = frozenset({"extra_manifest", "float_model", "float_path", "torch_export"})

    def configure(self, ctx: BuildContext) -> PruneConfig:
        ratio = check_ratio(ctx.config.prune) if ctx.config.prune else 0.0
        return PruneConfig(ratio, ctx.config.finetune_steps,
                           widths=ctx.config.prune_widths or "uniform",
                           select=ctx.config.prune_select or "reconstruction")

    def applies(self, ctx: BuildContext) -> bool:
        return bool(self.config.ratio)

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        section = ctx.extra_manifest.get("pruning", {})
        return {k: section.get(k) for k in ("method", "ratio", "params_before", "params_after")
                if k in section}

    def run(self, ctx: BuildContext) -> None:
        config = self.config
        if apply_pruning(ctx, config.ratio, config.precheck, config.reference,
                         config.finetune_steps, config.widths, config.select) is None:
            raise Rejected(f"pruning at {config.ratio:g}: the pruned architecture was turned down")


def apply_pruning(ctx: BuildContext, ratio: float, precheck: Precheck | None = None,
                  reference: list[np.ndarray] | None = None,
                  finetune_steps: int | None = None,
                  widths: str = "uniform",
                  select: str = "reconstruction") -> dict[str, Any] | None:
    """Prune ``ctx``'s float model at ``ratio``; returns the manifest section, or None when
    ``precheck`` rejected the pruned architecture (then ``ctx`` is left unchanged)."""
    dense_path = ctx.float_path
    record = ctx.torch_export
    structured = record is not None and record.source.kind == "module"
    if record is not None and not structured:
        ctx.warn(f"structured pruning needs an nn.Module, not a {record.source.kind}; "
                 "using unstructured sparsity on the exported ONNX")
    section = None
    if structured:
        try:
            section = _torch(ctx, ratio, precheck, finetune_steps, widths, select)
        except UnsupportedModelError as exc:
            ctx.warn(f"{exc}; using unstructured sparsity on the exported ONNX instead")
            structured = False
    if not structured:
        section = _onnx(ctx, ratio, precheck)
    if section is None:
        return None
    section["accuracy"] = pruned_accuracy(ctx, dense_path, reference)
    ctx.extra_manifest["pruning"] = section
    acc = section["accuracy"]
    figure = (f"top-1 {acc['dense_float']:.2%} -> {acc['pruned_float']:.2%}"
              if "dense_float" in acc else f"cosine {acc['cosine']:.5f}")
    ctx.report(f"  pruned {ratio:.0%} ({section['method'].split(' ')[0]}): float {figure} "
               f"against the dense model on {acc['samples']} validation samples")
    return section


def pruned_accuracy(ctx: BuildContext, dense_path: Path,
                    reference: list[np.ndarray] | None = None) -> dict[str, Any]:
    """The pruned float model against the dense float model on the validation data."""
    reference = reference if reference is not None else run_dataset(dense_path, ctx.val)
    got = run_dataset(ctx.float_path, ctx.val)
    metrics = compare(reference[0], got[0], ctx.val.labels)
    result: dict[str, Any] = {"samples": len(ctx.val), "cosine": metrics["cosine"]}
    if "accuracy_int8" in metrics:
        result.update(dense_float=metrics["accuracy_float"], pruned_float=metrics["accuracy_int8"])
    if "top1_agreement" in metrics:
        result["top1_agreement"] = metrics["top1_agreement"]
    return result


def _onnx(ctx: BuildContext, ratio: float, precheck: Precheck | None) -> dict[str, Any] | None:
    import onnx

    from ..pruning import sparsify

    model = onnx.load(str(ctx.float_path))
    report = sparsify(model, ratio)
    path = ctx.workdir / "float-sparse.onnx"
    onnx.save_model(model, str(path))
    os.chmod(path, 0o600)
    if precheck is not None and not precheck(path):
        return None
    ctx.float_path, ctx.float_model = path, model
    ctx.report(f"  zeroed {report.zeroed:,} of {report.elements:,} weights in "
               f"{len(report.tensors)} tensor(s)")
    return report.to_dict()


def _example_args(ctx: BuildContext) -> tuple[Any, ...]:
    """Inputs at the traced shapes, taken from the calibration data (real values, right dtype)."""
    import torch

    shapes = ctx.extra_manifest.get("export", {}).get("input_shapes") or [i["shape"] for i in ctx.inputs]
    args = []
    for spec, shape in zip(ctx.inputs, shapes, strict=True):
        data = ctx.calib.arrays[spec["name"]] if ctx.calib is not None else None
        rows = int(shape[0]) if shape and isinstance(shape[0], int) else 1
        if data is not None and len(data) >= rows:
            args.append(torch.from_numpy(np.ascontiguousarray(data[:rows])))
        else:
            args.append(torch.zeros([d if isinstance(d, int) else 1 for d in shape]))
    return tuple(args)


def _export(ctx: BuildContext, module: Any, args: tuple[Any, ...], name: str) -> tuple[Path, str]:
    from ..pytorch.inputs import Traced
    from ..pytorch.onnx_export import export
    from ..pytorch.source import TorchSource

    section = ctx.extra_manifest.get("export", {})
    inputs = section.get("input_names") or [i["name"] for i in ctx.inputs]
    outputs = section.get("output_names") or [o["name"] for o in ctx.outputs]
    src = ctx.torch_export.source
    pruned = TorchSource(module, "module", src.name, src.form, src.file, src.weights, src.info)
    path = ctx.workdir / name
    result = export(pruned, Traced(args, inputs, outputs), path, inputs, outputs,
                    ctx.config.dynamic_batch)
    return path, result.exporter


def _architecture(ctx: BuildContext, module: Any, args: tuple[Any, ...]) -> Path:
    """The pruned architecture as ONNX for the budget precheck's estimate only: the
    TorchScript exporter takes a fraction of a second where the dynamo one (which the
    shipped model goes through) takes seconds, and the search's bisection probes several."""
    import warnings

    import torch

    path = ctx.workdir / "pruned-arch.onnx"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17)
    except Exception:  # noqa: BLE001 - this exporter is only a shortcut; the build's works
        path = _export(ctx, module, args, "pruned-arch.onnx")[0]
    return path


def settle_batchnorm(module: Any, recovery: Any, refit: bool, calib: list[np.ndarray]) -> int:
    """Re-estimate the pruned model's BatchNorm statistics after distillation, where they are
    stale: always after magnitude pruning; after a reconstruction refit only when distillation
    changed the weights. A turned-down distillation hands back the refit weights, whose
    consumers were fit on the dense statistics: re-estimating them anyway took EfficientNet-
    Lite0 at -20% from 31.55% agreement after refit to 24.40% (168 object photos,
    docs/measurements/pruning.md round 6). Returns the layers re-estimated."""
    from ..pruning import reestimate_batchnorm

    if refit and not (recovery.distill_steps and recovery.fell):
        return 0
    return reestimate_batchnorm(module, calib)


def _torch(ctx: BuildContext, ratio: float, precheck: Precheck | None,
           finetune_steps: int | None, widths: str = "uniform",
           select: str = "reconstruction") -> dict[str, Any] | None:
    import onnx

    from ..pruning import distill, prune_structured, reestimate_batchnorm, steps_for
    from ..pruning.for_build import agreement, distill_inputs, plan_for
    from ..pruning.reconstruct import with_selected_only
    from ..pruning.recover import SMALL_MODEL_MACS, macs_per_sample
    from ..pytorch.source import TorchSource
    from .export import ExportRecord

    record = ctx.torch_export
    dense = record.source.model
    args = _example_args(ctx)
    calib = [ctx.calib.arrays[i["name"]] for i in ctx.inputs]
    plan = (plan_for(ctx, dense, args, calib, ratio, select) if widths == "sensitivity"
            else None)
    module, report = prune_structured(dense, args, ratio, None if plan is None else plan.widths)
    if precheck is not None and not precheck(_architecture(ctx, module, args)):
        return None
    stages: dict[str, float] = {}  # agreement with the dense model after each step
    val = [ctx.val.arrays[i["name"]] for i in ctx.inputs if i["name"] in ctx.val.arrays]
    reference = None
    if select == "reconstruction":  # same widths, so the precheck's architecture holds
        module, report = prune_structured(dense, args, ratio,
                                          None if plan is None else plan.widths, calib=calib)
        if report.reconstruction is not None and report.reconstruction.layers and val:
            stages["selected"], reference = agreement(
                with_selected_only(module, report.reconstruction), dense, val)
            stages["refit"], _ = agreement(module, dense, val, reference)
    data, seconds, described = distill_inputs(ctx, calib)
    macs = macs_per_sample(module, args)
    steps = steps_for(macs) if finetune_steps is None else int(finetune_steps)
    if seconds is not None and finetune_steps is None:
        steps = DISTILL_MAX_STEPS  # the time budget bounds it
    # removed channels shift every later BatchNorm's statistics: distilling from stale ones
    # starts far off (MobileNet-style digits net, sensitivity widths: 24% top-1 -> 98% after)
    if report.reconstruction is None:
        reestimate_batchnorm(module, calib)
    # (refit consumers hand the BatchNorms after them their dense statistics back)
    recovery = distill(module, dense, data, steps, seed=ctx.config.seed,
                       threads=1 if macs < SMALL_MODEL_MACS else None, seconds=seconds,
                       progress=not ctx.config.quiet, data=described)
    recovery.batchnorm_layers = settle_batchnorm(module, recovery,
                                                 report.reconstruction is not None, calib)
    if stages and recovery.distill_steps:
        stages["distilled"], _ = agreement(module, dense, val, reference)
    if stages:
        ctx.report("  pruned float agreement with the dense model on "
                   f"{len(val[0])} validation samples: "
                   + ", ".join(f"after {k} {v:.2%}" for k, v in stages.items()))
    path, exporter = _export(ctx, module, args, "pruned.onnx")
    float_path = ctx.workdir / "float-pruned.onnx"
    shutil.copyfile(path, float_path)  # later stages rewrite float_path; check_export reads path
    os.chmod(float_path, 0o600)
    ctx.float_path, ctx.float_model = float_path, onnx.load(str(float_path))
    src = record.source
    ctx.torch_export = ExportRecord(
        TorchSource(module, "module", src.name, src.form, src.file, src.weights, src.info),
        path, exporter)
    changed = {k: v for k, v in report.channels.items() if v[0] != v[1]}
    ctx.report("  channels kept: " + ", ".join(f"{k} {a}->{b}" for k, (a, b) in changed.items())
               + f"; params {report.params_before:,} -> {report.params_after:,}")
    if recovery.distill_steps:
        ctx.report(f"  distilled {recovery.distill_steps} steps towards the dense model on "
                   f"{recovery.data} ({recovery.distill_seconds:.1f} s, held-out loss "
                   f"{recovery.loss_before:.4g} -> {recovery.loss_after:.4g}, stopped: "
                   f"{recovery.stopped}); BatchNorm layers re-estimated: "
                   f"{recovery.batchnorm_layers}")
    if recovery.distill_steps and not recovery.fell:
        ctx.warn(f"distillation stopped: {recovery.stopped}")
    section = {**report.to_dict(), "macs_per_sample": int(macs), "recovery": recovery.to_dict()}
    if stages:
        section["agreement_by_step"] = stages
    if plan is not None:
        section["width_plan"] = plan.to_dict()
    return section
