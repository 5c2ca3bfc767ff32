"""A float output computed from int8 layers: how far one quantization step upstream moves it.

When the guard keeps a model's last layers float (squeezenet's classifier), its output has
no quantization step, but it still inherits the int8 layers' cross-ISA rounding: the Arm
kernels land up to a step or two from this host's at the last int8 tensors, and the float
tail carries that into the output (squeezenet: up to 0.0037 on the emulated A72, with host
and A72 both 44.5 dB from the float model). A relative tolerance of 1e-4 of the largest value
fails such a correct artifact; no tolerance at all would not see a wrong one.

``float_step`` measures, on the test vectors' own inputs, the float tail's response to one
step at its int8 boundary: every boundary element moved by one step of its own scale, with
random signs (a few draws, the largest change of any output element kept). ``verify`` then
judges the output in units of that float step with the same share-within-one-step, max-step
and slice-SQNR bounds as an int8 output of the same depth. A graph with no int8 tensor
upstream of an output (a pure float graph) gets 0.0 and keeps the tight float rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.graph.scopes import node_reads

DRAWS = 4  # sign draws at the boundary: the largest response over them is the float step
SEED = 0


def int8_boundary(model: Any, output: str) -> dict[str, str]:
    """The int8 activations a float ``output`` is computed from: boundary tensor -> its
    scale initializer (the outputs of 8-bit ``DequantizeLinear`` of non-constant inputs met on
    the way back from ``output`` through float and int16 nodes). Empty when ``output`` is itself
    dequantized (an int8 output) or nothing quantized feeds it (a pure float graph)."""
    from onnx import TensorProto

    graph = model.graph  # an onnx.ModelProto
    inits = {t.name for t in graph.initializer}
    wide = {t.name for t in graph.initializer  # 16-bit zero points: an int16 (a16w8) rung
            if t.data_type in (TensorProto.INT16, TensorProto.UINT16)}
    producer = {o: n for n in graph.node for o in n.output}
    first = producer.get(output)
    if first is None or first.op_type == "DequantizeLinear":
        return {}
    boundary: dict[str, str] = {}
    seen, todo = set(), [output]
    while todo:
        name = todo.pop()
        node = producer.get(name)
        if name in seen or node is None:
            continue
        seen.add(name)
        if node.op_type == "DequantizeLinear" and node.input[0] in inits:
            continue  # a constant's DequantizeLinear: a float-kept layer's weight
        if node.op_type == "DequantizeLinear" and (len(node.input) < 3
                                                   or node.input[2] not in wide):
            boundary[name] = node.input[1]
            continue
        # float nodes, and int16 Q/DQ: the int8 rounding upstream reaches the output through
        # them, so the step is taken at the int8 tensors beyond (an If's branches read
        # outer-scope tensors too: those are its inputs as well)
        todo += [i for i in node_reads(node) if i not in inits]
    return boundary


def float_step(model: Any, output: str, feeds: dict[str, np.ndarray],
               axes: dict[str, int] | None = None) -> float:
    """The largest change of any element of ``output`` over ``DRAWS`` random-sign one-step
    moves of every element of its int8 boundary, on ``feeds`` (0.0: no int8 boundary)."""
    from edgekit.converters.core.expose import Probe
    from edgekit.converters.core.runner import one_by_one, session
    from onnx import numpy_helper

    boundary = int8_boundary(model, output)
    if not boundary:
        return 0.0
    inits = {t.name: t for t in model.graph.initializer}
    scales = {t: np.asarray(numpy_helper.to_array(inits[s]), np.float64)
              for t, s in boundary.items() if s in inits}
    names = sorted(boundary)
    probe = Probe(model, names, opener=lambda m: session(m, threads=1, exact_int8=True))
    tail_sess = session(tail_model(model, names, output).SerializeToString(), threads=1)
    tail_inputs = [i.name for i in tail_sess.get_inputs()]
    rng = np.random.default_rng(SEED)
    worst = 0.0
    for sample in one_by_one(feeds, axes):  # each on its inputs' batch axes (``axes``)
        values = probe.run(sample)
        base_feeds = {n: values[n] if n in values else sample[n] for n in tail_inputs}
        base = np.asarray(tail_sess.run([output], base_feeds)[0], np.float64)
        for _ in range(DRAWS):
            moved = dict(base_feeds)
            for n in names:
                if n in moved and n in scales:
                    signs = rng.choice([-1.0, 1.0], size=values[n].shape)
                    moved[n] = (values[n] + signs * _broadcast(scales[n], values[n].shape)
                                ).astype(values[n].dtype)
            got = np.asarray(tail_sess.run([output], moved)[0], np.float64)
            worst = max(worst, float(np.abs(got - base).max()) if got.size else 0.0)
    return worst


def tail_model(model: Any, boundary: list[str], output: str) -> Any:
    """The subgraph computing ``output`` from the boundary tensors (fed as float inputs) and
    any graph input reached without crossing them, its nodes in the original order."""
    from onnx import TensorProto, helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    inputs = {i.name: i for i in graph.input}
    stop = set(boundary)
    keep, used, reached, todo = set(), set(), [], [output]
    while todo:
        name = todo.pop()
        if name in used:
            continue
        used.add(name)
        node = producer.get(name)
        if name in stop or node is None:
            if name in inputs and name not in stop:
                reached.append(inputs[name])
            continue
        keep.add(id(node))
        todo += node_reads(node)  # a subgraph's outer-scope reads must be in the tail too
    feeds = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in boundary]
    outs = [o for o in graph.output if o.name == output] or [
        helper.make_tensor_value_info(output, TensorProto.FLOAT, None)]
    tail = helper.make_graph([n for n in graph.node if id(n) in keep], "float_tail",
                             feeds + reached, outs,
                             [t for name, t in inits.items() if name in used])
    return helper.make_model(tail, opset_imports=model.opset_import, ir_version=model.ir_version)


def _broadcast(scale: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A per-tensor scale as is; a per-channel one along axis 1 (the activations' channels)."""
    if scale.ndim == 0 or scale.size == 1:
        return scale.reshape(())
    view = [1] * len(shape)
    view[1 if len(shape) > 1 else 0] = -1
    return scale.reshape(view)
