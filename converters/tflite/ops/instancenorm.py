"""InstanceNormalization: a LayerNorm over the spatial axes with a per-channel scale and bias.

y = scale[c] * (x - mean) / sqrt(var + eps) + B[c], mean and variance over axes 2.. of
[N, C, ...]. LiteRT has no InstanceNorm kernel; it is written as LayerNormalization is
(``layernorm.py``): between int8 (or int16) tensors on LiteRT's int16 MEAN, SUB, MUL, ADD,
SQRT, DIV kernels (``layernorm16.py``, no float op), otherwise float builtins. PyTorch exports
GroupNorm as Reshape -> InstanceNormalization (scale 1, bias 0) -> Reshape -> Mul -> Add
(Moonshine's front end): a scale of ones and a bias of zeros are not written.
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.ops.layernorm import write_normalization


def _per_channel(ctx: ConversionContext, node: onnx.NodeProto, i: int, rank: int,
                 channels: int, neutral: float) -> np.ndarray | None:
    """Input ``i`` ([C]) shaped [1, C, 1, ...]; None when every value is ``neutral``."""
    if not ctx.is_const(node.input[i]):
        raise unsupported(node, f"input {i} (scale/bias) must be a constant")
    data = np.asarray(ctx.const(node.input[i]), np.float32).reshape(-1)
    if data.size != channels:
        raise unsupported(node, f"input {i} has {data.size} values for {channels} channels")
    if np.all(data == neutral):
        return None
    return data.reshape((1, channels) + (1,) * (rank - 2))


def convert_instancenorm(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    x = ctx.input(node, 0)  # int8 in quantized mode (int16 chain), else float
    rank = x.rank
    if rank < 3:
        raise unsupported(node, f"expected an input [N, C, D1, ...], got rank {rank}")
    channels = x.onnx_shape[1]
    eps = float(ctx.attrs(node).get("epsilon", 1e-5))
    write_normalization(ctx, node, x, list(range(2, rank)), eps,
                        _per_channel(ctx, node, 1, rank, channels, 1.0),
                        _per_channel(ctx, node, 2, rank, channels, 0.0))


# scale and bias may come quantized (behind a DequantizeLinear): only the data input counts
SPECS = {"InstanceNormalization": OpSpec(convert_instancenorm)}
