"""The estimator's view of an ONNX model: tensors with byte sizes, and the nodes that execute.

Runtimes do not execute an ONNX file node by node: they fold constant subgraphs, drop
Identity/Dropout, and fuse QuantizeLinear/DequantizeLinear pairs around a node into one
int8 kernel (QLinearConv, QLinearMatMul, ...). The estimator costs what runs, so this
module rewrites a graph into that form, in one of two precisions:

* ``float32``: every Q/DQ pair dropped, every tensor float (the float variant of any model);
* ``int8``: a QDQ model as its runtime fuses it, or, for a float model, the graph that
  post-training static quantization (onnxruntime ``quantize_static``, QDQ) would produce.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from edgekit.converters.graph.shapes import fixed_input_shapes

from edgekit.errors import ModelFormatError, UnsupportedModelError

from .quantized import fuse_qdq, simulate_int8, strip_qdq
from .types import DROPPED, QDQ, SHAPE_OPS, Graph, Node, TensorInfo, resolve

__all__ = ["Graph", "Node", "TensorInfo", "load_model", "read_graph"]


def load_model(source: Any) -> Any:
    """An ``onnx.ModelProto`` from a ModelProto, an ``.onnx`` file or a built ``.edgekit``."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(source, onnx.ModelProto):
        return source
    path = Path(str(source))
    if not path.is_file():
        raise ModelFormatError(f"{path}: no such model file (expected an .onnx or .edgekit file)")
    if path.suffix == ".edgekit":
        from edgekit.artifact.archive import read_artifact

        artifact = read_artifact(path)
        entries = [m for m in artifact.manifest.get("models", []) if m.get("format") == "onnx"]
        if not entries:
            raise UnsupportedModelError(_no_onnx_hint(path, artifact.manifest))
        return onnx.load_model(io.BytesIO(artifact.read(entries[0]["path"])))
    try:
        return onnx.load(str(path))
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise ModelFormatError(f"{path}: not a readable ONNX model: {exc}") from exc


def _no_onnx_hint(path: Path, manifest: dict[str, Any]) -> str:
    """What to do with an artifact that holds no ONNX model (a default rpi build: tflite
    only): the estimator reads ONNX graphs, so name the source and the other ways."""
    formats = [m.get("format") for m in manifest.get("models", [])]
    source = manifest.get("source") or {}
    name = source.get("name") or "the source model"
    sha = str(source.get("sha256", ""))[:12]
    target = (manifest.get("target") or {}).get("name", "<board>")
    built = (manifest.get("estimate") or {}).get("variants", {}).get("int8")
    lines = [f"{path}: holds only {'/'.join(map(str, formats))} model(s) and the estimator reads "
             f"ONNX graphs. Estimate the source model this artifact was built from instead: "
             f"`edgekit estimate --target {target} {name}`"
             + (f" (sha256 {sha}...)" if sha else "")
             + ", or rebuild with `--format both` to keep the ONNX model in the artifact"]
    if built:
        lines.append(f"; the build's own estimate for {manifest['estimate'].get('target')} is "
                     f"shown by `edgekit inspect {path}`")
    return "".join(lines)


def _fix_dims(model: Any, batch: int) -> Any:
    """A copy with every symbolic input dim set (batch for the first, 1 otherwise), shapes
    inferred through the graph. Kept for the last few models by content (read only: a
    build reads its int8 model's graph six times, float and int8 variants, for the speed
    choice, the layer speeds and the estimate; each inference is ~0.1 s of EfficientNet-Lite0)."""
    import hashlib

    import onnx

    key = (hashlib.sha256(model.SerializeToString()).hexdigest(), batch)
    if key in _fixed:
        return _fixed[key]
    fixed = onnx.shape_inference.infer_shapes(fixed_input_shapes(model, batch, others=1),
                                              strict_mode=False, data_prop=True)
    _fixed[key] = fixed
    while len(_fixed) > KEPT_FIXED:
        _fixed.pop(next(iter(_fixed)))
    return fixed


KEPT_FIXED = 2
_fixed: dict[tuple[str, int], Any] = {}


FLOAT_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def _itemsize(elem_type: int) -> int:
    from onnx import helper

    try:
        return int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4


def _tensor_table(model: Any) -> dict[str, TensorInfo]:
    table: dict[str, TensorInfo] = {}
    graph = model.graph
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        ttype = vi.type.tensor_type
        shape = None
        if ttype.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in ttype.shape.dim]
            shape = None if any(d < 0 for d in dims) else tuple(dims)
        table[vi.name] = TensorInfo(shape, _itemsize(ttype.elem_type),
                                    ttype.elem_type in FLOAT_TYPES)
    for init in graph.initializer:
        table[init.name] = TensorInfo(tuple(init.dims), _itemsize(init.data_type),
                                      init.data_type in FLOAT_TYPES)
    for node in graph.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                table[node.output[0]] = TensorInfo(tuple(value.dims), _itemsize(value.data_type),
                                                   value.data_type in FLOAT_TYPES)
    return table


def _mark_int16(nodes: list[Node], tensors: dict[str, TensorInfo], consts: set[str]) -> None:
    """Integer kernels reading a 16-bit integer activation (the guard's int16 rung: 16x8)."""
    for node in nodes:
        if node.int8:
            node.int16 = any(i and i not in consts and i in tensors and not tensors[i].floating
                             and tensors[i].itemsize == 2 for i in node.inputs)


def _mark_int32_bias(nodes: list[Node], model: Any) -> None:
    """16x8 Gemm / MatMul on a constant int8 weight that the .tflite writer gives an int32 bias
    (``tflite/sixteen.bias_fits_int32``, the writer's own rule): LiteRT's optimized kernel.
    A fused node reads [x_int16, W_int8, (B_int32,) W_scale, W_zero, (B_scale, B_zero)]."""
    import numpy as np
    from edgekit.converters.tflite.sixteen import bias_fits_int32, bias_int64
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    scale_of = {n.output[0]: n.input[1] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    for node in nodes:
        if not node.int16 or node.op_type not in ("Gemm", "MatMul") or len(node.inputs) < 4:
            continue
        has_bias = node.op_type == "Gemm" and len(node.inputs) == 7
        names = [node.inputs[1], node.inputs[3 if has_bias else 2], scale_of.get(node.inputs[0], "")]
        if not all(n in inits for n in names) or inits[names[0]].data_type != 3:  # int8 weight
            continue
        weight, w_scale, x_scale = (numpy_helper.to_array(inits[n]) for n in names)
        if weight.ndim != 2:
            continue
        out_axis = 0 if node.op_type == "Gemm" and node.attrs.get("transB", 0) else 1
        channels = weight.shape[out_axis]
        raw = raw_scale = None
        if has_bias and node.inputs[2] in inits and node.inputs[5] in inits:
            raw = numpy_helper.to_array(inits[node.inputs[2]])
            raw_scale = numpy_helper.to_array(inits[node.inputs[5]])
        bias, _ = bias_int64(raw, raw_scale, float(np.ravel(x_scale)[0]), np.ravel(w_scale), channels)
        node.int32_bias = bias_fits_int32(weight, out_axis, bias)


COSTED_DOMAINS = ("", "ai.onnx", "com.microsoft")


def _nodes(model: Any) -> list[Node]:
    """The model's nodes; a node the cost model cannot cost (a subgraph: If, Loop, Scan; a
    domain other than standard ONNX and com.microsoft, such as ``ai.onnx.ml``'s trees) is
    kept, marked ``uncosted`` with the reason: the estimator times it on the host."""
    from onnx import helper

    subgraph = (helper.AttributeProto.GRAPH, helper.AttributeProto.GRAPHS)
    nodes = []
    for index, node in enumerate(model.graph.node):
        reason = ""
        if node.domain not in COSTED_DOMAINS:
            reason = f"domain {node.domain!r}"
        elif any(a.type in subgraph for a in node.attribute):
            reason = "control flow: a subgraph"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute
                 if a.type != helper.AttributeProto.TENSOR and a.type not in subgraph}
        nodes.append(Node(f"{node.name or node.op_type}#{index}", node.op_type,
                          list(node.input), list(node.output), attrs, uncosted=reason))
    return nodes


def _constants(nodes: list[Node], model: Any, tensors: dict[str, TensorInfo]) -> set[str]:
    """Tensors known at load time: runtimes fold the nodes that compute only from them.

    DequantizeLinear is never folded (runtimes keep it to fuse int8 kernels).
    """
    consts = {i.name for i in model.graph.initializer}
    for node in nodes:
        data = [i for i in node.inputs if i]
        if node.op_type == "DequantizeLinear" or node.uncosted:
            continue  # an uncosted node may read outer tensors its inputs do not name
        static_shape = node.op_type in SHAPE_OPS and tensors.get(data[0], TensorInfo(None, 4)).shape
        if static_shape or all(i in consts for i in data):
            consts.update(o for o in node.outputs if o)
    return consts


def read_graph(source: Any, precision: str = "float32", batch: int = 1) -> Graph:
    """Load, infer shapes and rewrite a model into what a runtime executes at ``precision``."""
    if precision not in ("float32", "int8"):
        raise UnsupportedModelError(f"precision must be 'float32' or 'int8', got {precision!r}")
    model = _fix_dims(load_model(source), batch)
    tensors = _tensor_table(model)
    nodes = _nodes(model)
    consts = _constants(nodes, model, tensors)
    init_names = {i.name for i in model.graph.initializer}
    inputs = [vi.name for vi in model.graph.input if vi.name not in init_names]
    outputs = [vi.name for vi in model.graph.output]
    qparams = {i for n in nodes if n.op_type in QDQ for i in n.inputs[1:] if i in consts}
    live = [n for n in nodes if not all(o in consts for o in n.outputs if o)]
    open_shapes = sorted({t for n in live for t in n.inputs + n.outputs if t and t not in consts
                          and tensors.get(t, TensorInfo(None, 4)).shape is None})
    if open_shapes:
        _probe_shapes(model, open_shapes, tensors)
    has_qdq = any(n.op_type in QDQ for n in live)
    if precision == "float32":
        live, alias = strip_qdq(live, tensors, consts)
    elif has_qdq:
        live, alias = fuse_qdq(live, consts, outputs)
        _mark_int16(live, tensors, consts)
        _mark_int32_bias(live, model)
    else:
        live, alias = simulate_int8(live, tensors, consts, outputs)
    live, drop_alias = _drop_identities(live)
    alias.update(drop_alias)
    for node in live:
        node.inputs = [resolve(alias, i) for i in node.inputs]
    outputs = [resolve(alias, o) for o in outputs]
    used = {t for n in live for t in n.inputs + n.outputs if t and t not in consts}
    unknown = sorted(t for t in used if tensors.get(t, TensorInfo(None, 4)).shape is None)
    return Graph(live, tensors, consts, qparams, inputs, outputs, precision, unknown)


def _probe_shapes(model: Any, names: list[str], tensors: dict[str, TensorInfo]) -> None:
    """Shapes that onnx's inference left open (shapes computed at run time by Shape ->
    Gather -> Concat -> Reshape chains): run the model once on zeros with onnxruntime,
    asking for those tensors too. Quietly does nothing when that is not possible."""
    try:
        import numpy as np
        from edgekit.converters.core.expose import Probe, unoptimized
    except ImportError:
        return
    try:
        probe = Probe(model, names, opener=unoptimized)
        dtypes = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
                  "tensor(int32)": np.int32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}
        feeds = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape],
                                  dtypes.get(i.type, np.float32)) for i in probe.session.get_inputs()}
        values = probe.run(feeds)
    except Exception:  # onnxruntime raises its own untyped errors; shapes stay unknown
        return
    for name, value in values.items():
        value = np.asarray(value)
        tensors[name] = TensorInfo(tuple(value.shape), value.dtype.itemsize,
                                   value.dtype.kind == "f")


def _drop_identities(nodes: list[Node]) -> tuple[list[Node], dict[str, str]]:
    alias = {n.outputs[0]: n.inputs[0] for n in nodes if n.op_type in DROPPED}
    return [n for n in nodes if n.op_type not in DROPPED], alias
