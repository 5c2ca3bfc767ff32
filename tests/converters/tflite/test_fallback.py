"""Ops without an int8 form, or kept float by the accuracy guard, run in float between
DEQUANTIZE and QUANTIZE and are listed; strict_int8 turns that into an error naming them.
Ops with no converter at all are refused (or, in a build that only prefers tflite, skipped)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from edgekit.converters.tflite import convert
from torch import nn

from edgekit.errors import UnsupportedModelError

from . import nets
from .helpers import ops_of, parity, tensor

SHAPE = (1, 3, 8, 8)


class WithLog(nn.Module):
    """Log is float-only in the writer (and onnxruntime leaves it float too)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.b(torch.log(F.relu(self.a(x)) + 1.0))


class WithLayerNorm(nn.Module):
    """LayerNormalization has no LiteRT kernel: written as int16 builtins (int8 around)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(F.relu(self.a(x)).mean(dim=(2, 3)))


class WithCumSum(nn.Module):
    """CumSum has no converter at all."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.cumsum(F.relu(self.a(x)).mean(dim=(2, 3)), dim=1)


def _feeds(seed: int = 6) -> dict[str, np.ndarray]:
    return nets.inputs(SHAPE, 16, seed=seed)


def test_uncovered_op_falls_back_to_float_between_dequantize_and_quantize(qdq_models):
    path = qdq_models("log", WithLog(), SHAPE)
    model, within, worst = parity(path, _feeds())
    assert within[0] >= 0.99, f"{within[0]:.2%} within one step (worst {worst[0]:.1f})"
    assert [o["op_type"] for o in model.float_ops] == ["Log"]
    names = [name for name, _ in ops_of(model.data)]
    i = names.index("LOG")
    assert names[i - 1] == "DEQUANTIZE" and names[i + 1] == "QUANTIZE"
    assert names.count("CONV_2D") == 2  # the convolutions around it stay int8


def test_strict_int8_names_the_float_ops(qdq_models):
    path = qdq_models("log", WithLog(), SHAPE)
    with pytest.raises(UnsupportedModelError, match=r"strict_int8.*\(Log\)"):
        convert(onnx.load(str(path)), strict_int8=True)


def test_nodes_kept_float_by_the_guard_stay_float(qdq_models):
    path = qdq_models("log", WithLog(), SHAPE)
    conv = next(n.name for n in onnx.load(str(path)).graph.node if n.op_type == "Conv")
    # onnxruntime quantized this conv; the guard's keep_float list still makes it float
    model, within, _ = parity(path, _feeds(), keep_float={conv})
    assert within[0] >= 0.99
    assert conv in {o["name"] for o in model.float_ops}
    assert {o["op_type"] for o in model.float_ops} == {"Conv", "Log"}
    filters = [tensor(model.data, op.inputs[1]).type
               for name, op in ops_of(model.data) if name == "CONV_2D"]
    assert sorted(filters) == [0, 9]  # one float32, one int8 filter (TensorType numbers)


def test_layernorm_is_written_as_int16_builtins(qdq_models):
    path = qdq_models("layernorm", WithLayerNorm(), SHAPE)
    model, within, worst = parity(path, _feeds())
    assert within[0] >= 0.99, f"{within[0]:.2%} within one step (worst {worst[0]:.1f})"
    assert model.float_ops == [], model.float_ops
    names = [name for name, _ in ops_of(model.data)]
    i = names.index("DIV") - 8
    assert names[i:i + 11] == ["QUANTIZE", "MEAN", "SUB", "MUL", "MEAN", "ADD", "SQRT", "MAXIMUM",
                               "DIV", "MUL", "ADD"]
    assert names[i + 11] == "QUANTIZE" and names.count("CONV_2D") == 1


def test_op_without_converter_is_refused_with_its_name(qdq_models):
    path = qdq_models("cumsum", WithCumSum(), SHAPE)
    with pytest.raises(UnsupportedModelError, match="CumSum"):
        convert(onnx.load(str(path)))


@pytest.fixture(scope="module")
def cumsum_onnx(tmp_path_factory) -> Path:
    return nets.export(nets.seeded(WithCumSum()), SHAPE,
                       tmp_path_factory.mktemp("cumsum") / "cumsum.onnx")


def test_build_skips_tflite_it_only_prefers_and_fails_when_asked(cumsum_onnx, tmp_path):
    from edgekit.converters import build

    common = {"target": "rpi4", "calib": "synthetic", "method": "minmax", "quiet": True}
    result = build(str(cumsum_onnx), output=tmp_path / "pref.edgekit", **common)
    assert [m["format"] for m in result.manifest["models"]] == ["onnx"]
    assert any("CumSum" in w for w in result.manifest["warnings"])
    with pytest.raises(UnsupportedModelError, match="CumSum"):
        build(str(cumsum_onnx), output=tmp_path / "asked.edgekit", formats=["tflite"],
              **common)


def test_build_strict_int8_fails_on_a_float_op(tmp_path):
    from edgekit.converters import build

    src = nets.export(nets.seeded(WithLog()), SHAPE, tmp_path / "log.onnx")
    common = {"target": "rpi4", "calib": "synthetic", "method": "minmax", "quiet": True}
    result = build(str(src), output=tmp_path / "ok.edgekit", **common)
    entry = next(m for m in result.manifest["models"] if m["format"] == "tflite")
    assert [o["op_type"] for o in entry["float_ops"]] == ["Log"]
    with pytest.raises(UnsupportedModelError, match="Log"):
        build(str(src), output=tmp_path / "strict.edgekit", strict_int8=True, **common)


class PoolHead(nn.Module):
    """EfficientNet-Lite0's tail: conv, global mean, view, classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = F.relu6(self.a(x)).mean((2, 3))
        return self.fc(y.view(y.shape[0], -1))


def test_weightless_ops_kept_float_by_the_guard_still_run_int8(tmp_path):
    """The guard names the global pool and the Reshape after it (EfficientNet-Lite0's rpi4
    build ran both float); onnxruntime's model then quantizes at the classifier's input
    anyway, so the int8 MEAN and RESHAPE give the same values within one step, float-free."""
    from .helpers import quantize

    src = nets.export(nets.seeded(PoolHead()), SHAPE, tmp_path / "float.onnx")
    kinds = {n.op_type: n.name for n in onnx.load(str(src)).graph.node}
    keep = [kinds["ReduceMean"], kinds["Reshape"]]
    path = quantize(src, tmp_path, nets.inputs(SHAPE, 16, seed=1), keep_float=keep)
    model, within, worst = parity(path, _feeds(), keep_float=set(keep))
    assert model.float_ops == [], model.float_ops
    assert within[0] == 1.0, f"{within[0]:.2%} within one step (worst {worst[0]:.1f})"
    names = [name for name, _ in ops_of(model.data)]
    assert "MEAN" in names and "DEQUANTIZE" not in names, names
