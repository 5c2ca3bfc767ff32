"""The test vectors' tolerance, per output, from the cross-ISA study and the model's depth.

``tools/study_cross_isa.py`` measured how far the int8 outputs of the same artifact land
on the Arm CPUs (emulated Cortex-A72, A53, A76) from this host's, in quantization steps
(README, "Cross-ISA fidelity"). Each output's bounds:

* ``within_1_step``: the share of elements that must be within one step. The study's worst
  row stays above ``WITHIN_1``; a handful of elements must not fail a small output, so the
  bound loosens by ``SPARE_ELEMENTS`` elements where an output has few.
* ``max_steps``: ``BASE_STEPS``, plus one step per ``LAYERS_PER_STEP`` compute layers
  (one-step rounding differences add up through deep nets; the study's max grew with depth).
* ``min_sqnr_db``: per channel slice (``metrics/slices.channel_groups``: box coordinates and
  class scores apart), the SQNR the stored output would keep if every element were one
  step off and the allowed share were at ``max_steps``: the float-space reading of the two
  element bounds, so a wrong slice shows as dB against the output's own signal.
"""

from __future__ import annotations

import math

import numpy as np

from edgekit.manifest import OutputTolerance

from .slices import channel_groups, slice_axis

WITHIN_1 = 0.98
SPARE_ELEMENTS = 2
BASE_STEPS = 2.0
LAYERS_PER_STEP = 25
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU"})
BASIS = (f"tools/study_cross_isa.py (host vs emulated A72/A53/A76): >= {WITHIN_1:.0%} within "
         f"1 step (less {SPARE_ELEMENTS} elements on small outputs), max {BASE_STEPS:g} steps "
         f"+ 1 per {LAYERS_PER_STEP} compute layers, worst-slice SQNR implied by both")


def depth(op_types: list[str]) -> int:
    """Compute layers (convolutions, matrix products, recurrent cells) in a graph."""
    return sum(op in COMPUTE_OPS for op in op_types)


def output_tolerance(expected: np.ndarray, step: float, layers: int) -> OutputTolerance:
    """Bounds for one output whose test vectors hold ``expected`` (all vectors stacked)."""
    size = max(1, int(expected.size))
    within = min(WITHIN_1, max(0.0, 1.0 - SPARE_ELEMENTS / size))
    max_steps = BASE_STEPS + layers // LAYERS_PER_STEP
    if expected.ndim < 2 or step <= 0:
        return OutputTolerance(within_1_step=round(within, 4), max_steps=max_steps)
    axis = slice_axis(expected.shape)
    moved = np.moveaxis(np.asarray(expected, np.float64), axis, -1)
    noise = step ** 2 * (1.0 + (1.0 - within) * max_steps ** 2)  # mean square at the bounds
    slices, floors = [], []
    for start, stop in channel_groups(expected, axis):
        power = float(np.mean(moved[..., start:stop] ** 2))
        if power > 0:  # a silent slice has no SQNR to keep
            slices.append((start, stop))
            floors.append(10.0 * math.log10(power / noise))
    return OutputTolerance(within_1_step=round(within, 4), max_steps=max_steps,
                           min_sqnr_db=round(min(floors), 2) if floors else None, axis=axis,
                           slices=tuple(slices))
