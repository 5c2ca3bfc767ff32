"""A QDQ ONNX graph run by torch, its activation quantizers learnable (for reconstruct.py).

Each activation ``QuantizeLinear`` becomes a fake quantizer whose step and zero point are
parameters (LSQ+: the step through ``exp`` of a learned log-ratio, the zero point in steps,
both rounded with a straight-through estimator), so gradient descent can choose the steps
by what they do to a block's output. Quantizers that share one scale initializer (onnxruntime
gives a Split or MaxPool output its input's grid) share one parameter pair, so what is learned
can be written back as one range per owning tensor. Weights and biases stay as built: their
``DequantizeLinear`` of an initializer is folded to a constant. A node is run only when
asked (``run(nodes, env)``): reconstruction runs one block at a time.

Only the operators of the CNNs studied are implemented (YOLOv8n, the digits CNN); anything
else is an ``UnsupportedModelError`` naming the operator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (torch's own name)

from edgekit.errors import UnsupportedModelError

DQ_SUFFIX, Q_SUFFIX = "_DequantizeLinear_Output", "_QuantizeLinear_Output"


def round_ste(x: torch.Tensor) -> torch.Tensor:
    """Round forward, identity backward (the straight-through estimator)."""
    return x + (torch.round(x) - x).detach()


class FakeQuant(torch.nn.Module):
    """Per-tensor affine fake quantization on [qmin, qmax], step and zero point learnable."""

    def __init__(self, scale: float, zero_point: int, qmin: int, qmax: int) -> None:
        super().__init__()
        self.scale0, self.zero0, self.qmin, self.qmax = float(scale), float(zero_point), qmin, qmax
        self.log_ratio = torch.nn.Parameter(torch.zeros(()))  # step = scale0 * exp(log_ratio)
        self.shift = torch.nn.Parameter(torch.zeros(()))  # zero point = zero0 + shift (steps)
        self.drop = 0.0  # QDrop: probability that an element skips quantization (training only)

    def start_at(self, scale: float, zero_point: int) -> None:
        """Begin from this grid (a previous run's) instead of the model's."""
        with torch.no_grad():
            self.log_ratio.fill_(float(np.log(scale / self.scale0)))
            self.shift.fill_(float(zero_point) - self.zero0)

    def step(self) -> torch.Tensor:
        return self.scale0 * torch.exp(self.log_ratio)

    def zero_point(self) -> torch.Tensor:
        return torch.clamp(round_ste(self.zero0 + self.shift), self.qmin, self.qmax)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        step, zero = self.step(), self.zero_point()
        q = torch.clamp(round_ste(x / step) + zero, self.qmin, self.qmax)
        y = (q - zero) * step
        if self.drop > 0 and self.training:
            y = torch.where(torch.rand_like(x) < self.drop, x, y)
        return y

    def learned(self) -> tuple[float, int]:
        """(scale, zero point) as the writer will see them."""
        with torch.no_grad():
            return float(self.step()), int(self.zero_point())

    def range(self) -> tuple[float, float]:
        """The float range whose min-max grid is exactly this one (0 inside it, as ORT needs)."""
        scale, zero = self.learned()
        return (self.qmin - zero) * scale, (self.qmax - zero) * scale


@dataclass(frozen=True)
class Node:
    op: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict


class QdqGraph(torch.nn.Module):
    """The graph's nodes (activation Q/DQ included) over torch; ``quantizers`` by scale name."""

    def __init__(self, model: object) -> None:
        super().__init__()
        from onnx import helper, numpy_helper

        graph = model.graph  # type: ignore[attr-defined]
        arrays = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        self.consts: dict[str, torch.Tensor] = {}
        self.arrays: dict[str, np.ndarray] = arrays  # shapes, axes, split sizes: read as numbers
        self.nodes: list[Node] = []
        self.quantizers = torch.nn.ModuleDict()
        self.scale_of: dict[str, str] = {}  # Q output -> the key of its quantizer
        self.owner_op: dict[str, str] = {}  # tensor -> op type of the node making it
        for node in graph.node:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            for out in node.output:
                self.owner_op[out] = node.op_type
            if node.op_type == "Constant":
                arrays[node.output[0]] = numpy_helper.to_array(attrs["value"])
                continue
            if node.op_type == "DequantizeLinear" and node.input[0] in arrays:
                self.consts[node.output[0]] = torch.from_numpy(self._dequantize(node, attrs))
                continue
            if node.op_type == "QuantizeLinear":
                key = key_of(node.input[1])
                if key not in self.quantizers:
                    zero = arrays[node.input[2]]
                    info = np.iinfo(zero.dtype)
                    self.quantizers[key] = FakeQuant(float(arrays[node.input[1]]), int(zero),
                                                     int(info.min), int(info.max))
                self.scale_of[node.output[0]] = key
            self.nodes.append(Node(node.op_type, node.name, tuple(node.input), tuple(node.output), attrs))
        for name, array in arrays.items():
            if array.dtype in (np.float32, np.float64) and name not in self.consts:
                self.consts[name] = torch.from_numpy(array.astype(np.float32))

    def _dequantize(self, node: object, attrs: dict) -> np.ndarray:
        q = self.arrays[node.input[0]].astype(np.float64)  # type: ignore[attr-defined]
        scale = self.arrays[node.input[1]].astype(np.float64)  # type: ignore[attr-defined]
        zero = (self.arrays[node.input[2]].astype(np.float64)  # type: ignore[attr-defined]
                if len(node.input) > 2 and node.input[2] else np.zeros_like(scale))  # type: ignore[attr-defined]
        if scale.ndim == 1 and scale.size > 1:
            shape = [1] * q.ndim
            shape[int(attrs.get("axis", 1))] = -1
            scale, zero = scale.reshape(shape), zero.reshape(shape)
        return ((q - zero) * scale).astype(np.float32)

    def value(self, name: str, env: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """A tensor by name; None for an integer initializer (shapes, sizes: read from arrays)."""
        return env[name] if name in env else self.consts.get(name)

    def run(self, nodes: Iterable[Node], env: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run ``nodes`` in order on ``env`` (tensors by name), adding their outputs to it."""
        for node in nodes:
            got = self._op(node, env)
            for name, tensor in zip(node.outputs, got if isinstance(got, tuple) else (got,), strict=False):
                env[name] = tensor
        return env

    def _op(self, node: Node, env: dict[str, torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
        op, a = node.op, node.attrs
        x = [self.value(n, env) if n else None for n in node.inputs]
        if op == "QuantizeLinear":
            return self.quantizers[self.scale_of[node.outputs[0]]](x[0])
        if op == "DequantizeLinear":  # of an activation: the fake quantizer already dequantized
            return x[0]
        if op in _BINARY:
            return _BINARY[op](x[0], x[1])
        if op in _UNARY:
            return _UNARY[op](x[0])
        if op == "Conv":
            return _conv(x[0], x[1], x[2] if len(x) > 2 else None, a)
        if op == "MaxPool":
            return _maxpool(x[0], a)
        if op == "Concat":
            return torch.cat(x, dim=int(a["axis"]))
        if op == "Split":
            return self._split(node, x[0])
        if op == "Reshape":
            shape = [int(s) for s in self.arrays[node.inputs[1]]]
            shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
            if shape and shape[0] == 1:  # a batch pinned to 1 at export: run a batch of samples
                shape[0] = x[0].shape[0]
            return x[0].reshape(shape)
        if op == "Flatten":
            return x[0].flatten(int(a.get("axis", 1)))
        if op == "Transpose":
            return x[0].permute(*[int(p) for p in a["perm"]])
        if op == "Softmax":
            return torch.softmax(x[0], dim=int(a.get("axis", -1)))
        if op == "Slice":
            return self._slice(node, x[0])
        if op == "Resize":
            return self._resize(node, x[0])
        if op == "Gemm":
            w = x[1].t() if a.get("transB", 0) else x[1]
            y = (x[0].t() if a.get("transA", 0) else x[0]) @ w * float(a.get("alpha", 1.0))
            return y + float(a.get("beta", 1.0)) * x[2] if len(x) > 2 and x[2] is not None else y
        raise UnsupportedModelError(f"reconstruction: operator {op} (node {node.name!r}) is not implemented; "
                                    f"implemented: QDQ, Conv, Gemm, MaxPool, Concat, Split, Reshape, Flatten, "
                                    f"Transpose, Softmax, Slice, Resize, {', '.join(sorted({*_BINARY, *_UNARY}))}")

    def _split(self, node: Node, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        axis = int(node.attrs.get("axis", 0))
        if len(node.inputs) > 1 and node.inputs[1]:
            sizes = [int(s) for s in self.arrays[node.inputs[1]]]
        elif "split" in node.attrs:
            sizes = [int(s) for s in node.attrs["split"]]
        else:
            sizes = [x.shape[axis] // len(node.outputs)] * len(node.outputs)
        return tuple(torch.split(x, sizes, dim=axis))

    def _slice(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        starts, ends = (self.arrays[n].astype(np.int64) for n in node.inputs[1:3])
        axes = self.arrays[node.inputs[3]] if len(node.inputs) > 3 and node.inputs[3] else range(len(starts))
        steps = self.arrays[node.inputs[4]] if len(node.inputs) > 4 and node.inputs[4] else [1] * len(starts)
        index = [slice(None)] * x.ndim
        for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
            size = x.shape[int(axis)]
            index[int(axis)] = slice(int(max(min(start, size), -size)), int(max(min(end, size), -size - 1)),
                                     int(step))
        return x[tuple(index)]

    def _resize(self, node: Node, x: torch.Tensor) -> torch.Tensor:
        mode = node.attrs.get("mode", b"nearest")
        scales = self.arrays.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        if mode not in (b"nearest", "nearest") or scales is None or scales.size == 0 \
                or np.any(scales != np.round(scales)) or np.any(scales[:2] != 1):
            raise UnsupportedModelError(f"reconstruction: Resize {node.name!r} other than nearest by "
                                        f"whole spatial scales (mode {mode!r}, scales {scales})")
        return F.interpolate(x, scale_factor=tuple(float(s) for s in scales[2:]), mode="nearest")


def key_of(scale_name: str) -> str:
    # ModuleDict keys may not hold "."; the scale initializer's name stays recoverable
    return scale_name.replace(".", "\u2024")


def scale_name(key: str) -> str:
    return key.replace("\u2024", ".")


def _pads(a: dict, spatial: int) -> tuple[list[int], list[int] | None]:
    """Symmetric padding as torch takes it, or the explicit F.pad list when asymmetric."""
    pads = [int(p) for p in a.get("pads", [0] * 2 * spatial)]
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise UnsupportedModelError(f"reconstruction: auto_pad {a['auto_pad']!r}")
    begin, end = pads[:spatial], pads[spatial:]
    if begin == end:
        return begin, None
    explicit: list[int] = []
    for b, e in reversed(list(zip(begin, end, strict=True))):
        explicit += [b, e]
    return [0] * spatial, explicit


def _conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, a: dict) -> torch.Tensor:
    spatial = w.ndim - 2
    padding, explicit = _pads(a, spatial)
    if explicit is not None:
        x = F.pad(x, explicit)
    conv = {1: F.conv1d, 2: F.conv2d}[spatial]
    return conv(x, w, b, stride=[int(s) for s in a.get("strides", [1] * spatial)], padding=padding,
                dilation=[int(d) for d in a.get("dilations", [1] * spatial)], groups=int(a.get("group", 1)))


def _maxpool(x: torch.Tensor, a: dict) -> torch.Tensor:
    kernel = [int(k) for k in a["kernel_shape"]]
    padding, explicit = _pads(a, len(kernel))
    if explicit is not None:
        x = F.pad(x, explicit, value=float("-inf"))
    return F.max_pool2d(x, kernel, stride=[int(s) for s in a.get("strides", [1] * len(kernel))],
                        padding=padding, ceil_mode=bool(a.get("ceil_mode", 0)))


_BINARY = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "MatMul": torch.matmul}
_UNARY = {"Sigmoid": torch.sigmoid, "Relu": torch.relu}
