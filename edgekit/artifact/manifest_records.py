"""The records of a ``.edgekit`` manifest: frozen dataclasses, one per section.

``edgekit/artifact/manifest.py`` builds them from ``manifest.json`` (``Manifest.from_dict``) through the
field parsers in ``edgekit/artifact/manifest_fields.py``; kept apart so that code which only reads a
record (verify, inspect, the host's package stage) sees the shapes without the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgekit.targets import Profile

# a layer's arithmetic width in ``layers[]``: int16 is 16-bit activations with int8 weights
PRECISIONS = ("int8", "int16", "fp16", "float")

@dataclass(frozen=True)
class TargetInfo:
    """The board the artifact was built for, with the full profile used."""

    name: str
    sha256: str
    profile: Profile


@dataclass(frozen=True)
class CalibratedRange:
    """``inputs[].calibration`` / ``outputs[].calibration``: the float range the tensor's
    int8 grid holds (what int8 clips), its channel axis (inputs; None: one channel) and the
    share of the build's validation values outside it, per channel (outputs: at its limits,
    one share). The drift watch (``edgekit/numerics/drift.py``) counts against it. Optional: older
    artifacts derive the range from ``quantization``."""

    low: float
    high: float
    channel_axis: int | None = None
    baseline: tuple[float, ...] = ()
    samples: int = 0  # validation samples the baseline was measured on


@dataclass(frozen=True)
class TensorEntry:
    """One ``inputs[]`` / ``outputs[]`` entry. ``data`` is the entry as stored (backends and
    ``TensorSpec`` read optional keys such as ``quantization`` from it)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    layout: str
    preprocess: dict[str, Any] | None
    labels: tuple[str, ...] | None
    data: dict[str, Any] = field(repr=False, compare=False)
    calibration: CalibratedRange | None = None


@dataclass(frozen=True)
class ModelEntry:
    """One ``models[]`` entry: a model file, its format and the runtime it was checked on."""

    format: str
    path: str
    runtime: str
    bytes: int | None  # the model file's size as built (None: not stated)
    data: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class OutputTolerance:
    """What ``verify`` accepts for one output, over all test vectors of a format: at least
    ``within_1_step`` of the elements within one quantization step of the stored value, none
    further than ``max_steps``, and every channel slice (``slices`` along ``axis``) at least
    ``min_sqnr_db`` against the stored output (a float-space check: an error spread over a
    whole slice fails it even when each element is within the step bounds).

    ``float_step``: for a float output computed from int8 layers (the guard kept its tail
    float), the step the bounds count in: the largest change one quantization step at the
    last int8 tensors makes in the output (``converters/metrics/float_tail.py``). None: a
    float output keeps the tight relative tolerance (a pure float graph)."""

    within_1_step: float
    max_steps: float
    min_sqnr_db: float | None = None
    axis: int = 1
    slices: tuple[tuple[int, int], ...] = ()
    float_step: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"within_1_step": self.within_1_step, "max_steps": self.max_steps,
               "min_sqnr_db": self.min_sqnr_db, "axis": self.axis,
               "slices": [list(s) for s in self.slices]}
        if self.float_step is not None:
            out["float_step"] = self.float_step
        return out


# artifacts from before per-output tolerances: every element within one step
ONE_STEP = OutputTolerance(within_1_step=1.0, max_steps=1.0)


@dataclass(frozen=True)
class TestVectorsEntry:
    path: str
    count: int
    tolerance: float | str  # a number, or how verify derives it ("1 quantization step ...")
    outputs: dict[str, OutputTolerance] = field(default_factory=dict)  # output name -> bounds
    basis: str = ""  # where the bounds come from (the study, the model's depth)
    # ``--golden-on``: the expected outputs were computed under this target's emulated CPU
    # ({"target", "cpu", "part"}); on a CPU with that part they must match exactly
    golden: dict[str, str] = field(default_factory=dict)

    def for_output(self, name: str) -> OutputTolerance:
        return self.outputs.get(name, ONE_STEP)


@dataclass(frozen=True)
class LayerEntry:
    """One ``layers[]`` entry: a compute layer of the shipped model, the precision it runs in
    and the SQNR of its output against the float model (None: not measured), with why it
    runs wider than int8 when the build knows."""

    name: str
    op: str
    precision: str
    sqnr_db: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "op": self.op, "precision": self.precision,
                                 "sqnr_db": self.sqnr_db}
        if self.reason:
            entry["reason"] = self.reason
        return entry


@dataclass(frozen=True)
class PruningEntry:
    """What pruning removed: the width kept per layer (``channels``: before, after) and how
    the widths were chosen (``uniform``, ``sensitivity``; ``sparsity`` for ONNX sources)."""

    method: str
    ratio: float
    widths: str
    channels: dict[str, tuple[int, int]]
