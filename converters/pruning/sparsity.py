"""Magnitude (unstructured) sparsity on an ONNX model's weight initializers.

An ONNX graph cannot lose channels without knowing what reads them, so ONNX sources get
unstructured sparsity: in every Conv/ConvTranspose/Gemm/MatMul weight of at least
``MIN_ELEMENTS`` elements, the ``ratio`` share of smallest-magnitude values is set to 0.
Symmetric int8 weight quantization (zero point 0) keeps those zeros exact, and the artifact
is a zip whose members are deflated, so the zeros pay off in **storage**. onnxruntime and
LiteRT still run these weights as dense tensors: latency and RAM do not change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgekit.errors import UnsupportedModelError

# Small tensors (a first conv of 3x3x3x32) save little and tend to be the most sensitive.
MIN_ELEMENTS = 1024
WEIGHT_INPUTS = {"Conv": (1,), "ConvTranspose": (1,), "Gemm": (0, 1), "MatMul": (0, 1)}
NOTE = ("unstructured magnitude sparsity: zeroed weights stay exact zeros in int8 and shrink the "
        "artifact, whose members are zip-deflated (level 9); runtimes execute them densely, so "
        "latency and RAM are unchanged")


@dataclass
class SparsityReport:
    ratio: float
    tensors: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> elements, zeros
    skipped_small: list[str] = field(default_factory=list)

    @property
    def zeroed(self) -> int:
        return sum(t["zeros"] - t["zeros_before"] for t in self.tensors.values())

    @property
    def elements(self) -> int:
        return sum(t["elements"] for t in self.tensors.values())

    def to_dict(self) -> dict[str, Any]:
        return {"method": "unstructured (magnitude, per tensor)", "ratio": self.ratio,
                "note": NOTE, "min_elements": MIN_ELEMENTS, "weights_pruned": self.elements,
                "zeros_added": self.zeroed, "tensors": self.tensors,
                "skipped_small": self.skipped_small}


def weight_names(model: Any) -> list[str]:
    """Float initializers read as weights by Conv/Gemm/MatMul nodes, in graph order."""
    from onnx import TensorProto

    inits = {i.name: i for i in model.graph.initializer}
    names: list[str] = []
    for node in model.graph.node:
        for index in WEIGHT_INPUTS.get(node.op_type, ()):
            if index < len(node.input) and node.input[index] in inits:
                init = inits[node.input[index]]
                if (init.data_type == TensorProto.FLOAT and len(init.dims) >= 2
                        and init.name not in names):
                    names.append(init.name)
    return names


def sparsify(model: Any, ratio: float) -> SparsityReport:
    """Zero the smallest-magnitude ``ratio`` of each weight tensor of ``model``, in place."""
    from onnx import numpy_helper

    if not 0.0 <= ratio < 1.0:
        raise UnsupportedModelError(f"pruning ratio must be in [0, 1), got {ratio}")
    report = SparsityReport(ratio)
    inits = {i.name: i for i in model.graph.initializer}
    for name in weight_names(model):
        init = inits[name]
        if init.data_location == 1:  # EXTERNAL: the load stage keeps weights inside the model
            raise UnsupportedModelError(f"weight {name!r} is stored as external data; expected "
                                        "weights inside the ONNX file")
        weights = numpy_helper.to_array(init).astype(np.float32)
        if weights.size < MIN_ELEMENTS:
            report.skipped_small.append(name)
            continue
        zeros_before = int((weights == 0).sum())
        count = int(weights.size * ratio)
        if count > 0:
            flat = np.abs(weights).reshape(-1)
            # argpartition: exactly `count` smallest, ties broken by position (deterministic)
            order = np.argpartition(flat, count - 1, kind="introselect")[:count]
            weights = weights.copy().reshape(-1)
            weights[order] = 0.0
            weights = weights.reshape(init.dims)
            init.CopyFrom(numpy_helper.from_array(weights, name))
        report.tensors[name] = {"elements": int(weights.size), "zeros_before": zeros_before,
                                "zeros": int((weights == 0).sum())}
    return report
