"""Packed outputs: slices whose ranges one int8 scale cannot hold together.

A YOLOv8 export concatenates box coordinates (0..320) with class probabilities (0..1) into
one output; one int8 scale over 0..320 has a step of 1.26, so every probability rounds to
0 or 1.26. Rule, on the float outputs over calibration data: split the output into slices
(``slices.channel_groups``); with one asymmetric grid of ``2**bits - 1`` steps over the
whole output's range (zero included, as quantizers do), a slice is *starved* when its own
span covers fewer than ``MIN_LEVELS`` steps (under 4 bits of resolution) although alone it
would get the full grid. An output with a starved slice is *packed*: quantize its slices
separately (keep the Concat that joins them in float).

``concat_branches(model, output_name)`` finds that Concat in an ONNX graph and the channel
range each of its inputs fills, so the quantizer can give each branch its own scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .slices import channel_groups, channels_last, slice_axis

if TYPE_CHECKING:
    import onnx

MIN_LEVELS = 16
# ops between the Concat and the graph output that change neither values nor channel order
PASS_THROUGH = ("Identity",)


@dataclass(frozen=True)
class SliceRange:
    start: int
    stop: int
    low: float
    high: float
    levels: float  # int8 steps of the shared grid its span covers
    starved: bool


@dataclass(frozen=True)
class PackedOutput:
    name: str
    axis: int
    packed: bool
    step: float                   # the shared grid's step over the whole output
    slices: tuple[SliceRange, ...]
    reason: str

    @property
    def separate(self) -> tuple[tuple[int, int], ...]:
        """Channel ranges to quantize each with its own scale (empty when not packed)."""
        return tuple((s.start, s.stop) for s in self.slices) if self.packed else ()


def find_packed(reference: np.ndarray, name: str = "output0", axis: int | None = None,
                bits: int = 8, min_levels: float = MIN_LEVELS) -> PackedOutput:
    """Is the float output ``reference`` (calibration data, samples on axis 0) packed?"""
    reference = np.asarray(reference)
    axis = slice_axis(reference.shape) if axis is None else axis
    flat = channels_last(reference, axis)
    low, high = min(float(flat.min()), 0.0), max(float(flat.max()), 0.0)
    step = (high - low) / (2 ** bits - 1)
    slices = []
    for start, stop in channel_groups(reference, axis):
        part = flat[:, start:stop]
        span = float(part.max() - part.min())
        levels = span / step if step > 0 else float(2 ** bits - 1)
        slices.append(SliceRange(start, stop, float(part.min()), float(part.max()), levels,
                                 span > 0 and levels < min_levels))
    starved = [s for s in slices if s.starved]
    packed = len(slices) > 1 and bool(starved)
    if packed:
        worst = min(starved, key=lambda s: s.levels)
        reason = (f"{name}: channels {worst.start}..{worst.stop - 1} span {worst.low:.3g}..{worst.high:.3g} "
                  f"but share one {bits}-bit scale of step {step:.3g} with a range of {low:.3g}..{high:.3g}: "
                  f"{worst.levels:.1f} steps left for them; quantize the {len(slices)} slices separately")
    else:
        reason = f"{name}: {len(slices)} slice(s), each keeps >= {min_levels} steps of one {bits}-bit scale"
    return PackedOutput(name, axis, packed, step, tuple(slices), reason)


@dataclass(frozen=True)
class ConcatBranch:
    input_name: str
    producer: str     # op type feeding the Concat ("Sigmoid", "Mul", ... or "graph input")
    start: int        # channel range it fills along the Concat axis
    stop: int


@dataclass(frozen=True)
class ConcatSplit:
    output_name: str
    concat_node: str
    axis: int
    branches: tuple[ConcatBranch, ...]


def _dims(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    infos = [*model.graph.value_info, *model.graph.output, *model.graph.input]
    dims: dict[str, list[int | str]] = {}
    for info in infos:
        shape = info.type.tensor_type.shape
        dims[info.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in shape.dim]
    for init in model.graph.initializer:
        dims[init.name] = list(init.dims)
    return dims


def _known(shape: list[int | str] | None, axis: int) -> bool:
    return bool(shape) and axis < len(shape) and isinstance(shape[axis], int) and shape[axis] > 0


def _runtime_shapes(model: onnx.ModelProto, names: list[str]) -> dict[str, list[int | str]]:
    """Shapes of ``names`` from one onnxruntime run on zeros: shape inference cannot follow
    Slices with computed bounds (as torch exports of YOLO heads have); empty if it fails."""
    from edgekit.converters.core.expose import Probe, ort_defaults

    try:
        probe = Probe(model, names, opener=ort_defaults)
        feeds = {}
        for i in probe.session.get_inputs():
            dtype = np.float32 if "float" in i.type else np.int64
            feeds[i.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in i.shape], dtype)
        results = probe.run(feeds)
    except Exception:  # a graph onnxruntime cannot run: the caller falls back to the data's slices
        return {}
    return {n: list(r.shape) for n, r in results.items()}


def concat_branches(model: onnx.ModelProto, output_name: str) -> ConcatSplit | None:
    """The Concat producing graph output ``output_name`` (through Identity) and its branches.

    None when the output is not made by a Concat or a branch's width along the Concat axis
    is unknown (then the caller falls back to splitting by the data's slices)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    producers = {out: node for node in inferred.graph.node for out in node.output}
    node = producers.get(output_name)
    while node is not None and node.op_type in PASS_THROUGH:
        node = producers.get(node.input[0])
    if node is None or node.op_type != "Concat":
        return None
    dims = _dims(inferred)
    rank = len(dims.get(node.output[0], [])) or len(dims.get(node.input[0], []))
    axis = next(a.i for a in node.attribute if a.name == "axis")
    axis = axis + rank if axis < 0 else axis
    if any(not _known(dims.get(name), axis) for name in node.input):
        dims.update(_runtime_shapes(model, list(node.input)))
    branches, at = [], 0
    for name in node.input:
        shape = dims.get(name)
        if not _known(shape, axis):
            return None
        producer = producers.get(name)
        branches.append(ConcatBranch(name, producer.op_type if producer else "graph input", at, at + shape[axis]))
        at += shape[axis]
    return ConcatSplit(output_name, node.name, axis, tuple(branches))


@dataclass(frozen=True)
class SplitPlan:
    """One packed output and how to split it: by the graph's Concat branches when found."""

    report: PackedOutput
    concat: ConcatSplit | None  # None: no Concat found; split by report.separate instead


def plan_splits(reference: list[np.ndarray], names: list[str],
                model: onnx.ModelProto | None = None, bits: int = 8) -> tuple[SplitPlan, ...]:
    """The packed outputs among ``reference`` (float outputs on calibration data, graph
    order, named ``names``), each with the Concat to keep float when ``model`` shows one."""
    plans = []
    for output, name in zip(reference, names, strict=True):
        report = find_packed(output, name, bits=bits)
        if report.packed:
            concat = concat_branches(model, name) if model is not None else None
            if concat is not None and concat.axis != report.axis:
                concat = None  # the Concat joins along another axis: not the packing seen in the data
            plans.append(SplitPlan(report, concat))
    return tuple(plans)
