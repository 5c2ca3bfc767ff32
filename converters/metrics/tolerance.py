"""The test vectors' tolerance, per output, from the cross-ISA study and the model's depth.

``tools/studies/study_cross_isa.py`` measured how far the int8 outputs of the same artifact land
on the Arm CPUs (emulated Cortex-A72, A53, A76) from this host's, in quantization steps
(README, "Cross-ISA fidelity"). Each output's bounds:

* ``within_1_step``: the share of elements that must be within one step. Convolutional
  nets (5 to 82 compute layers) stayed at or above 99.85% (max 2 steps, at 54-64 layers),
  so ``WITHIN_1`` with room; attention (a MatMul of two activations: LayerNorm, Softmax and
  GELU requantized between) is what moved the most: 92.85% within 1 step, max 4, on a
  13-layer encoder's onnxruntime model, hence ``WITHIN_1_ATTENTION`` and
  ``ATTENTION_STEPS`` more; a transposed convolution (dbnet's head, LiteRT: 93.67% within
  1 step, max 3) ``WITHIN_1_TRANSPOSED`` and ``TRANSPOSED_STEPS`` more. A handful of
  elements must not fail a small output, so the
  bound loosens by ``SPARE_ELEMENTS`` elements where an output has few.
* ``max_steps``: ``BASE_STEPS``, plus one step per ``LAYERS_PER_STEP`` compute layers
  (one-step rounding differences can add up through deep nets), plus ``ATTENTION_STEPS``
  for attention.
* ``max_steps`` is at least ``ceil(gain) + 1`` where ``gain`` is the output layer's
  (``head_gain``): one step of its int8 input, times its largest weight, in output steps.
  mtcnn_pnet's box head (a 1x1 conv from a coarse PRelu'd grid to a fine output grid) has a
  gain of 5.8: onnxruntime on the Arm CPUs landed up to 6.0 steps from the host on 0.04% of
  the elements (LiteRT: 0), both equally far from float: rounding, amplified, not a
  different model.
The study found the same differences on the A53, A72 and A76 (they are host vs Arm kernels,
not per-core), so one bound serves every Arm target.
* ``min_sqnr_db``: per channel slice (``metrics/slices.channel_groups``: box coordinates and
  class scores apart), the SQNR the stored output would keep if every element were one
  step off and the allowed share were at ``max_steps``: the float-space reading of the two
  element bounds, so a wrong slice shows as dB against the output's own signal.
* A float output computed from int8 layers (a guard-kept float tail) gets the same bounds
  counted in its ``float_step`` (``float_tail.py``): what one step at its last int8 tensors
  moves it, so the int8 layers' cross-ISA rounding is allowed for and nothing more.
* The model's own sensitivity (``jitter.py``): every float op's result in the int8 model is
  nudged by its worst-case float32 rounding (K roundoffs for a K-term sum, more for exp-based
  functions) and the test vectors run again on the host, three sign draws;
  an output element that moves there may move as far between x86 and Arm kernels, on each
  side, so the bounds widen to ``1 - JITTER_FACTOR x`` (the share moved beyond one step)
  within one step and ``JITTER_FACTOR x`` the largest move. Real models with float layers
  inside need it (EfficientNet-Lite0's ONNX model with a guard-kept float stem Conv:
  98.5% within one step on the emulated A72; docs/measurements/cross_isa.md); a flipped
  weight moves its output far beyond (tools/studies/perturb_weight.py; the study checks it still
  fails).
"""

from __future__ import annotations

import math

import numpy as np

from edgekit.artifact.manifest import OutputTolerance

from .slices import channel_groups, slice_axis

WITHIN_1 = 0.98
WITHIN_1_ATTENTION = 0.88
# a transposed convolution (dbnet's upsampling head, then Sigmoid): LiteRT on the emulated
# A72/A53/A76 landed 93.67% within 1 step of the host, max 3, at the host's own distance from
# float (47.1 dB both): rounding, not a different model
WITHIN_1_TRANSPOSED = 0.90
TRANSPOSED_STEPS = 1.0
SPARE_ELEMENTS = 2
BASE_STEPS = 2.0
LAYERS_PER_STEP = 25
ATTENTION_STEPS = 4.0
JITTER_FACTOR = 2.0  # the triangle inequality: |arm - x86| <= |arm - exact| + |exact - x86|
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU"})
BASIS = (f"tools/studies/study_cross_isa.py (host vs emulated A72/A53/A76): >= {WITHIN_1:.0%} within "
         f"1 step ({WITHIN_1_ATTENTION:.0%} with attention; less {SPARE_ELEMENTS} elements on "
         f"small outputs), max {BASE_STEPS:g} steps + 1 per {LAYERS_PER_STEP} compute layers "
         f"(+{ATTENTION_STEPS:g} with attention), at least the output layer's one-input-step "
         f"gain + 1, worst-slice SQNR implied by both; with a transposed conv "
         f">= {WITHIN_1_TRANSPOSED:.0%} and +{TRANSPOSED_STEPS:g} step; a float output of int8 layers "
         f"counts in float_step, one step at its last int8 tensors carried through its "
         f"float tail; widened to {JITTER_FACTOR:g}x what the host's outputs move when every "
         f"float op's result is nudged by its worst-case float32 rounding (jitter.py)")
PASS_THROUGH = ("DequantizeLinear", "QuantizeLinear", "Reshape", "Flatten", "Transpose",
                "Squeeze", "Unsqueeze")
# squashing heads between the weighted layer and the output, by their largest slope: a change
# d in every logit moves a softmax output by at most 0.5 d (dp_i = p_i (d_i - sum_j p_j d_j),
# sum |dp_i/dz_j| = 2 p_i (1 - p_i) <= 0.5), a sigmoid by at most 0.25 d. mtcnn_pnet's probs
# (Conv -> Softmax) landed 4 steps off the host on the emulated A72 in onnx while its bound,
# with no gain seen through the Softmax, was 2.
SQUASH_SLOPE = {"Softmax": 0.5, "Sigmoid": 0.25}


def depth(op_types: list[str]) -> int:
    """Compute layers (convolutions, matrix products, recurrent cells) in a graph."""
    return sum(op in COMPUTE_OPS for op in op_types)


def has_attention(model: object) -> bool:
    """A MatMul of two activations (neither side a weight): attention scores or context."""
    graph = model.graph  # type: ignore[attr-defined]  # an onnx.ModelProto
    weights = {t.name for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}

    def is_weight(name: str) -> bool:
        node = producer.get(name)
        while node is not None and node.op_type in ("DequantizeLinear", "Transpose", "Reshape"):
            if node.input[0] in weights:
                return True
            node = producer.get(node.input[0])
        return name in weights

    return any(n.op_type == "MatMul" and not any(is_weight(i) for i in n.input[:2])
               for n in graph.node)


def head_gain(model: object, output: str) -> float:
    """How many of ``output``'s quantization steps one step of one element of its producing
    layer's int8 input can move it: ``max|w| * input scale / output scale`` for a Conv, Gemm
    or MatMul with int8 weights right before the output, times the largest slope of a
    Softmax or Sigmoid in between (``SQUASH_SLOPE``); 0.0 for anything else."""
    from onnx import numpy_helper

    graph = model.graph  # type: ignore[attr-defined]  # an onnx.ModelProto
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    node, out_scale, slope = producer.get(output), None, 1.0
    while node is not None and (node.op_type in PASS_THROUGH or node.op_type in SQUASH_SLOPE):
        if node.op_type == "QuantizeLinear" and out_scale is None and node.input[1] in inits:
            out_scale = float(numpy_helper.to_array(inits[node.input[1]]).max())
        slope *= SQUASH_SLOPE.get(node.op_type, 1.0)
        node = producer.get(node.input[0])
    if node is None or node.op_type not in ("Conv", "Gemm", "MatMul") or not out_scale:
        return 0.0
    w_dq, x_dq = producer.get(node.input[1]), producer.get(node.input[0])
    if (w_dq is None or x_dq is None or w_dq.op_type != "DequantizeLinear"
            or x_dq.op_type != "DequantizeLinear" or w_dq.input[0] not in inits
            or x_dq.input[1] not in inits):
        return 0.0
    weights = numpy_helper.to_array(inits[w_dq.input[0]]).astype(np.float64)
    w_scale = numpy_helper.to_array(inits[w_dq.input[1]]).astype(np.float64)
    if w_scale.ndim:  # per channel: along the weight's quantization axis
        axis = next((a.i for a in w_dq.attribute if a.name == "axis"), 1)
        shape = [1] * weights.ndim
        shape[axis] = -1
        w_scale = w_scale.reshape(shape)
    in_scale = float(numpy_helper.to_array(inits[x_dq.input[1]]).max())
    return float(np.abs(weights * w_scale).max() * in_scale * slope / out_scale)


def output_tolerance(expected: np.ndarray, step: float, layers: int,
                     attention: bool = False, gain: float = 0.0,
                     transposed: bool = False, moved: np.ndarray | None = None
                     ) -> OutputTolerance:
    """Bounds for one output whose test vectors hold ``expected`` (all vectors stacked);
    ``gain``: ``head_gain`` of the layer producing it; ``transposed``: the graph has a
    transposed convolution; ``moved``: how far each element moved under ``jitter.py``'s
    nudge (output units), which widens the bounds to ``JITTER_FACTOR`` times that."""
    size = max(1, int(expected.size))
    floor = (WITHIN_1_ATTENTION if attention else WITHIN_1_TRANSPOSED if transposed
             else WITHIN_1)
    within = min(floor, max(0.0, 1.0 - SPARE_ELEMENTS / size))
    extra = (ATTENTION_STEPS if attention else 0.0) + (TRANSPOSED_STEPS if transposed else 0.0)
    max_steps = max(BASE_STEPS + layers // LAYERS_PER_STEP + extra,
                    float(math.ceil(gain) + 1) if gain > 0 else 0.0)
    if moved is not None and np.size(moved) and step > 0:
        steps = np.asarray(moved, np.float64) / step
        beyond = float((steps > 1.001).mean())  # as verify counts within one step
        within = min(within, max(0.0, 1.0 - JITTER_FACTOR * beyond))
        max_steps = max(max_steps, float(math.ceil(JITTER_FACTOR * float(steps.max()))))
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
