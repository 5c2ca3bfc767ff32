"""Empirical bias correction of a QDQ model (a ``quantize`` option, ``QuantizeConfig.bias_correct``).

Rounding a layer's weights to int8 shifts the mean of its output: with ``dW = W_int8 - W`` and
inputs ``x`` as the int8 model sees them, channel ``o`` moves by ``E[dW x]_o``. The shift is a
bias (it does not average out over samples) and it accumulates through the net (Nagel et al.
2019, section 4.2; AIMET's "empirical bias correction"). Measured here per Conv/Gemm on the
calibration data: the per-channel mean of each layer's dequantized input in the int8 model,
times the layer's summed weight error, is subtracted from its int32 bias. Conv padding is
ignored (border taps see zeros): the correction is exact for the interior.

The correction is kept only when it pays: the int8 model's mean squared output error against
float on the calibration samples must go down; the figures before and after are reported.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.core.expose import exposed_bytes, with_outputs
from edgekit.converters.core.runner import run_dataset, samples_first

SAMPLES = 64  # calibration samples measuring the input means and the output error
MEAN_CHUNK = 8  # samples per run measuring the input means: bounds the memory of a run


def _producers(model: Any) -> dict[str, Any]:
    return {out: node for node in model.graph.node for out in node.output}


def _layers(qdq: Any, float_model: Any) -> list[dict[str, Any]]:
    """Conv/Gemm nodes of ``qdq`` with a dequantized input, int8 weights and an int32 bias,
    each with its float weights (from the node of the same name in ``float_model``)."""
    from onnx import numpy_helper

    made = _producers(qdq)
    inits = {t.name: t for t in qdq.graph.initializer}
    float_inits = {t.name: t for t in float_model.graph.initializer}
    float_nodes = {n.name: n for n in float_model.graph.node if n.name}
    found = []
    for node in qdq.graph.node:
        if node.op_type not in ("Conv", "Gemm") or len(node.input) < 3 or node.name not in float_nodes:
            continue
        dq = [made.get(name) for name in node.input[:3]]
        if any(d is None or d.op_type != "DequantizeLinear" for d in dq):
            continue
        bias_q = inits.get(dq[2].input[0])
        bias_scale = inits.get(dq[2].input[1])
        w_q, w_scale = inits.get(dq[1].input[0]), inits.get(dq[1].input[1])
        w_float = float_inits.get(float_nodes[node.name].input[1])
        if None in (bias_q, bias_scale, w_q, w_scale, w_float) or bias_q.data_type != 6:  # 6: int32
            continue
        w = numpy_helper.to_array(w_q).astype(np.float64)
        scale = numpy_helper.to_array(w_scale).astype(np.float64)
        zero = (numpy_helper.to_array(inits[dq[1].input[2]]).astype(np.float64)
                if len(dq[1].input) > 2 and dq[1].input[2] in inits else 0.0)
        axis = next((a.i for a in dq[1].attribute if a.name == "axis"), 1)
        if scale.ndim == 1 and scale.size > 1:
            shape = [1] * w.ndim
            shape[axis] = -1
            scale = scale.reshape(shape)
            zero = np.reshape(zero, shape) if np.ndim(zero) else zero
        d_w = (w - zero) * scale - numpy_helper.to_array(w_float).astype(np.float64)
        attrs = {a.name: a.i for a in node.attribute if a.type == 2}  # ints: group, transB
        found.append({"node": node, "input": node.input[0], "d_w": d_w, "bias": bias_q,
                      "twin_output": float_nodes[node.name].output[0],
                      "bias_scale": numpy_helper.to_array(bias_scale).astype(np.float64),
                      "group": int(attrs.get("group", 1)), "trans_b": int(attrs.get("transB", 0))})
    return found


def _input_means(qdq: Any, names: list[str], data: Dataset
                 ) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """Per-channel mean (axis 1; the last axis of a 2-D Gemm input is axis 1 too) of each
    named tensor in the int8 model over ``data``, int8 math exact; and the model's own
    outputs from the same runs (the error before correcting: one int8 pass less).

    Summed chunk by chunk (``MEAN_CHUNK`` samples per run where the batch axis can be
    freed): every conv input of 64 EfficientNet-Lite0 images held at once was about 2 GB and
    a third of the build's time (``tools/benchmarks/bench_build.py``). The means are sums, right for any
    chunking; the outputs only when they pair with ``run_dataset``'s (``_joined``), else none."""
    outputs = [o.name for o in qdq.graph.output]
    wanted = outputs + [n for n in names if n not in outputs]
    probe = with_outputs(qdq, wanted, only=True)
    sess, step = _batched_session(probe, set(), data)
    step = max(1, min(step, MEAN_CHUNK))
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = dict.fromkeys(names, 0)
    chunks: list[list[np.ndarray]] = []
    starts = range(0, len(data), step)
    for start in starts:
        values = dict(zip(wanted, sess.run(wanted, data.feeds(start, start + step)), strict=True))
        chunks.append([values[o] for o in outputs])
        for name in names:
            part = _channel_sum(values[name])
            value = values[name]
            sums[name] = part if name not in sums else sums[name] + part
            counts[name] += value.size // max(1, value.shape[1])
    means = {name: sums[name] / max(1, counts[name]) for name in names}
    return means, _joined(chunks, [min(step, len(data) - s) for s in starts],
                          [data.out_axes.get(o, 0) for o in outputs])


def _channel_sum(value: np.ndarray) -> np.ndarray:
    """Sum over every axis but 1, in float64. A one-sample run's [1, C, ...] sums as [C, rest]
    on its contiguous last axis: the same float64 sum as ``sum(axis=(0, 2, ...))`` (numpy drops
    the size-1 axis and joins the rest), without the multi-axis reduction's cost per call
    (a batch-1 model runs sample by sample: 64 samples x 50 layers of EfficientNet-Lite0)."""
    if value.ndim > 2 and value.shape[0] == 1:
        return value.reshape(value.shape[1], -1).sum(axis=1, dtype=np.float64)
    return value.sum(axis=tuple(i for i in range(value.ndim) if i != 1), dtype=np.float64)


def _joined(chunks: list[list[np.ndarray]], counts: list[int], axes: list[int]
            ) -> list[np.ndarray]:
    """The outputs of runs over ``counts[i]`` samples each, joined as ``run_dataset`` joins
    its own runs: each output on its batch axis ``axes[j]`` (``Dataset.out_axes``), samples
    first; none (``[]``) when that join depends on the run size: an output that does not hold
    a run's samples on that axis (its size set by the data). Runs of one join as
    ``run_dataset``'s of one; ``correct_if_it_pays`` checks shapes."""
    one_run_or_one_sample = len(chunks) == 1 or all(n == 1 for n in counts)
    if not one_run_or_one_sample and any(
            o.ndim <= a or o.shape[a] != n for run, n in zip(chunks, counts, strict=True)
            for o, a in zip(run, axes, strict=True)):
        return []
    return samples_first(chunks, axes)


def _shift(layer: dict[str, Any], mean_x: np.ndarray) -> np.ndarray:
    """The mean output shift per output channel that the weight rounding causes."""
    d_w = layer["d_w"]
    if layer["node"].op_type == "Gemm":
        return (d_w if layer["trans_b"] else d_w.T) @ mean_x
    summed = d_w.reshape(d_w.shape[0], d_w.shape[1], -1).sum(axis=2)  # [out, in/group]
    per_group = summed.shape[0] // layer["group"]
    cin = summed.shape[1]
    groups = np.arange(summed.shape[0]) // per_group
    x = mean_x.reshape(layer["group"], cin)[groups]  # each output channel's input slice
    return (summed * x).sum(axis=1)


def correct(qdq: Any, float_model: Any, data: Dataset,
            before: list[np.ndarray] | None = None) -> dict[str, Any]:
    """Subtract each layer's mean output shift from its int32 bias, in place. ``before``
    receives the uncorrected model's outputs on ``data`` (measured in the same runs)."""
    from onnx import numpy_helper

    layers = _layers(qdq, float_model)
    if not layers:
        return {"layers": 0}
    means, outputs = _input_means(qdq, sorted({layer["input"] for layer in layers}), data)
    if before is not None:
        before[:] = outputs
    moved = []
    for layer in layers:
        shift = _shift(layer, means[layer["input"]])
        old = numpy_helper.to_array(layer["bias"]).astype(np.float64)
        new = np.clip(np.round(old - shift / layer["bias_scale"]), -2**31, 2**31 - 1)
        layer["bias"].CopyFrom(numpy_helper.from_array(new.astype(np.int32), layer["bias"].name))
        moved.append(float(np.abs(new - old).mean()))
    return {"layers": len(layers), "mean_bias_change_steps": round(float(np.mean(moved)), 3)}


def _as_inputs(qdq: Any, names: list[str]) -> Any:
    """A copy of ``qdq`` whose initializers ``names`` are graph inputs (fed at run time), so
    one session serves every bias the sequential correction tries."""
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(qdq)
    wanted = set(names)
    kept = [t for t in probe.graph.initializer if t.name not in wanted]
    moved = [t for t in probe.graph.initializer if t.name in wanted]
    del probe.graph.initializer[:]
    probe.graph.initializer.extend(kept)
    for t in moved:
        probe.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return probe


def _channel_mean(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float64).mean(axis=tuple(i for i in range(v.ndim) if i != 1))


def _batched_session(probe: Any, fed: set[str], data: Dataset) -> tuple[Any, int]:
    """An exact-int8 session of ``probe`` and the samples per run: all at once when the data
    inputs' batch axis can be freed (a model exported at batch 1 runs as many runs as layers
    times samples otherwise: minutes under load), else one. The freed graph is checked on two
    samples; a graph that bakes the batch into a Reshape falls back."""
    from edgekit.converters.core.runner import session
    from edgekit.converters.graph.shapes import batch_freed

    free = batch_freed(probe, data.axes, {i.name for i in probe.graph.input} - fed, "samples")
    try:
        sess = session(free.SerializeToString(), exact_int8=True, quiet=True)
        first = sess.run(None, {**data.feeds(0, min(2, len(data))), **_zero_feeds(sess, fed)})
        if all(len(v) == min(2, len(data)) for v in first):
            return sess, len(data)
    except Exception:  # noqa: BLE001 - any failure means: run sample by sample, as exported
        pass
    sess = session(probe.SerializeToString(), exact_int8=True)
    fixed = [i.shape[data.axes.get(i.name, 0)] for i in sess.get_inputs() if i.name not in fed and i.shape]
    return sess, 1 if any(isinstance(d, int) for d in fixed) else len(data)


def _zero_feeds(sess: Any, names: set[str]) -> dict[str, np.ndarray]:
    return {i.name: np.zeros(i.shape, np.int32) for i in sess.get_inputs() if i.name in names}


def correct_sequential(qdq: Any, float_model: Any, data: Dataset) -> dict[str, Any]:
    """Layer by layer in graph order, move each int32 bias so the layer's mean output per
    channel in the int8 model (its inputs as the corrected layers before it make them) equals
    the float model's: the shift from weight rounding AND from the input's quantization and
    clipping, which the analytic ``correct`` does not see. In place."""
    from onnx import numpy_helper

    layers = _layers(qdq, float_model)
    if not layers:
        return {"layers": 0}
    twins = [layer["twin_output"] for layer in layers]
    targets = run_dataset(exposed_bytes(float_model, twins, only=True), data)
    biases = {layer["bias"].name: numpy_helper.to_array(layer["bias"]).astype(np.int32) for layer in layers}
    outputs = [layer["node"].output[0] for layer in layers]
    probe = with_outputs(_as_inputs(qdq, list(biases)), outputs, only=True)
    sess, step = _batched_session(probe, set(biases), data)
    moved = []
    for index, layer in enumerate(layers):
        runs = [sess.run([outputs[index]], {**data.feeds(s, s + step), **biases})[0]
                for s in range(0, len(data), step)]
        shift = _channel_mean(np.concatenate(runs)) - _channel_mean(targets[index])
        old = biases[layer["bias"].name].astype(np.float64)
        new = np.clip(np.round(old - shift / layer["bias_scale"]), -2**31, 2**31 - 1).astype(np.int32)
        biases[layer["bias"].name] = new
        moved.append(float(np.abs(new - old).mean()))
    for layer in layers:
        layer["bias"].CopyFrom(numpy_helper.from_array(biases[layer["bias"].name], layer["bias"].name))
    return {"layers": len(layers), "mean_bias_change_steps": round(float(np.mean(moved)), 3)}


def output_mse(qdq_bytes: bytes, reference: list[np.ndarray], data: Dataset) -> float:
    """Mean squared error of the int8 model's outputs against float, over all outputs."""
    return _mse(run_dataset(qdq_bytes, data, exact_int8=True), reference)


def _mse(got: list[np.ndarray], reference: list[np.ndarray]) -> float:
    errors = [float(np.mean((g.astype(np.float64) - r) ** 2)) for g, r in zip(got, reference, strict=True)]
    return float(np.mean(errors))


# ``sequential`` is not a default: in tools/benchmarks/bench_ptq.py (calib 64, MobileNet-style) it raised the
# worst-layer SQNR 24.1 -> 24.6 dB and accuracy, but flipped one near-tie digit onnxruntime keeps
DEFAULT_MODES = ("weights",)


def correct_if_it_pays(path: Any, float_path: Any, calib: Dataset,
                       modes: tuple[str, ...] = DEFAULT_MODES) -> dict[str, Any]:
    """Bias-correct the QDQ model at ``path`` on calibration samples, each way in ``modes``
    (``weights``: ``correct``, the weight rounding's shift; ``sequential``:
    ``correct_sequential``, the whole measured shift, layer by layer); keep the one with the
    lower output error against float (rewrite ``path``), and only if it is lower than
    without. Returns the figures."""
    import onnx

    data = calib.take(slice(0, min(SAMPLES, len(calib))))
    float_model = onnx.load(str(float_path))
    original = onnx.load(str(path))
    reference = [r.astype(np.float64) for r in run_dataset(str(float_path), data)]
    measured: list[np.ndarray] = []  # the uncorrected outputs, from ``correct``'s own runs
    tried: dict[str, tuple[float, bytes, dict[str, Any]]] = {}
    fixes = {"weights": partial(correct, before=measured), "sequential": correct_sequential}
    for mode, fix in ((m, fixes[m]) for m in modes):
        qdq = onnx.ModelProto()
        qdq.CopyFrom(original)
        report = fix(qdq, float_model, data)
        if report["layers"]:
            corrected = qdq.SerializeToString()
            tried[mode] = (output_mse(corrected, reference, data), corrected, report)
    if not tried:
        return {"layers": 0, "kept": False}
    # joined from other run sizes than run_dataset's, outputs pair only if the shapes agree:
    # a state [layers * N, 1, ...] from runs of one against [layers, N, ...] runs int8 again
    same_layout = [m.shape for m in measured] == [r.shape for r in reference]
    before = (_mse(measured, reference) if measured and same_layout
              else output_mse(original.SerializeToString(), reference, data))
    mode = min(tried, key=lambda m: tried[m][0])
    after, corrected, report = tried[mode]
    kept = after < before
    if kept:
        Path(path).write_bytes(corrected)  # a candidate in the build's own temp folder
    return {**report, "mode": mode, "output_mse_before": before, "output_mse_after": after, "kept": kept,
            "samples": len(data), "tried": {m: t[0] for m, t in tried.items()}}
