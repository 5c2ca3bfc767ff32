"""Drift watch: the share of input values int8 clips and of output values at the int8 limits.

An int8 model holds each input on a grid fixed at build time from the calibration data. A
camera's exposure, a microphone's gain or a new sensor moves values outside that range; the
quantizer clips them without an error and accuracy falls. The build records each input's
calibrated range (``inputs[].calibration``: the range the int8 grid holds, the channel axis,
and the share of the build's validation values outside it, per channel) and each output's
(``outputs[].calibration``: the share at the grid's limits). Older artifacts carry only
``quantization``; the range is derived from it (baseline 0).

Counting costs almost nothing on the hot path:

* a quantized LiteRT input: the input write already takes the min and max of the scaled
  input to decide whether to clip (``backends/tflite_io.py``); an input in range costs the
  watch one integer add. Only when something clips is it counted (every such run of the
  first :data:`EXACT_RUNS`, then one in :data:`CLIP_EVERY`, standing for the others), per
  channel, on a strided sample of at most
  :data:`SAMPLE_VALUES` values per channel, scaled to the whole input.
* any other input (onnxruntime, a float-I/O .tflite): every observed run (the runs
  ``stats()`` times) when it is at most one sample, else one in :data:`INPUT_EVERY`.
* outputs: one observed run in :data:`OUTPUT_EVERY`, at most :data:`SAMPLE_VALUES` values.

A share is "outside the calibrated range" for inputs (what int8 clips) and "at the int8
limits" (within half a step of the lowest or highest code) for outputs. A warning names the
input and channel (or output) whose share exceeds the build's baseline by more than the
threshold (``edgekit.load(drift_threshold=)``, default :data:`DEFAULT_THRESHOLD`), once at
least :data:`MIN_VALUES` values were counted. Counters are updated without a lock from
every thread that runs the model: statistics, not ledgers (a race may lose a count).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.numerics.clip_counts import (
    SAMPLE_VALUES,
    channel_axis,
    grid_range,
    outside_counts,
    sample_view,
)

if TYPE_CHECKING:
    from edgekit.artifact.manifest import Manifest, ModelEntry, TensorEntry

DEFAULT_THRESHOLD = 0.01  # 1% more values clipped than the build's validation data had
INPUT_EVERY = 16  # inputs larger than a sample, not counted by the write: 1 observed run in 16
# clipped runs of the LiteRT write counted (standing for the others) and observed runs whose
# outputs are counted: 1 in 16 and 1 in 8 (~30 us a count on a 224x224x3 image here; a 3.4 ms
# predict's 1% is 34 us). Every clipped run is still counted in ``clipped_runs``.
CLIP_EVERY = 16
OUTPUT_EVERY = 8
EXACT_RUNS = 64  # ... after the first 64 (a few images through `edgekit run`: all counted)
MIN_VALUES = 512  # values per input/output counted before a warning can be given


@dataclass(frozen=True)
class Watched:
    """One tensor's calibrated range in float units, as the watch counts against it."""

    name: str
    low: float
    high: float
    step: float  # the int8 step (scale): outputs within half of it of a limit are at it
    channel_axis: int | None = None
    channels: int = 1
    baseline: tuple[float, ...] = ()  # the build's share, per channel (outputs: one)

    def baseline_of(self, channel: int) -> float:
        if not self.baseline:
            return 0.0
        return self.baseline[channel] if channel < len(self.baseline) else self.baseline[0]


def sample_weight(n: int, every: int) -> int:
    """The weight of the ``n``-th run (1-based) when the first EXACT_RUNS are all counted
    and then one in ``every``, standing for the ``every`` runs from it: 1, ``every`` or 0
    (not counted). Weighting each counted run by what it stands for keeps the totals
    unbiased when the inputs change over time (a denser early phase must not outweigh)."""
    if n <= EXACT_RUNS:
        return 1
    return every if (n - EXACT_RUNS) % every == 1 or every == 1 else 0


class InputCounter:
    """What int8 clipped of one input, per channel (estimated counts, scaled up from the
    sample) over every value seen. Fed by the LiteRT input write (``values`` += size on
    every run, ``clipped_codes`` when something clipped) or by ``observe`` (sampled runs)."""

    __slots__ = ("tensor", "values", "clipped", "clipped_runs", "runs", "counted_by",
                 "write_runs", "write_clipped", "sparse_clipped", "sparse_counted", "paused")

    def __init__(self, tensor: Watched) -> None:
        self.tensor = tensor
        self.values = 0  # values seen (all of them on the write path; observed runs' else)
        self.clipped = np.zeros(tensor.channels, dtype=np.float64)  # observed runs
        self.clipped_runs = 0  # observed runs that clipped
        self.runs = 0  # observed runs (the sampled path)
        self.counted_by = "sampled runs"
        # the write path: every run that clipped; what the first EXACT_RUNS of them clipped;
        # what the ones counted after those clipped, and how many were counted
        self.write_runs = 0
        self.write_clipped = np.zeros(tensor.channels, dtype=np.float64)
        self.sparse_clipped = np.zeros(tensor.channels, dtype=np.float64)
        self.sparse_counted = 0
        self.paused = False  # runs that are not inputs (the batcher's probe): not counted

    def axis_of(self, array: np.ndarray) -> int | None:
        """The channel axis of ``array``: the manifest's, or the last one for an input
        handed over in NHWC (a .tflite laid out NHWC takes it so)."""
        axis, channels = self.tensor.channel_axis, self.tensor.channels
        if axis is None or channels <= 1:
            return None
        if axis < array.ndim and array.shape[axis] == channels:
            return axis
        if array.ndim and array.shape[-1] == channels:
            return array.ndim - 1
        return None

    def _count(self, array: np.ndarray, low: float, high: float) -> np.ndarray:
        """Values of ``array`` outside [low, high] per channel, estimated from a sample."""
        axis = self.axis_of(array)
        view = sample_view(array, axis)
        counts, per = outside_counts(view, low, high, axis)
        whole = array.size / max(1, counts.size)  # values per channel in the whole input
        scaled = counts * (whole / max(1, per))
        if counts.size != self.clipped.size:  # layout unknown: the tensor's share
            scaled = np.full(self.clipped.size, scaled.sum() / max(1, self.clipped.size))
        return scaled

    def clipped_codes(self, scaled: np.ndarray, low: float, high: float) -> None:
        """The LiteRT write found values outside its codes [low, high] (``scaled`` is the
        input divided by its scale, before the clip): count them per channel on one such
        run in CLIP_EVERY after the first EXACT_RUNS (their mean stands for the runs of that
        phase: the early, dense phase does not outweigh it)."""
        self.write_runs += 1
        weight = sample_weight(self.write_runs, CLIP_EVERY)
        if weight:
            try:
                counts = self._count(scaled, low, high)
            except Exception:  # noqa: BLE001 - the watch must never fail a run
                return
            if weight == 1 and self.write_runs <= EXACT_RUNS:
                self.write_clipped += counts
            else:
                self.sparse_clipped += counts
                self.sparse_counted += 1

    def observe(self, array: np.ndarray, weight: int = 1) -> None:
        """One sampled run, standing for ``weight`` runs."""
        self.runs += 1
        self.values += array.size * weight
        counts = self._count(array, self.tensor.low, self.tensor.high)
        self.clipped += weight * counts
        self.clipped_runs += bool(counts.any())

    def observe_pixels(self, frame: np.ndarray, clips: np.ndarray, weight: int = 1) -> None:
        """A uint8 camera frame (channels last) that went through the LiteRT pixel table:
        ``clips`` [C, 256] marks the pixel values the table clips, counted on a sample of
        pixels."""
        channels = clips.shape[0]
        pixels = frame.reshape(-1, channels)
        stride = max(1, math.ceil(pixels.shape[0] / SAMPLE_VALUES))
        sample = pixels[::stride]
        counts = np.array([np.count_nonzero(clips[c].take(sample[:, c]))
                           for c in range(channels)], dtype=np.float64)
        scaled = counts * (pixels.shape[0] / max(1, sample.shape[0]))
        if scaled.size != self.clipped.size:
            scaled = np.full(self.clipped.size, scaled.sum() / max(1, self.clipped.size))
        self.runs += 1
        self.values += frame.size * weight
        self.clipped += weight * scaled
        self.clipped_runs += bool(counts.any())

    def shares(self) -> list[float]:
        per = self.values / max(1, self.tensor.channels)
        clipped = self.clipped + self.write_clipped
        if self.sparse_counted:
            clipped = clipped + self.sparse_clipped * (
                (self.write_runs - EXACT_RUNS) / self.sparse_counted)
        return [float(c) / per if per else 0.0 for c in clipped]


class OutputCounter:
    """Values of one output within half a step of its int8 grid's limits."""

    __slots__ = ("tensor", "values", "at_limits")

    def __init__(self, tensor: Watched) -> None:
        self.tensor = tensor
        self.values = 0
        self.at_limits = 0

    def observe(self, array: np.ndarray, weight: int = 1) -> None:
        flat = array.reshape(-1)
        if flat.size > SAMPLE_VALUES:
            flat = flat[::math.ceil(flat.size / SAMPLE_VALUES)]
        half = 0.5 * self.tensor.step
        self.at_limits += weight * (np.count_nonzero(flat <= self.tensor.low + half)
                                    + np.count_nonzero(flat >= self.tensor.high - half))
        self.values += weight * flat.size

    def share(self) -> float:
        return self.at_limits / self.values if self.values else 0.0


class DriftWatch:
    """The counters of one model's inputs and outputs, their report and warnings."""

    def __init__(self, inputs: list[Watched], outputs: list[Watched | None],
                 threshold: float = DEFAULT_THRESHOLD) -> None:
        self.threshold = float(threshold)
        self.inputs = {t.name: InputCounter(t) for t in inputs}
        self.outputs = [OutputCounter(t) if t is not None else None for t in outputs]
        self._sampled = list(self.inputs.values())  # inputs the backend's write does not count
        self._observed = 0
        self.errors = 0
        self._paused = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Runs inside are not the device's inputs (the batcher's per-row probe runs random
        rows): neither the sampled path nor the LiteRT write counts them."""
        self._paused = True
        for counter in self.inputs.values():
            counter.paused = True
        try:
            yield
        finally:
            self._paused = False
            for counter in self.inputs.values():
                counter.paused = False

    @classmethod
    def for_model(cls, spec: Manifest, entry: ModelEntry,
                  threshold: float = DEFAULT_THRESHOLD) -> DriftWatch | None:
        """The watch for a loaded model, or None when no input or output is quantized."""
        inputs = [w for w in (_watched(t, t.data.get("quantization")) for t in spec.inputs)
                  if w is not None]
        model_q = entry.data.get("outputs_quantization") or {}
        outputs = [_watched(t, model_q.get(t.name) or t.data.get("quantization"), output=True)
                   for t in spec.outputs]
        if not inputs and not any(outputs):
            return None
        return cls(inputs, outputs, threshold)

    def attach(self, counted_by_backend: frozenset[str]) -> None:
        """The live backend counts these inputs itself (its input write): ``observe``
        leaves them out."""
        for name, counter in self.inputs.items():
            counter.counted_by = "input write" if name in counted_by_backend else "sampled runs"
        self._sampled = [c for n, c in self.inputs.items() if n not in counted_by_backend]

    def observe(self, feeds: Mapping[str, np.ndarray] | None, results: Sequence[np.ndarray]
                ) -> None:
        """One run's inputs (when not counted by the write; one run in INPUT_EVERY) and
        outputs. Never raises: a failure is counted in ``errors``."""
        if self._paused:
            return
        try:
            self._observed += 1
            n = self._observed
            if feeds is not None and self._sampled:
                large = sample_weight(n, INPUT_EVERY)
                for counter in self._sampled:
                    value = feeds.get(counter.tensor.name)
                    if value is None or value.dtype.kind != "f":
                        continue
                    weight = 1 if value.size <= SAMPLE_VALUES else large
                    if weight:
                        counter.observe(value, weight)
            weight = sample_weight(n, OUTPUT_EVERY)
            if weight:
                for counter, value in zip(self.outputs, results, strict=False):
                    if counter is not None:
                        counter.observe(value, weight)
        except Exception:  # noqa: BLE001 - the watch must never fail a run
            self.errors += 1

    def observe_pixels(self, name: str, frame: np.ndarray, clips: np.ndarray | None,
                       results: Sequence[np.ndarray]) -> None:
        """A camera frame's run through the LiteRT pixel table (``Model.predict_pixels``):
        the frame counted on the same sampled runs as other inputs, and the outputs."""
        counter = self.inputs.get(name)
        weight = sample_weight(self._observed + 1, INPUT_EVERY)  # observe() counts the run
        if clips is not None and counter is not None and weight:
            try:
                counter.observe_pixels(frame, clips, weight)
            except Exception:  # noqa: BLE001 - the watch must never fail a run
                self.errors += 1
        self.observe(None, results)

    def warnings(self) -> list[str]:
        """One line per input channel or output whose share exceeds its build baseline by
        more than the threshold (after MIN_VALUES values)."""
        lines = []
        for name, counter in self.inputs.items():
            if counter.values < MIN_VALUES:
                continue
            t = counter.tensor
            for channel, share in enumerate(counter.shares()):
                base = t.baseline_of(channel)
                if share - base > self.threshold:
                    where = f" channel {channel}" if t.channel_axis is not None else ""
                    lines.append(
                        f"input {name!r}{where}: {100 * share:.2f}% of values outside the "
                        f"calibrated range [{t.low:.4g}, {t.high:.4g}] (int8 clips them; "
                        f"{100 * base:.2f}% at build, threshold +{100 * self.threshold:g}%)")
        for counter in self.outputs:
            if counter is None or counter.values < MIN_VALUES:
                continue
            t, share = counter.tensor, counter.share()
            base = t.baseline_of(0)
            if share - base > self.threshold:
                lines.append(f"output {t.name!r}: {100 * share:.2f}% of values at the int8 "
                             f"limits [{t.low:.4g}, {t.high:.4g}] ({100 * base:.2f}% at build, "
                             f"threshold +{100 * self.threshold:g}%)")
        return lines

    def info(self) -> dict[str, Any]:
        """``stats()["drift"]``: per input and channel, per output, and the warnings."""
        inputs = {}
        for name, c in self.inputs.items():
            shares = c.shares()
            inputs[name] = {
                "range": [c.tensor.low, c.tensor.high], "channel_axis": c.tensor.channel_axis,
                "share": round(sum(shares) / max(1, len(shares)), 6),
                "channels": [round(s, 6) for s in shares],
                "baseline": [round(c.tensor.baseline_of(i), 6) for i in range(len(shares))],
                "values": int(c.values), "clipped_runs": int(c.clipped_runs + c.write_runs),
                "counted_by": c.counted_by}
        outputs = {c.tensor.name: {"range": [c.tensor.low, c.tensor.high],
                                   "at_limits": round(float(c.share()), 6),
                                   "baseline": round(c.tensor.baseline_of(0), 6),
                                   "values": int(c.values)}
                   for c in self.outputs if c is not None}
        return {"threshold": self.threshold, "inputs": inputs, "outputs": outputs,
                "warnings": self.warnings(), "errors": self.errors}


def _watched(tensor: TensorEntry, quantization: Mapping[str, Any] | None,
             output: bool = False) -> Watched | None:
    """A tensor's range from its ``calibration`` record, else from its quantization."""
    found = grid_range(quantization or {})
    if found is None:
        return None
    low, high, step = found
    record = tensor.calibration
    axis = None if output else channel_axis(tensor.layout, tensor.shape)
    baseline: tuple[float, ...] = ()
    if record is not None:
        low, high = record.low, record.high
        axis = None if output else record.channel_axis
        baseline = record.baseline
    channels = tensor.shape[axis] if axis is not None else 1
    if not isinstance(channels, int) or channels <= 0:
        axis, channels = None, 1
    return Watched(tensor.name, low, high, step, axis, channels, baseline)
