"""16x8 mode: int16 activations with int8 weights, as LiteRT's 16x8 kernels take them.

LiteRT's 16x8 quantization spec: activations int16, symmetric (zero point 0); weights int8
symmetric per channel as in int8 mode; biases int64 at scale input x weight (a 16-bit by 8-bit
product summed over a whole window can overflow int32), int32 for a FULLY_CONNECTED whose sum
cannot (``bias_fits_int32``: LiteRT then runs its optimized kernel). The QDQ graph says where: a tensor whose
QuantizeLinear has an int16 zero point (``converters/ptq/precision.py`` writes them). A node
on int16 tensors is written with its integer kernel only for the ops below, whose LiteRT
kernels take int16 inputs and outputs with free scales; any other op on int16 tensors runs
float between DEQUANTIZE and QUANTIZE (both have int16 kernels), and is listed as a float op.

LiteRT 2.3 also runs MEAN, SUB, MUL, ADD and RSQRT on int16 tensors (checked by writing
them); SUB and ADD need ``pot_scale_int16 = False`` for scales that are not powers of two
(else SUB fails to prepare: ``input1_shift == 0 || input2_shift == 0``). LayerNormalization
between int8 tensors uses them for its inside (``ops/layernorm16.py``).
"""

from __future__ import annotations

import numpy as np
from edgekit.converters.tflite.quant import QParams

INT16_MIN, INT16_MAX = -32768, 32767
# ONNX op types written on a 16x8 / int16 LiteRT kernel (CONV_2D, DEPTHWISE_CONV_2D,
# FULLY_CONNECTED, ADD, MAX_POOL_2D, AVERAGE_POOL_2D, MEAN, RESHAPE, TRANSPOSE, CONCATENATION)
INT16_KERNELS = frozenset({"Conv", "Gemm", "MatMul", "Add", "MaxPool", "AveragePool",
                           "GlobalAveragePool", "Relu", "Reshape", "Flatten", "Transpose",
                           "Concat", "Squeeze", "Unsqueeze",
                           # LOGISTIC / TANH (output 1/32768), MUL, SUB, RELU6 or MAXIMUM +
                           # MINIMUM (Clip), MUL by the reciprocal (Div by a constant), ADD +
                           # MUL + MINIMUM (HardSigmoid), SPLIT(_V), STRIDED_SLICE, GATHER, PAD,
                           # MEAN, SQRT, MUL(x, x) (Pow 2), LEAKY_RELU: each checked on LiteRT 2.3
                           # (tests/converters/precision/test_int16_ops.py)
                           "Sigmoid", "Tanh", "Mul", "Sub", "Clip", "Div", "HardSigmoid",
                           "Split", "Slice", "Gather", "Pad", "ReduceMean", "Sqrt", "Pow",
                           "LeakyRelu", "Identity", "LayerNormalization",
                           # the same chain over the spatial axes (ops/instancenorm.py);
                           # Neg as MUL by -1 (ops/elementwise.py)
                           "InstanceNormalization", "Neg",
                           # SOFTMAX (int16 output at 1/32768, then requantized), GELU (LiteRT
                           # 2.3 runs it on int16, free scales); Erf only inside the erf GELU
                           # chain, which ops/gelu.py fuses into one GELU (alone: no converter)
                           "Softmax", "Gelu", "Erf"})


def const_params16(data: np.ndarray) -> QParams:
    """Symmetric int16 parameters of a float constant operand of a 16x8 kernel (its own
    range: LiteRT's int16 MUL/ADD/MINIMUM take any scale per operand, zero point 0)."""
    top = float(np.max(np.abs(data))) if np.size(data) else 0.0
    return QParams.per_tensor(top / INT16_MAX if top > 0 else 1.0, 0, "int16")


def is_int16_zero(zero_point: np.ndarray) -> bool:
    return np.asarray(zero_point).dtype == np.int16


def bias_int64(bias: np.ndarray | None, bias_scale: np.ndarray | None, input_scale: float,
               weight_scale: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Int64 bias at scale input x weight per channel (float32 products, as LiteRT checks).

    ``bias`` is int32 at ``bias_scale`` (onnxruntime's int8-mode bias, whose scale used the
    int8 input step) or float (``bias_scale`` None); either way its real value is requantized."""
    want = np.broadcast_to((np.float32(input_scale) * np.asarray(weight_scale, np.float32))
                           .astype(np.float32), (channels,)).astype(np.float32)
    if bias is None:
        return np.zeros(channels, np.int64), want
    real = np.asarray(bias, np.float64).reshape(-1)
    if bias_scale is not None:
        real = real * np.broadcast_to(np.asarray(bias_scale, np.float64).reshape(-1), (channels,))
    q = np.rint(real / want.astype(np.float64))
    return np.clip(q, -(2**62), 2**62).astype(np.int64), want


# LiteRT's 16x8 kernels with an int64 bias run the scalar reference code, one thread
# (tensorflow/lite/kernels/conv.cc: "Fallback to reference kernel when bias_type is int64 as
# there is no optimized kernel for int64 bias yet"). With an int32 bias, checked on LiteRT 2.3
# (docs/measurements/tflite.md, tools/benchmarks/bench_int16_kernels.py):
# - FULLY_CONNECTED: its optimized kernel, within one step of onnxruntime, 3.6x faster;
# - CONV_2D: no faster (1.02x on YOLOv8n model.0-9) and WRONG (outputs uncorrelated with
#   onnxruntime's on a 1x1 conv; up to 240 int16 steps off on 3x3): kept int64;
# - DEPTHWISE_CONV_2D: refused ("bias->type != kTfLiteInt64", depthwise_conv.cc:177): int64.
# So a 16x8 FULLY_CONNECTED gets an int32 bias where its int32 accumulator cannot overflow
# (``bias_fits_int32``), and the estimator costs it as int8 (``estimate/graph.py`` asks the same
# rule); every other 16x8 layer keeps int64 and costs ``REFERENCE_16X8``. False: int64 for all
# (the bench compares both).
INT32_BIAS_16X8 = True
INT32_LIMIT = 2**31


def bias_fits_int32(weight_q: np.ndarray, out_axis: int, bias_q: np.ndarray | None) -> bool:
    """Whether a 16x8 layer's accumulator cannot overflow int32: for every output channel,
    sum over its kernel of |w_int8| x 32768 (the widest int16 input) + |bias| < 2^31."""
    if not INT32_BIAS_16X8:
        return False
    w = np.abs(np.moveaxis(np.asarray(weight_q, np.int64), out_axis, 0))
    worst = w.reshape(w.shape[0], -1).sum(axis=1) * -INT16_MIN
    if bias_q is not None:
        worst = worst + np.abs(np.asarray(bias_q, np.int64).reshape(-1))
    return bool(np.all(worst < INT32_LIMIT))
