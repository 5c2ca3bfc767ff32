"""Op converters, one module per op kind, and the registry the driver dispatches on."""

from __future__ import annotations

from edgekit.converters.tflite.ops import (
    activation,
    argmax,
    batchnorm,
    clip_tensor,
    conv,
    convtranspose,
    divide,
    elementwise,
    expand,
    gather,
    gelu,
    gemm,
    instancenorm,
    l2norm,
    layernorm,
    layernorm_pattern,
    pad,
    pool,
    power,
    prelu,
    recurrent,
    resize,
    select,
    shape,
    slice,
    softmax,
    space_depth,
)
from edgekit.converters.tflite.ops.base import OpSpec

REGISTRY: dict[str, OpSpec] = {
    **conv.SPECS,
    **convtranspose.SPECS,
    **gemm.SPECS,
    **elementwise.SPECS,
    **activation.SPECS,
    **pool.SPECS,
    **shape.SPECS,
    **slice.SPECS,
    **softmax.SPECS,
    **pad.SPECS,
    **resize.SPECS,
    **gather.SPECS,
    **gelu.SPECS,
    **layernorm.SPECS,
    **instancenorm.SPECS,
    **recurrent.SPECS,
    **prelu.SPECS,
    **batchnorm.SPECS,
    **divide.SPECS,
    **power.SPECS,
    **expand.SPECS,
    **select.SPECS,
    **l2norm.SPECS,
    **argmax.SPECS,
    **space_depth.SPECS,
    **clip_tensor.SPECS,  # Clip with computed bounds; replaces activation's entry
}

# graph rewrites run after shape inference, before conversion: (graph, keep_float) -> count
FUSIONS = [gelu.fuse_gelu, layernorm_pattern.fuse_layernorm, l2norm.fuse_l2norm]

# what the writer emits as integer kernels (the rest of REGISTRY is float-only)
INT8_OPS = sorted(op for op, spec in REGISTRY.items() if spec.int8)

__all__ = ["FUSIONS", "INT8_OPS", "REGISTRY", "OpSpec"]
