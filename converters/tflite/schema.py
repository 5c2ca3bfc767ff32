"""The TFLite flatbuffer schema, from the bindings that ship inside the ai-edge-litert wheel.

Imported through this module so the rest of the package names ``S.OperatorT`` etc. and a
missing wheel gives one clear error instead of an ImportError deep in a stage.
"""

from __future__ import annotations

from types import ModuleType

from edgekit.errors import UnsupportedModelError


def load_schema() -> ModuleType:
    try:
        from ai_edge_litert import schema_py_generated
    except ImportError as exc:  # the build extra pulls it in; say which package is missing
        raise UnsupportedModelError(
            "writing a .tflite model needs the ai-edge-litert package (pip install "
            f"'edgekit-sdk[build]' or pip install ai-edge-litert); import failed: {exc}"
        ) from exc
    return schema_py_generated


S = load_schema()
Op = S.BuiltinOperator
TType = S.TensorType
Act = S.ActivationFunctionType
Padding = S.Padding

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

# builtin operator -> (BuiltinOptions union tag, options class) for the options we write
OPTIONS: dict[int, tuple[int, type]] = {
    Op.CONV_2D: (S.BuiltinOptions.Conv2DOptions, S.Conv2DOptionsT),
    Op.DEPTHWISE_CONV_2D: (S.BuiltinOptions.DepthwiseConv2DOptions, S.DepthwiseConv2DOptionsT),
    Op.TRANSPOSE_CONV: (S.BuiltinOptions.TransposeConvOptions, S.TransposeConvOptionsT),
    Op.FULLY_CONNECTED: (S.BuiltinOptions.FullyConnectedOptions, S.FullyConnectedOptionsT),
    Op.AVERAGE_POOL_2D: (S.BuiltinOptions.Pool2DOptions, S.Pool2DOptionsT),
    Op.MAX_POOL_2D: (S.BuiltinOptions.Pool2DOptions, S.Pool2DOptionsT),
    Op.SOFTMAX: (S.BuiltinOptions.SoftmaxOptions, S.SoftmaxOptionsT),
    Op.CONCATENATION: (S.BuiltinOptions.ConcatenationOptions, S.ConcatenationOptionsT),
    Op.ADD: (S.BuiltinOptions.AddOptions, S.AddOptionsT),
    Op.SUB: (S.BuiltinOptions.SubOptions, S.SubOptionsT),
    Op.MUL: (S.BuiltinOptions.MulOptions, S.MulOptionsT),
    Op.DIV: (S.BuiltinOptions.DivOptions, S.DivOptionsT),
    Op.RESHAPE: (S.BuiltinOptions.ReshapeOptions, S.ReshapeOptionsT),
    Op.TRANSPOSE: (S.BuiltinOptions.TransposeOptions, S.TransposeOptionsT),
    Op.PAD: (S.BuiltinOptions.PadOptions, S.PadOptionsT),
    Op.PADV2: (S.BuiltinOptions.PadV2Options, S.PadV2OptionsT),
    Op.MIRROR_PAD: (S.BuiltinOptions.MirrorPadOptions, S.MirrorPadOptionsT),
    Op.MEAN: (S.BuiltinOptions.ReducerOptions, S.ReducerOptionsT),
    Op.REDUCE_MAX: (S.BuiltinOptions.ReducerOptions, S.ReducerOptionsT),
    Op.RESIZE_BILINEAR: (S.BuiltinOptions.ResizeBilinearOptions, S.ResizeBilinearOptionsT),
    Op.RESIZE_NEAREST_NEIGHBOR: (
        S.BuiltinOptions.ResizeNearestNeighborOptions,
        S.ResizeNearestNeighborOptionsT,
    ),
    Op.LEAKY_RELU: (S.BuiltinOptions.LeakyReluOptions, S.LeakyReluOptionsT),
    Op.QUANTIZE: (S.BuiltinOptions.QuantizeOptions, S.QuantizeOptionsT),
    Op.DEQUANTIZE: (S.BuiltinOptions.DequantizeOptions, S.DequantizeOptionsT),
    Op.HARD_SWISH: (S.BuiltinOptions.HardSwishOptions, S.HardSwishOptionsT),
    Op.MAXIMUM: (S.BuiltinOptions.MaximumMinimumOptions, S.MaximumMinimumOptionsT),
    Op.MINIMUM: (S.BuiltinOptions.MaximumMinimumOptions, S.MaximumMinimumOptionsT),
    Op.EXP: (S.BuiltinOptions.ExpOptions, S.ExpOptionsT),
    Op.SPLIT: (S.BuiltinOptions.SplitOptions, S.SplitOptionsT),
    Op.SPLIT_V: (S.BuiltinOptions.SplitVOptions, S.SplitVOptionsT),
    Op.STRIDED_SLICE: (S.BuiltinOptions.StridedSliceOptions, S.StridedSliceOptionsT),
    Op.BATCH_MATMUL: (S.BuiltinOptions.BatchMatMulOptions, S.BatchMatMulOptionsT),
    Op.GATHER: (S.BuiltinOptions.GatherOptions, S.GatherOptionsT),
    Op.GELU: (S.BuiltinOptions.GeluOptions, S.GeluOptionsT),
    Op.SELECT_V2: (S.BuiltinOptions.SelectV2Options, S.SelectV2OptionsT),
    Op.ARG_MAX: (S.BuiltinOptions.ArgMaxOptions, S.ArgMaxOptionsT),
    Op.BROADCAST_TO: (S.BuiltinOptions.BroadcastToOptions, S.BroadcastToOptionsT),
    Op.L2_NORMALIZATION: (S.BuiltinOptions.L2NormOptions, S.L2NormOptionsT),
    Op.SUM: (S.BuiltinOptions.ReducerOptions, S.ReducerOptionsT),
    Op.GREATER: (S.BuiltinOptions.GreaterOptions, S.GreaterOptionsT),
    Op.GREATER_EQUAL: (S.BuiltinOptions.GreaterEqualOptions, S.GreaterEqualOptionsT),
    Op.LESS: (S.BuiltinOptions.LessOptions, S.LessOptionsT),
    Op.LESS_EQUAL: (S.BuiltinOptions.LessEqualOptions, S.LessEqualOptionsT),
    Op.EQUAL: (S.BuiltinOptions.EqualOptions, S.EqualOptionsT),
}


def op_name(code: int) -> str:
    """BuiltinOperator number -> its name, for messages."""
    for name, value in vars(Op).items():
        if value == code and not name.startswith("_"):
            return name
    return str(code)
