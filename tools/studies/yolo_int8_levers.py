"""YOLOv8n (realzoo ``nudenet_320n``) int8 levers tried and not kept: each rebuilds the model
with one change patched into the build, so every row of docs/measurements/yolo-int8.md
section 6 can be rebuilt. None is a build stage: none improved the held-out photos.

* ``mse``: per-tensor MSE-optimal activation ranges (Sony MCT's default threshold rule, its
  ``MSE`` error method), each end of the min-max range shrunk by a factor in [0.2, 1], one end
  at a time; ``MSE_ONLY=substring`` limits it to the tensors whose name holds it
  (``/conv/Conv_output_0``: the SiLU inputs of Ultralytics' Conv blocks).
* ``sequential``: the build's own sequential bias correction (``ptq/bias_correct.py``,
  ``correct_sequential``: each conv's plain mean output per channel onto float's) forced.
* ``sigmoid``: the class-logit convs (read only by a plain Sigmoid through data movement)
  bias-corrected by the Sigmoid's slope-weighted mean error: the first-order score-MSE optimum
  ``b = -sum(w e) / sum(w)``, ``w = sigmoid'(x)^2`` at float's logit ``x``.
* ``slope``: the same weighting, sequential over every conv read by a SiLU
  (``w = SiLU'(x)^2``) or a Sigmoid, in graph order.
* ``unshare``: the head's Split of its box+class Concat written as one Concat per part in the
  prepare stage (``tools/studies/split_concat.py``), so the class logits get their own scale.

    python -m tools.studies.yolo_int8_levers unshare,sigmoid build --target rpi4 320n.onnx \\
        --calib calib.npz --guard-time 0 --accept-accuracy-drop --format tflite -o A.edgekit
    (``mse`` needs ``--method pertensor``: it replaces that method's per-tensor choice)
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

SHRINK_STEPS = 40  # candidate clip factors per side, from 1 (the full range) down to MIN_SHRINK
MIN_SHRINK = 0.2
SEARCH_ROUNDS = 2  # coordinate rounds: the high end with the low end fixed, then the low end
MIN_WEIGHT = 1e-12  # a channel no position of which reaches the activation's slope: left alone
MOVES = frozenset({"Reshape", "Concat", "Split", "Transpose", "Flatten", "Squeeze", "Unsqueeze"})


def mse_range(values: np.ndarray, lo: float, hi: float, symmetric: bool) -> tuple[float, float]:
    """The range inside [lo, hi] whose int8 grid quantizes ``values`` with the least mean
    squared error; a symmetric grid has one threshold, so both ends shrink together."""
    from edgekit.converters.ptq.range_choice import fake_quant

    x = values.astype(np.float64)
    factors = np.linspace(1.0, MIN_SHRINK, SHRINK_STEPS)

    def error(a: float, b: float) -> float:
        return float(np.mean((fake_quant(x, a, b, symmetric) - x) ** 2))

    if symmetric:
        best = min(factors, key=lambda f: (error(lo * f, hi * f), -f))
        return float(lo * best), float(hi * best)
    low, high = float(lo), float(hi)
    for _ in range(SEARCH_ROUNDS):
        high = float(min((hi * f for f in factors), key=lambda h: (error(low, h), -h)))
        low = float(min((lo * f for f in factors), key=lambda v: (error(v, high), v)))
    return low, high


def slope(x: np.ndarray, kind: str) -> np.ndarray:
    """d/dx of the activation reading the conv: ``sigmoid`` or ``silu`` (x * sigmoid(x))."""
    gate = 1.0 / (1.0 + np.exp(-x))
    return gate * (1.0 - gate) if kind == "sigmoid" else gate * (1.0 + x * (1.0 - gate))


def weighted_shift(x: np.ndarray, q: np.ndarray, kind: str) -> np.ndarray:
    """Per channel (axis 1): the slope-squared weighted mean of ``q - x`` (int8 minus float
    pre-activation): the bias error that moves the activation's output, not the mean error of
    positions the activation flattens (a logit of -20 or -25: a score of 0 either way)."""
    x, q = x.astype(np.float64), q.astype(np.float64)
    weight = slope(x, kind) ** 2
    axes = tuple(i for i in range(x.ndim) if i != 1)
    total = weight.sum(axis=axes)
    return np.where(total > MIN_WEIGHT, (weight * (q - x)).sum(axis=axes) / np.maximum(total, MIN_WEIGHT), 0.0)


def activation_of(model: Any) -> dict[str, str]:
    """Conv node name -> ``silu`` (read only by Sigmoid(x) and Mul(x, Sigmoid(x))) or
    ``sigmoid`` (its output reaches only plain Sigmoids through data movement)."""
    readers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in model.graph.output}

    def only_sigmoids(tensor: str, depth: int = 0) -> bool:
        users = readers.get(tensor, [])
        if tensor in outputs or not users or depth > 12:
            return False
        return all(u.op_type == "Sigmoid" or (u.op_type in MOVES and all(
            only_sigmoids(o, depth + 1) for o in u.output)) for u in users)

    kinds: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type != "Conv" or not node.name:
            continue
        users = readers.get(node.output[0], [])
        gates = [u for u in users if u.op_type == "Sigmoid"]
        muls = [u for u in users if u.op_type == "Mul"]
        if len(users) == 2 and len(gates) == 1 and len(muls) == 1 and gates[0].output[0] in muls[0].input:
            kinds[node.name] = "silu"
        elif only_sigmoids(node.output[0]):
            kinds[node.name] = "sigmoid"
    return kinds


def correct_weighted(qdq: Any, float_model: Any, data: Any, kinds: set[str]) -> dict[str, Any]:
    """Layer by layer in graph order (each measured with the corrections before it applied),
    move the int32 bias of every conv read by an activation of ``kinds`` by
    ``weighted_shift``. In place."""
    import onnx
    from edgekit.converters.core.expose import exposed_bytes
    from edgekit.converters.core.runner import run_dataset
    from edgekit.converters.ptq.bias_correct import _as_inputs, _batched_session, _layers
    from onnx import numpy_helper

    found = {k: v for k, v in activation_of(float_model).items() if v in kinds}
    layers = [layer for layer in _layers(qdq, float_model) if layer["node"].name in found]
    if not layers:
        return {"layers": 0}
    targets = run_dataset(exposed_bytes(float_model, [layer["twin_output"] for layer in layers], only=True),
                          data)
    biases = {layer["bias"].name: numpy_helper.to_array(layer["bias"]).astype(np.int32) for layer in layers}
    probe = _as_inputs(qdq, list(biases))
    del probe.graph.output[:]
    outputs = [layer["node"].output[0] for layer in layers]
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in outputs)
    sess, step = _batched_session(probe, set(biases), data)
    moved = []
    for index, layer in enumerate(layers):
        q = np.concatenate([sess.run([outputs[index]], {**data.feeds(s, s + step), **biases})[0]
                            for s in range(0, len(data), step)])
        shift = weighted_shift(targets[index], q, found[layer["node"].name])
        old = biases[layer["bias"].name].astype(np.float64)
        biases[layer["bias"].name] = np.clip(np.round(old - shift / layer["bias_scale"]),
                                             -2**31, 2**31 - 1).astype(np.int32)
        moved.append(float(np.abs(shift).mean()))
    for layer in layers:
        layer["bias"].CopyFrom(numpy_helper.from_array(biases[layer["bias"].name], layer["bias"].name))
    return {"layers": len(layers), "mean_shift": round(float(np.mean(moved)), 4)}


def _patch(lever: str) -> None:
    from edgekit.converters.ptq import bias_correct, range_choice

    if lever == "sequential":
        bias_correct.correct_if_it_pays.__defaults__ = (("sequential",),)
    elif lever in ("sigmoid", "slope"):
        import onnx

        kinds = {"sigmoid"} if lever == "sigmoid" else {"sigmoid", "silu"}
        plain = bias_correct.correct_if_it_pays

        def then_weighted(path: Any, float_path: Any, calib: Any, modes: tuple[str, ...] = bias_correct.DEFAULT_MODES
                          ) -> dict[str, Any]:
            report = plain(path, float_path, calib, modes)  # the default correction first
            qdq = onnx.load(str(path))
            data = calib.take(slice(0, min(bias_correct.SAMPLES, len(calib))))
            weighted = correct_weighted(qdq, onnx.load(str(float_path)), data, kinds)
            onnx.save(qdq, str(path))
            print(f"{lever}-weighted bias correction: {weighted}", file=sys.stderr)
            return {**report, "weighted": weighted}

        bias_correct.correct_if_it_pays = then_weighted
    elif lever == "mse":
        _patch_mse(range_choice)
    elif lever == "unshare":
        from edgekit.converters.stages import prepare

        from tools.studies.split_concat import unshare_split_concats

        folded = prepare.fold_conv_affines

        def fold_then_unshare(model: Any) -> dict[str, int]:
            found = folded(model)
            unshared = unshare_split_concats(model)
            print(f"unshared split concats: {unshared}", file=sys.stderr)
            # a count in what prepare reports as folded makes it save the rewritten graph
            return {**found, "unshared_split_concats": unshared}

        prepare.fold_conv_affines = fold_then_unshare
    else:
        raise SystemExit(f"unknown lever {lever!r}: mse, sequential, sigmoid, slope, unshare")


def _patch_mse(range_choice: Any) -> None:
    """``--method pertensor`` takes every tensor's MSE range inside its min-max range (the
    percentile and entropy calibrators it would run are swapped for min-max: not used)."""
    import onnxruntime.quantization.calibrate as calibrate
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import TensorData, TensorsData

    only = os.environ.get("MSE_ONLY", "")

    def combine(ranges: Any, sampled: Any, symmetric: bool) -> tuple[Any, dict[str, int]]:
        chosen, moved = {}, 0
        for name, data in ranges["minmax"].items():
            lo, hi = data.range_value
            values = sampled.get(name)
            if values is not None and values.size and only in name:
                ends = (float(np.asarray(lo).reshape(-1)[0]), float(np.asarray(hi).reshape(-1)[0]))
                low, high = mse_range(values, *ends, symmetric)
                moved += (low, high) != ends
                lo = np.asarray(low, np.asarray(lo).dtype).reshape(np.shape(lo))
                hi = np.asarray(high, np.asarray(hi).dtype).reshape(np.shape(hi))
            chosen[name] = TensorData(lowest=lo, highest=hi)
        print(f"MSE ranges: {moved} of {len(chosen)} tensors moved", file=sys.stderr)
        return TensorsData(CalibrationMethod.MinMax, chosen), {"minmax": moved}

    create = calibrate.create_calibrator

    def minmax_only(model: Any, op_types_to_calibrate: Any = None,
                    augmented_model_path: str = "augmented_model.onnx", calibrate_method: Any = None,
                    use_external_data_format: bool = False, providers: Any = None,
                    extra_options: dict[str, Any] | None = None) -> Any:
        # onnxruntime's own keyword names: the calibrate stage passes them by name
        symmetric = bool((extra_options or {}).get("symmetric", False))
        return create(model, op_types_to_calibrate, augmented_model_path, CalibrationMethod.MinMax,
                      use_external_data_format, providers, {"symmetric": symmetric})

    range_choice.combine = combine
    calibrate.create_calibrator = minmax_only


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    for lever in sys.argv[1].split(","):  # levers combine: unshare,sigmoid
        _patch(lever)
    from edgekit.cli import main as cli

    sys.argv = ["edgekit", *sys.argv[2:]]
    sys.exit(cli())


if __name__ == "__main__":
    main()
