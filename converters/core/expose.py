"""Intermediate tensors of an ONNX model as graph outputs, and the runs that read them.

Bias correction, AdaRound, equalization, range choice, the float-tail check, the layer
report, the accuracy guard and the shape probes all read tensors inside a model: each made
a copy of the model with those names appended to (or standing for) its graph outputs and ran
it with onnxruntime. This module is that one step: names in, a dict of arrays out.

The exposed copy lists each name once, after the model's own outputs (``only=True``: the
names alone, in the order given), so the copy's bytes are what every caller wrote before and
``run_dataset`` keeps its outputs by that content. A name must be a tensor of the top-level
graph (a node output, a graph input or an initializer: onnxruntime returns an input or an
initializer as given); a tensor inside an ``If``/``Loop`` body cannot be a graph output, and
asking for one, or for a name the graph does not hold, is an ``InternalError`` naming it.

The session is the caller's choice (``opener``), because the callers differ on purpose:
the build's ``runner.session`` (edgekit's optimizations, threads, exact int8 math),
onnxruntime's own defaults (``ort_defaults``: float-only probes) or no optimization at all
(``unoptimized``: a shape probe that must run whatever the optimizers would refuse).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.core.runner import run_dataset, session
from edgekit.converters.graph.scopes import subgraphs

from edgekit.errors import InternalError

if TYPE_CHECKING:
    import onnx
    import onnxruntime

# model bytes -> the onnxruntime session that runs them
Opener = Callable[[bytes], "onnxruntime.InferenceSession"]


def with_outputs(model: onnx.ModelProto, names: Iterable[str], only: bool = False) -> onnx.ModelProto:
    """A copy of ``model`` (an ``onnx.ModelProto``) whose graph outputs are its own followed by
    each of ``names`` that is not one already; ``only``: ``names`` alone, each once, in order.
    onnxruntime types the added outputs itself. ``model`` is not modified."""
    import onnx

    wanted = list(dict.fromkeys(names))
    _check_top_level(model.graph, wanted)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    if only:
        del copy.graph.output[:]
    present = {o.name for o in copy.graph.output}
    copy.graph.output.extend(onnx.ValueInfoProto(name=n) for n in wanted if n not in present)
    return copy


def exposed_bytes(model: onnx.ModelProto, names: Iterable[str], only: bool = False) -> bytes:
    """``with_outputs`` serialized: what ``runner.session`` and ``run_dataset`` take."""
    return with_outputs(model, names, only).SerializeToString()


class Probe:
    """One session over ``model`` with ``names`` exposed; ``run`` and ``over`` return their
    values by name. ``session`` is the onnxruntime session itself (its inputs, for feeds)."""

    def __init__(self, model: onnx.ModelProto, names: Iterable[str], only: bool = False,
                 opener: Opener = session) -> None:
        self.names = list(dict.fromkeys(names))
        self.session = opener(exposed_bytes(model, self.names, only))
        self._constants = _constants(model, self.names)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The named tensors for one set of feeds, as onnxruntime returns them."""
        return dict(zip(self.names, self.session.run(self.names, dict(feeds)), strict=True))

    def over(self, data: Dataset) -> dict[str, np.ndarray]:
        """The named tensors for every sample of ``data`` (``run_dataset``: batched, each
        output joined on its batch axis and that axis first; an initializer once, as stored,
        not one copy per batch)."""
        outputs = [o.name for o in self.session.get_outputs()]
        values = dict(zip(outputs, run_dataset(self.session, data), strict=True))
        return {name: self._constants.get(name, values[name]) for name in self.names}


def values_over(model: onnx.ModelProto, names: Iterable[str], data: Dataset, only: bool = False,
                exact_int8: bool = False) -> dict[str, np.ndarray]:
    """The named tensors for every sample of ``data`` from ``run_dataset`` on the exposed
    copy's bytes: the same copy over the same samples runs once per process (``Probe.over``'s
    layout, an initializer as stored)."""
    wanted = list(dict.fromkeys(names))
    probe = with_outputs(model, wanted, only)
    values = dict(zip([o.name for o in probe.graph.output],
                      run_dataset(probe.SerializeToString(), data, exact_int8=exact_int8), strict=True))
    constants = _constants(model, wanted)
    return {name: constants.get(name, values[name]) for name in wanted}


def ort_defaults(model: bytes) -> onnxruntime.InferenceSession:
    """onnxruntime's own session defaults on the CPU (what the float-only probes of
    equalization, range choice and the packed-output split have always used)."""
    import onnxruntime as ort

    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def unoptimized(model: bytes) -> onnxruntime.InferenceSession:
    """A silent session with every graph optimization off: a shape probe runs the graph as
    written, even where an optimizer would refuse it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _constants(model: onnx.ModelProto, names: list[str]) -> dict[str, np.ndarray]:
    """The initializers among ``names`` that no feed overrides (not graph inputs): their value
    is the same for every sample, so a batched run would repeat it once per batch."""
    from onnx import numpy_helper

    wanted = set(names) - {i.name for i in model.graph.input}
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name in wanted}


def _check_top_level(graph: onnx.GraphProto, names: list[str]) -> None:
    """Every name a tensor of ``graph`` itself, else an ``InternalError`` saying where it is."""
    here = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    here |= {t.values.name for t in graph.sparse_initializer}
    here |= {o for node in graph.node for o in node.output}
    missing = [n for n in names if n not in here]
    if not missing:
        return
    nested = _nested_tensors(graph)
    inner = [n for n in missing if n in nested]
    absent = [n for n in missing if n not in nested]
    parts = []
    if inner:
        parts.append(f"{inner} live in a subgraph (an If/Loop/Scan body), which onnxruntime "
                     "cannot return as graph outputs")
    if absent:
        parts.append(f"{absent} are no tensor of the graph")
    raise InternalError("cannot expose tensors as graph outputs: expected tensors of the "
                        f"top-level graph (node outputs, inputs, initializers); {'; '.join(parts)}")


def _nested_tensors(graph: onnx.GraphProto) -> set[str]:
    """Every name defined inside the subgraphs of ``graph``'s nodes, at any depth."""
    found: set[str] = set()
    todo = [sub for node in graph.node for sub in subgraphs(node)]
    while todo:
        sub = todo.pop()
        found |= {i.name for i in sub.input} | {t.name for t in sub.initializer}
        for node in sub.node:
            found.update(node.output)
            todo.extend(subgraphs(node))
    return found
