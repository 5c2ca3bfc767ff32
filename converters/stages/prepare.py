"""Prepare the float model for quantization: shape inference and onnxruntime's pre-processing
(constant folding, BatchNorm fusion), which makes calibration ranges match the fused graph;
then elementwise spellings become the ops they spell (``fuse_activations.fuse_hardswish``:
``x * Clip(x + 3, 0, 6) / 6`` as ``HardSigmoid(x) * x``; ``fold_affine.fold_conv_affines``:
a Mul/Add/Sub/Div by a constant after a Conv, or by one value for all channels before it,
folded into its weights and bias), every node gets
a name of its own (``graph_names.name_nodes``) and every Gemm bias row becomes a vector
(``flat_gemm_biases``)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from edgekit.converters.graph.fold_affine import fold_conv_affines
from edgekit.converters.graph.fuse_activations import fuse_hardswish
from edgekit.converters.graph.names import name_nodes

from ..context import BuildContext
from ..pipeline import Stage


def flat_gemm_biases(graph: Any) -> int:
    """Gemm biases written as one row ``[1, N]`` (scikit-learn's and Keras' dense layers: the
    pre-processing fuses their MatMul + Add into a Gemm) become the vector ``[N]``, which
    broadcasts the same. onnxruntime's quantizer reads a per-channel bias element by element
    and raised "The truth value of an array with more than one element is ambiguous" on a
    row. Returns how many biases were reshaped (a shared one is copied, not edited)."""
    from edgekit.converters.graph.names import Names
    from onnx import numpy_helper

    inits = {i.name: i for i in graph.initializer}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    names = Names(graph)
    count = 0
    for node in graph.node:
        if node.op_type != "Gemm" or len(node.input) < 3 or node.input[2] not in inits:
            continue
        bias = inits[node.input[2]]
        if len(bias.dims) != 2 or bias.dims[0] != 1:
            continue
        row = numpy_helper.to_array(bias).reshape(-1)
        if readers[bias.name] == 1:
            bias.CopyFrom(numpy_helper.from_array(row, bias.name))
        else:
            copy = numpy_helper.from_array(row, names.fresh(f"{bias.name}_vector"))
            graph.initializer.append(copy)
            readers[bias.name] -= 1
            node.input[2] = copy.name
        count += 1
    return count
def _ort_tools_without_torch() -> None:
    """Register the package ``onnxruntime.tools`` without running its ``__init__``, which
    imports torch when it is installed (for ``infer_input_info``, a PyTorch export helper
    the build never calls): 1.5 s of CPU for every ONNX source (``python -X importtime``).
    ``quant_pre_process`` then imports its submodules (symbolic shape inference) as usual.
    Nothing to do when torch or the package is already loaded."""
    import importlib.util
    import sys

    if "onnxruntime.tools" in sys.modules or "torch" in sys.modules:
        return
    spec = importlib.util.find_spec("onnxruntime.tools")
    if spec is None or spec.submodule_search_locations is None:
        return
    sys.modules["onnxruntime.tools"] = importlib.util.module_from_spec(spec)


class Prepare(Stage):
    name = "prepare"
    requires = frozenset({"float_model", "float_path"})
    provides = frozenset({"float_model", "float_path"})

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, Any] = {}

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return self.used

    def run(self, ctx: BuildContext) -> None:
        import onnx

        _ort_tools_without_torch()
        from onnxruntime.quantization.shape_inference import quant_pre_process

        src = ctx.float_path
        dst = ctx.workdir / "prepared.onnx"
        logging.getLogger("onnxruntime").setLevel(logging.ERROR)
        # Symbolic shape inference fails on some exporter outputs; plain ONNX inference is
        # then enough for quantization, so retry without it rather than stop the build.
        for symbolic in (True, False):
            try:
                # onnxruntime's symbolic shape inference, when it gives up, saves
                # sym_shape_infer_temp.onnx and a <uuid>.data into the working directory:
                # make that the build's own temp folder (the user's may be read-only)
                with contextlib.chdir(ctx.workdir):
                    quant_pre_process(str(src), str(dst), skip_symbolic_shape=not symbolic,
                                      skip_optimization=False, skip_onnx_shape=False)
                self.used = {"quant_pre_process": True, "symbolic_shape_inference": symbolic}
                break
            except Exception as exc:  # noqa: BLE001 - both are attempts; the last one reports
                last = exc
        else:
            ctx.warn(f"onnxruntime pre-processing failed ({last}); using shape inference only")
            model = onnx.shape_inference.infer_shapes(ctx.float_model)
            onnx.save_model(model, str(dst))
            self.used = {"quant_pre_process": False, "error": str(last)[:200]}
        model = onnx.load(str(dst))
        # exporters' elementwise spellings fused before calibration, so that each is one
        # quantized op, not a chain of requantizations (Paddle2ONNX's hardswish and the
        # affine blocks next to its convolutions)
        fused = fuse_hardswish(model)
        folded = fold_conv_affines(model)
        # every node addressable by name from here on (the guard's --keep-float, the int16
        # rung, the layer report): the pre-processing leaves the nodes it inlines unnamed
        named = name_nodes(model.graph)
        flattened = flat_gemm_biases(model.graph)
        if named or flattened or fused or any(folded.values()):
            onnx.save_model(model, str(dst))
            self.used.update(named_nodes=named, flattened_gemm_biases=flattened,
                             fused_hardswish=fused,
                             folded_conv_affines={k: v for k, v in folded.items() if v})
        ctx.float_path = dst
        ctx.float_model = model
