"""SpaceToDepth -> SPACE_TO_DEPTH, DepthToSpace -> DEPTH_TO_SPACE, on NHWC tensors.

onnxruntime's basic optimizations, which the build saves as its own graph
(``graph/shapes.folded``), turn YOLO's Focus stem (four strided ``Slice``s + ``Concat``,
ddddocr's detector) into ``SpaceToDepth(blocksize 2)`` and a channel ``Gather``; the writer
must take what the pipeline itself makes. ONNX's channel order for SpaceToDepth is
``(row in block * blocksize + column in block) * C + c``, TensorFlow's on NHWC the same, so
the kernel is the op once the tensor is channels-last. DepthToSpace matches TensorFlow in its
DCR mode (the default); CRD (what ``torch.nn.PixelShuffle`` exports) is a channel GATHER into
DCR order first. All move bytes, so int8 keeps the input's parameters (a QUANTIZE follows
only if the output's Q differs).
"""

from __future__ import annotations

import numpy as np
import onnx
from edgekit.converters.tflite.context import ConversionContext
from edgekit.converters.tflite.layout import NHWC, Value
from edgekit.converters.tflite.ops.base import OpSpec, unsupported
from edgekit.converters.tflite.schema import Op, S


def convert_space_depth(ctx: ConversionContext, node: onnx.NodeProto) -> None:
    attrs = ctx.attrs(node)
    block = int(attrs.get("blocksize", 0))
    if block < 1:
        raise unsupported(node, f"blocksize {block} (expected a positive block size)")
    x = ctx.input(node, 0)
    if x.rank != 4:
        raise unsupported(node, f"a rank-{x.rank} input (expected NCHW, rank 4)")
    x = ctx.to_layout(x, NHWC)
    if node.op_type == "DepthToSpace":
        mode = attrs.get("mode", b"DCR")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode not in ("DCR", "CRD"):
            raise unsupported(node, f"mode {mode!r} (expected DCR or CRD)")
        if mode == "CRD":
            x = _crd_to_dcr(ctx, node, x, block)
        builtin, options = Op.DEPTH_TO_SPACE, S.DepthToSpaceOptionsT()
        tag = S.BuiltinOptions.DepthToSpaceOptions
    else:
        builtin, options = Op.SPACE_TO_DEPTH, S.SpaceToDepthOptionsT()
        tag = S.BuiltinOptions.SpaceToDepthOptions
    options.blockSize = block
    out = ctx.output(node, 0, NHWC, x.qparams)  # same parameters: the op only moves bytes
    op = ctx.w.op(builtin, [ctx.tensor_of(x)], [ctx.tensor_of(out)],
                  version=2 if x.quantized else 1)  # version 2: int8
    # set here, not in schema.OPTIONS (the writer drops options of builtins not listed there)
    op.builtinOptionsType, op.builtinOptions = tag, options
    ctx.bind(node, 0, out)


def _crd_to_dcr(ctx: ConversionContext, node: onnx.NodeProto, x: Value, block: int) -> Value:
    """``x`` (NHWC) with its channels in DCR order: CRD reads channel ``c * b * b + i * b + j``
    where DCR reads ``(i * b + j) * C + c`` (a GATHER: moves bytes, same parameters)."""
    depth = x.onnx_shape[1]
    if depth % (block * block):
        raise unsupported(node, f"{depth} channels for blocksize {block} (expected a multiple "
                                f"of {block * block})")
    channels = depth // (block * block)
    order = np.arange(depth).reshape(channels, block * block).T.reshape(-1).astype(np.int32)
    out = ctx.new_value(x.onnx_shape, NHWC, x.qparams, f"{node.output[0]}_dcr")
    opts = S.GatherOptionsT()
    opts.axis = 3  # channels of the NHWC tensor
    ctx.emit(Op.GATHER, [x, ctx.w.const(order, f"{node.name}_crd_to_dcr")], [out], opts)
    return out


SPECS = {"SpaceToDepth": OpSpec(convert_space_depth),
         "DepthToSpace": OpSpec(convert_space_depth)}
