"""The build's task metric: which one (asked or chosen from the outputs), and one candidate's score.

``BuildMetric.of(config, reference, has_labels)`` resolves ``--metric`` / ``--postprocess``
or picks the default from the float outputs (``metrics.choose_default``) and keeps why.
``BuildMetric.score`` returns the task result plus the figure the accuracy budget bounds:
``drop`` in points (top-1 points, detections lost, CER points, or a user metric's points);
a metric that is not a share (SQNR in dB) falls back to ``(1 - cosine) x 100``, the old rule.
Per-output, per-slice figures (``metrics.slices``) go with it, so the summary and manifest
can name the worst slice rather than one cosine over everything.

Every score carries its evidence (``metrics.evidence``): N and a 95% interval. The budget is
in the units measured (``BuildMetric.budget``): with labels the profile's ``accuracy_drop``
(points of the task's score lost against the labels); without, the profile's
``[budgets.agreement]`` entry for the metric (points of disagreement with float: top-1
decisions changed, float detections lost, CER against float's text, 1 - map IoU, ...).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from edgekit.converters.context import BuildConfig, Dataset
from edgekit.converters.metrics import Metric, MetricResult, choose_default, get_metric
from edgekit.converters.metrics.evidence import Evidence
from edgekit.converters.metrics.slices import OutputReport, validate_outputs, worst_slice

if TYPE_CHECKING:
    from edgekit.converters.context import BuildContext
    from edgekit.converters.tflite.shipped import Shipped

# metrics whose labels are the build data's integer labels ('y' in a .npz, image folders);
# detection and ctc take per-image boxes / sequences the data loader does not produce
LABELLED = ("top1",)
# points of disagreement with float that plain per-channel PTQ stays within on real models,
# when a profile has no [budgets.agreement] entry for the metric (sources in targets/rpi4.toml)
# cells: points of confident-cell F1 lost; YOLOv8n's int8 keeps 83% of float's cells > 0.25 (suite,
# nudenet_320n) while keeping >= 95% of its decoded detections: cells are stricter than boxes
# regions: points of 1 - F1 of a sparse map's regions, the bar of detection (>= 95% of float's objects)
AGREEMENT_DEFAULTS = {"top1": 10.0, "detection": 5.0, "ctc": 2.0, "map_iou": 0.0, "embedding": 5.0,
                      "tags": 2.0, "regression": 5.0, "cells": 20.0, "regions": 5.0, "signal": 10.0}


@dataclass(frozen=True)
class TaskScore:
    result: MetricResult
    drop: float          # points the accuracy budget bounds
    basis: str           # what ``drop`` measures, for messages
    outputs: tuple[OutputReport, ...]
    evidence: Evidence   # ``drop`` with its N and interval
    format: str = "onnx"  # what was run: "tflite" (LiteRT, the shipped .tflite) or "onnx" (exact int8)

    def worst(self) -> dict[str, Any]:
        name, stats = worst_slice(self.outputs)
        return {"output": name, "channels": [stats.start, stats.stop - 1],
                "float_range": [round(stats.low, 6), round(stats.high, 6)],
                "sqnr_db": round(stats.sqnr_db, 2), "decisions_changed": round(stats.decisions_changed, 6),
                "decision": stats.decision}

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"name": r.name, "score": round(r.score, 6), "unit": r.unit, "drop": round(self.drop, 4),
                "basis": self.basis, "float_score": None if r.float_score is None else round(r.float_score, 6),
                "details": {k: round(float(v), 6) for k, v in r.details.items()},
                "evidence": self.evidence.to_dict(), "format": self.format}


def on_output(metric: Metric, index: int) -> Metric:
    """``metric`` judging output ``index`` alone (built-in metrics read their first output)."""
    def judged(reference: list[np.ndarray], candidate: list[np.ndarray], labels: Any = None) -> MetricResult:
        return metric([reference[index]], [candidate[index]], labels)
    return judged


@dataclass(frozen=True)
class BuildMetric:
    name: str
    reason: str
    metric: Metric
    use_labels: bool
    suggest: str = ""  # the --metric that would judge the task (when the default is the signal)
    output: int = 0    # the output the default task metric judges (choose_default read it there)

    @classmethod
    def of(cls, config: BuildConfig, reference: list[np.ndarray], has_labels: bool) -> BuildMetric:
        options: dict[str, object] = {}
        if config.postprocess:
            options["postprocess"] = config.postprocess
        suggest, output = "", 0
        if config.metric:
            name, reason = config.metric, f"--metric {config.metric}"
        else:
            choice = choose_default(reference, has_labels)
            name, reason, suggest, output = choice.name, f"default: {choice.reason}", choice.suggest, choice.output
            if options and name != "detection":
                name, reason, output = "detection", "default: --postprocess given, so detection", 0
        labelled = has_labels and (name in LABELLED or ":" in name)
        metric = get_metric(name, **options)
        return cls(name, reason, on_output(metric, output) if output else metric, labelled, suggest, output)

    def budget(self, profile: Any) -> tuple[float, str]:
        """(limit in points, what it bounds): accuracy with labels, agreement with float without."""
        if self.use_labels:
            return float(profile.budgets.accuracy_drop), "accuracy"
        table = getattr(profile.budgets, "agreement", None) or {}
        if self.name in table:
            return float(table[self.name]), "agreement"
        if self.name in AGREEMENT_DEFAULTS:
            return AGREEMENT_DEFAULTS[self.name], "agreement"
        return float(profile.budgets.accuracy_drop), "agreement"  # sqnr, a user metric: the old rule

    def how_to_choose(self) -> str:
        """For an exit 3: the metric judged and how to pick another."""
        from edgekit.converters.metrics import METRICS

        hint = f" (the outputs suggest --metric {self.suggest})" if self.suggest else ""
        return (f"judged by metric {self.name!r} ({self.reason}); pick another with --metric "
                f"{'|'.join(METRICS)} or module:function{hint}")

    def score(self, reference: list[np.ndarray], candidate: list[np.ndarray], labels: Any,
              names: list[str], cosine: float) -> TaskScore:
        result = self.metric(reference, candidate, labels if self.use_labels else None)
        samples = len(reference[0])
        if result.drop is not None:
            drop = float(result.drop)
            basis = (f"{result.name} points lost against the labels" if self.use_labels
                     else f"{result.name} points of disagreement with float")
        else:
            drop, basis = (1 - cosine) * 100, f"{result.name} is not a share: (1 - cosine) x 100"
        if result.per_sample is not None and result.drop is not None:
            evidence = Evidence.of(result.per_sample)
            drop = evidence.figure
        else:
            evidence = Evidence.point(drop, samples, "no per-sample parts: no interval")
        flat = [[a if a.ndim >= 2 else a.reshape(len(a), -1) for a in arrays] for arrays in (reference, candidate)]
        return TaskScore(result, drop, basis, validate_outputs(flat[0], flat[1], names), evidence)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reason": self.reason, "labels": self.use_labels,
                **({"suggest": self.suggest} if self.suggest else {}),
                **({"output": self.output} if self.output else {})}


class Scorer:
    """The float reference on the validation data, once; then ``score(int8 path)``: in the
    format the build ships (``shipped.Shipped``: its .tflite through LiteRT) when ``shipped``
    is given (``for_build``), else the QDQ graph through onnxruntime (exact int8)."""

    def __init__(self, config: BuildConfig, float_path: Path, val: Dataset, names: list[str],
                 shipped: Shipped | None = None) -> None:
        from edgekit.converters.executor.shards import build_outputs

        self.config = config
        self.val = val
        self.shipped = shipped
        outputs = build_outputs(config, float_path, val)
        names = names if len(names) == len(outputs) else [f"output{i}" for i in range(len(outputs))]
        # scored: the outputs with one row per sample on axis 0, as the runner joins them; an
        # output batched on another axis (silero-vad's recurrent state [2, N, 128]) joins into
        # rows that are not samples, so it would pair wrong samples (left out; all kept if none)
        self.kept = [i for i, out in enumerate(outputs) if out.ndim and out.shape[0] == len(val)] \
            or list(range(len(outputs)))
        self.reference = [outputs[i] for i in self.kept]
        self.names = [names[i] for i in self.kept]
        self.task = BuildMetric.of(config, self.reference, val.labels is not None)

    @classmethod
    def for_build(cls, ctx: BuildContext) -> Scorer:
        """The scorer of a build's accuracy decision: candidates run as the artifact ships them."""
        from edgekit.converters.tflite.shipped import Shipped

        return cls(ctx.config, ctx.float_path, ctx.val, [o["name"] for o in ctx.outputs], Shipped(ctx))

    def score(self, path: Path, keep_float: Iterable[str] | None = None,
              ranges: Path | None = None) -> tuple[dict[str, float], TaskScore]:
        """Cosine figures of the first output (others' cosine too) and the task score.
        ``keep_float`` and ``ranges`` (the calibration cache) are what the .tflite writer takes."""
        from dataclasses import replace

        from edgekit.converters.core.runner import compare
        from edgekit.converters.executor.shards import build_outputs

        if self.shipped is not None:
            every, judged = self.shipped.outputs(path, self.val, keep_float, ranges)
        else:
            every, judged = build_outputs(self.config, path, self.val, exact_int8=True), "onnx"
        outputs = [every[i] for i in self.kept]
        labels = self.val.labels
        metrics = compare(self.reference[0], outputs[0], labels)
        for extra, (ref, got) in enumerate(zip(self.reference[1:], outputs[1:], strict=True), 1):
            metrics[f"output{extra}_cosine"] = compare(ref, got)["cosine"]
        score = self.task.score(self.reference, outputs, labels, self.names, metrics["cosine"])
        return metrics, replace(score, format=judged)
