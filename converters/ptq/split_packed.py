"""Packed outputs: find them on calibration data and name the Concat to keep float.

An output that concatenates ranges one int8 scale cannot hold together (YOLO-style boxes in
pixels beside 0..1 class scores, ``metrics/packed.py``) loses its small-range branch under
one shared scale. Keeping the Concat that joins the branches in float (``nodes_to_exclude``)
leaves each branch quantized at its producer's own scale, so the scores keep their 256 steps;
the Concat itself only copies values, so it costs nothing at run time worth measuring.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.converters.context import Dataset
from edgekit.converters.metrics.packed import SplitPlan, plan_splits

SAMPLES = 64  # calibration samples the float outputs are read on: ranges settle quickly


@dataclass(frozen=True)
class PackedSplit:
    output: str
    concat: str | None   # the Concat kept float; None: no Concat found, not split
    reason: str
    branches: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"output": self.output, "split": self.concat is not None, "concat_kept_float": self.concat,
                "reason": self.reason, "branches": list(self.branches), "line": self.line()}

    def line(self) -> str:
        if self.concat is None:
            return (f"packed output {self.output!r} NOT split (no Concat feeding it was found): "
                    f"{self.reason}")
        ranges = ", ".join(f"{b['producer']} channels {b['start']}..{b['stop'] - 1}" for b in self.branches)
        return (f"packed output {self.output!r} split: Concat {self.concat!r} kept float so each "
                f"branch has its own scale ({ranges}); {self.reason}")


def _as_split(plan: SplitPlan) -> PackedSplit:
    concat = plan.concat
    branches = () if concat is None else tuple(
        {"input": b.input_name, "producer": b.producer, "start": b.start, "stop": b.stop}
        for b in concat.branches)
    return PackedSplit(plan.report.name, concat.concat_node if concat else None, plan.report.reason, branches)


def find_packed_outputs(float_path: Path, calib: Dataset, bits: int = 8) -> list[PackedSplit]:
    """The packed outputs of the float model at ``float_path`` on (part of) ``calib``."""
    import onnx
    from edgekit.converters.core.runner import run_dataset

    model = onnx.load(str(float_path))
    names = [o.name for o in model.graph.output]
    subset = calib.take(slice(0, min(SAMPLES, len(calib))))
    reference = run_dataset(float_path, subset)
    plans = []
    for output, name in zip(reference, names, strict=True):
        if output.ndim < 2:
            continue  # per-sample scalars: nothing to slice
        plans.extend(plan_splits([output], [name], model, bits))
    return [_as_split(p) for p in plans]
