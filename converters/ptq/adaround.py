"""AdaRound (Nagel et al. 2020, "Up or Down? Adaptive Rounding for Post-Training Quantization"):
learn, per weight, whether to round up or down, so that each layer's int8 output matches the
float layer's on calibration data. A ``quantize`` option (``QuantizeConfig.adaround``), off by
default: it costs minutes on a MobileNet-size model.

Per Conv/Gemm of the QDQ model, with its per-channel weight scale ``s`` fixed:
``W_int = floor(W / s) + h(V)``, ``h`` a rectified sigmoid in [0, 1] learned by Adam (torch,
on the host) to minimise ``|| layer(x_int8, s * W_int) - layer_float(x_float) ||^2`` plus a
regulariser that drives ``h`` to 0 or 1 (its exponent annealed from 20 to 2). ``x_int8`` is the
layer's input in the int8 model, ``x_float`` in the float model, both on the same samples, so
the rounding also absorbs the error arriving from earlier layers. Layers are done in graph
order until the time bound; the result is kept only when the model's output error against
float on the calibration samples went down.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.core.expose import values_over
from edgekit.converters.core.runner import run_dataset

SAMPLES = 32  # calibration samples whose layer inputs are kept in memory
STEPS = 300  # Adam steps per layer
ZETA, GAMMA = 1.1, -0.1  # the rectified sigmoid's stretch (the paper's values)
REG = 0.01  # weight of the rounding regulariser
# A conv whose output is larger than WINDOW x WINDOW learns on WINDOWS random windows of it per
# sample (its padded input cropped to match): the rounding sees the same weights on every window,
# and a step on EfficientNet-Lite0's 112x112 stem output costs 1/8 of the whole image's
# (its first two layers: 140 s -> 43 s at load 11-14, docs/measurements/effnet-int8.md)
WINDOW, WINDOWS = 28, 2


def _tensors(model: Any, names: list[str], data: Dataset, exact: bool) -> dict[str, np.ndarray]:
    return values_over(model, names, data, only=True, exact_int8=exact)


def _layers(qdq: Any, float_model: Any) -> list[dict[str, Any]]:
    """Conv/Gemm nodes with a dequantized input, symmetric int8 weights and their float twin."""
    from onnx import numpy_helper

    made = {o: n for n in qdq.graph.node for o in n.output}
    inits = {t.name: t for t in qdq.graph.initializer}
    f_inits = {t.name: t for t in float_model.graph.initializer}
    f_nodes = {n.name: n for n in float_model.graph.node if n.name}
    found = []
    for node in qdq.graph.node:
        twin = f_nodes.get(node.name)
        if node.op_type not in ("Conv", "Gemm") or twin is None:
            continue
        x_dq, w_dq = made.get(node.input[0]), made.get(node.input[1])
        if x_dq is None or w_dq is None or "DequantizeLinear" not in (x_dq.op_type, w_dq.op_type):
            continue
        if w_dq.op_type != "DequantizeLinear" or w_dq.input[0] not in inits or twin.input[1] not in f_inits:
            continue
        w_q = inits[w_dq.input[0]]
        zero = inits.get(w_dq.input[2]) if len(w_dq.input) > 2 else None
        if w_q.data_type != 3 or (zero is not None and numpy_helper.to_array(zero).any()):  # 3: int8
            continue
        attrs = {a.name: (list(a.ints) if a.ints else a.i) for a in node.attribute}
        # the per-channel scales lie along the DequantizeLinear's axis (default 1): a Conv's
        # output channels are axis 0, a Gemm's without transB (weights [in, out]) axis 1
        axis = next((a.i for a in w_dq.attribute if a.name == "axis"), 1)
        found.append({"node": node, "twin": twin, "w_q": w_q, "attrs": attrs, "axis": axis,
                      "scale": numpy_helper.to_array(inits[w_dq.input[1]]).astype(np.float32),
                      "w": numpy_helper.to_array(f_inits[twin.input[1]]).astype(np.float32),
                      "bias": (numpy_helper.to_array(f_inits[twin.input[2]]).astype(np.float32)
                               if len(twin.input) > 2 and twin.input[2] in f_inits else None)})
    return found


def _forward(layer: dict[str, Any], x: Any, w: Any) -> Any:
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own convention

    bias = None if layer["bias"] is None else torch.from_numpy(layer["bias"])
    if layer["node"].op_type == "Gemm":
        w = w if layer["attrs"].get("transB", 0) else w.T
        return F.linear(x, w, bias)
    a = layer["attrs"]
    pads = a.get("pads", [0, 0, 0, 0])
    if pads[:2] != pads[2:]:
        x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]))
        pads = [0, 0, 0, 0]
    return F.conv2d(x, w, bias, a.get("strides", 1), tuple(pads[:2]), a.get("dilations", 1), a.get("group", 1))


def _windows(layer: dict[str, Any], x_q: np.ndarray, x_f: np.ndarray, seed: int = 0
             ) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """The layer (padding now explicit) and the same random windows of its int8 and float inputs,
    when its output is larger than ``WINDOW``; else all unchanged."""
    a = layer["attrs"]
    if layer["node"].op_type != "Conv" or x_q.ndim != 4:
        return layer, x_q, x_f
    top, left, bottom, right = a.get("pads", [0, 0, 0, 0])
    stride, dilation = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
    kernel = layer["w"].shape[2:]
    size = [x_q.shape[2] + top + bottom, x_q.shape[3] + left + right]
    out = [(size[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1 for d in (0, 1)]
    if out[0] <= WINDOW and out[1] <= WINDOW:
        return layer, x_q, x_f
    span = [(min(WINDOW, out[d]) - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1 for d in (0, 1)]
    rng = np.random.default_rng(seed)
    pad = ((0, 0), (0, 0), (top, bottom), (left, right))
    crops_q, crops_f = [], []
    for i in range(len(x_q)):
        for _ in range(WINDOWS):
            y, x = (int(rng.integers(0, out[d] - min(WINDOW, out[d]) + 1)) * stride[d] for d in (0, 1))
            window = (slice(None), slice(y, y + span[0]), slice(x, x + span[1]))
            crops_q.append(np.pad(x_q[i:i + 1], pad)[0][window])
            crops_f.append(np.pad(x_f[i:i + 1], pad)[0][window])
    return ({**layer, "attrs": {**a, "pads": [0, 0, 0, 0]}},
            np.stack(crops_q).astype(np.float32), np.stack(crops_f).astype(np.float32))


def _round_layer(layer: dict[str, Any], x_q: np.ndarray, x_f: np.ndarray, steps: int) -> np.ndarray:
    """The learned int8 weights of one layer."""
    import torch

    layer, x_q, x_f = _windows(layer, x_q, x_f)

    w = torch.from_numpy(layer["w"])
    shape = [1] * w.dim()
    shape[layer.get("axis", 0) % w.dim()] = -1
    scale = torch.from_numpy(layer["scale"]).reshape(shape) if layer["scale"].size > 1 else torch.tensor(
        float(layer["scale"]))
    base = torch.floor(w / scale)
    rest = (w / scale - base).clamp(1e-4, 1 - 1e-4)
    v = torch.log((rest - GAMMA) / (ZETA - rest)).clone().requires_grad_(True)  # h(v) = rest at start
    xq, target = torch.from_numpy(x_q), _forward(layer, torch.from_numpy(x_f), w).detach()
    opt = torch.optim.Adam([v], lr=1e-2)
    for step in range(steps):
        h = (torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA).clamp(0, 1)
        w_soft = scale * (base + h).clamp(-128, 127)
        beta = 20 - (20 - 2) * step / steps
        loss = ((_forward(layer, xq, w_soft) - target) ** 2).mean() + REG * (1 - (2 * h - 1).abs() ** beta).sum() / h.numel()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        h = (torch.sigmoid(v) * (ZETA - GAMMA) + GAMMA).clamp(0, 1)
        return (base + (h >= 0.5).float()).clamp(-128, 127).numpy().astype(np.int8)


def adaround(path: Path, float_path: Path, calib: Dataset, seconds: float, quiet: bool = True,
             steps: int = STEPS, first: int | None = None, samples: int = SAMPLES) -> dict[str, Any]:
    """Learn the rounding of the QDQ model at ``path`` layer by layer within ``seconds``; keep
    (rewrite ``path``) only if the output error against float went down. Returns the figures.
    ``first``: only the first that many layers in graph order (where a CNN's noise is amplified
    most: ``tools/benchmarks/bench_effnet_int8.py``), whatever the time left."""
    import onnx
    import torch
    from edgekit.converters.ptq.bias_correct import output_mse
    from onnx import numpy_helper
    from tqdm import tqdm

    began = time.monotonic()
    data = calib.take(slice(0, min(samples, len(calib))))
    qdq, float_model = onnx.load(str(path)), onnx.load(str(float_path))
    layers = _layers(qdq, float_model)[:first]
    if not layers:
        return {"layers": 0, "kept": False}
    x_q = _tensors(qdq, sorted({layer["node"].input[0] for layer in layers}), data, exact=True)
    x_f = _tensors(float_model, sorted({layer["twin"].input[0] for layer in layers}), data, exact=False)
    reference = [r.astype(np.float64) for r in run_dataset(str(float_path), data)]
    before = output_mse(qdq.SerializeToString(), reference, data)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small layers: threads only contend (measured 90 s vs 1 s here)
    done = 0
    bar = tqdm(layers, desc="adaround", unit="layer", disable=True if quiet else None, leave=False)
    try:
        for layer in bar:
            if time.monotonic() - began > seconds:
                break
            w_int = _round_layer(layer, x_q[layer["node"].input[0]], x_f[layer["twin"].input[0]], steps)
            layer["w_q"].CopyFrom(numpy_helper.from_array(w_int, layer["w_q"].name))
            done += 1
    finally:
        bar.close()
        torch.set_num_threads(threads)
    rounded = qdq.SerializeToString()
    after = output_mse(rounded, reference, data)
    kept = after < before
    if kept:
        Path(path).write_bytes(rounded)  # a candidate in the build's own temp folder
    return {"layers": done, "of": len(layers), "output_mse_before": before, "output_mse_after": after,
            "kept": kept, "seconds": round(time.monotonic() - began, 1), "samples": len(data)}
