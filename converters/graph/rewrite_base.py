"""What the float-graph fusions before quantization share (``fold_affine.py``,
``fuse_activations.py``): a view of one graph's producers, readers and constant
initializers, the edits they make (drop a node, re-point a tensor, write a new constant
without touching one another reader shares) and the clean-up after them.

A fusion removes a node by making its producer write the removed node's output name, so
readers and graph outputs downstream are untouched and every tensor keeps one producer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.graph.names import Names
from edgekit.converters.graph.scopes import node_reads


class GraphView:
    """Producers, readers and float constants of ``graph`` (top level), kept current by the
    edits below. Constants are float32 initializers and Constant nodes (an edited constant
    becomes an initializer)."""

    def __init__(self, graph: Any) -> None:
        from onnx import numpy_helper

        self.graph = graph
        self.names = Names(graph)
        self.outputs = {o.name for o in graph.output}
        self.inits = {i.name: i for i in graph.initializer}
        self._arrays: dict[str, np.ndarray] = {}
        self._numpy_helper = numpy_helper
        self.producer: dict[str, Any] = {}
        self.readers: dict[str, list[Any]] = {}
        for node in graph.node:
            self._index(node)
            if node.op_type == "Constant" and len(node.attribute) == 1 \
                    and node.attribute[0].name == "value" and node.attribute[0].t.data_type == 1:
                # raw exporter graphs (before onnxruntime's folding) hold constants as nodes
                self._arrays[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)

    def _index(self, node: Any) -> None:
        for out in node.output:
            self.producer[out] = node
        for name in node_reads(node):  # a Loop/If body's outer-scope reads count (SLANet)
            self.readers.setdefault(name, []).append(node)

    def const(self, name: str) -> np.ndarray | None:
        """The float32 value of initializer or Constant node ``name`` (None for anything
        else)."""
        if name in self._arrays:
            return self._arrays[name]
        init = self.inits.get(name)
        if init is None or init.data_type != 1:  # TensorProto.FLOAT
            return None
        self._arrays[name] = self._numpy_helper.to_array(init)
        return self._arrays[name]

    def only_reader(self, tensor: str) -> Any | None:
        """The one node reading ``tensor`` when nothing else does (not a graph output)."""
        users = self.readers.get(tensor, [])
        if len(users) != 1 or tensor in self.outputs:
            return None
        return users[0]

    def set_const(self, node: Any, index: int, value: np.ndarray, base: str) -> None:
        """Give ``node`` the constant ``value`` as input ``index``: the initializer is
        rewritten in place when ``node`` is its one reader, else a fresh one is added (a
        constant another node shares keeps its value)."""
        value = np.ascontiguousarray(value, dtype=np.float32)
        old = node.input[index] if index < len(node.input) else ""
        if old and old in self.inits and self.readers.get(old) == [node] \
                and old not in self.outputs:
            self.inits[old].CopyFrom(self._numpy_helper.from_array(value, old))
            self._arrays[old] = value
            return
        name = self.names.fresh(base)
        init = self._numpy_helper.from_array(value, name)
        self.graph.initializer.append(init)
        self.inits[name] = self.graph.initializer[-1]
        self._arrays[name] = value
        while len(node.input) <= index:
            node.input.append("")
        if old:
            self.readers[old] = [r for r in self.readers.get(old, []) if r is not node]
        node.input[index] = name
        self.readers.setdefault(name, []).append(node)

    def bypass(self, node: Any, keep: str) -> None:
        """Remove the one-input-one-output ``node`` (reading ``keep``, produced by a node
        whose only reader is ``node``): the producer of ``keep`` writes ``node``'s output
        name instead."""
        out = node.output[0]
        producer = self.producer[keep]
        producer.output[list(producer.output).index(keep)] = out
        self.producer[out] = producer
        del self.producer[keep]
        self.readers.pop(keep, None)
        self.drop_reads(node)
        self.graph.node.remove(node)

    def skip(self, node: Any, source: str) -> None:
        """Remove ``node`` whose output's readers read ``source`` instead (``source`` keeps
        its producer; ``node``'s output must not be a graph output)."""
        out = node.output[0]
        for reader in self.readers.pop(out, []):
            for i, name in enumerate(reader.input):
                if name == out:
                    reader.input[i] = source
            self.readers.setdefault(source, []).append(reader)
        self.producer.pop(out, None)
        self.drop_reads(node)
        self.graph.node.remove(node)

    def drop_reads(self, node: Any) -> None:
        for name in node_reads(node):
            if name in self.readers:
                self.readers[name] = [r for r in self.readers[name] if r is not node]

    def forget_shape(self, tensor: str) -> None:
        """Drop the shape record of ``tensor`` (its shape changed; inference writes it anew)."""
        infos = [v for v in self.graph.value_info if v.name != tensor]
        if len(infos) != len(self.graph.value_info):
            del self.graph.value_info[:]
            self.graph.value_info.extend(infos)

    def add_node(self, node: Any, before: Any) -> None:
        """Insert ``node`` just before ``before`` (topological order kept)."""
        index = list(self.graph.node).index(before)
        self.graph.node.insert(index, node)
        self._index(self.graph.node[index])

    def finish(self) -> None:
        """Drop the initializers nothing reads any more and the shape records of tensors no
        node writes (onnx's checker keeps neither valid nor useful)."""
        read = {name for node in self.graph.node for name in node_reads(node)}
        read |= self.outputs
        unread = [n for n in self.graph.node if n.op_type == "Constant" and n.output[0] not in read]
        for node in unread:
            self.graph.node.remove(node)
        keep = [i for i in self.graph.initializer if i.name in read]
        if len(keep) != len(self.graph.initializer):
            del self.graph.initializer[:]
            self.graph.initializer.extend(keep)
        written = {o for node in self.graph.node for o in node.output}
        infos = [v for v in self.graph.value_info if v.name in written]
        if len(infos) != len(self.graph.value_info):
            del self.graph.value_info[:]
            self.graph.value_info.extend(infos)


def channel_vector(value: np.ndarray, rank: int, channels: int) -> np.ndarray | None:
    """``value`` as one number per channel (axis 1) of a rank-``rank`` tensor with
    ``channels`` channels, when broadcasting it against that tensor scales or shifts each
    channel alone (a scalar, ``[C]`` only for rank 2... laid out ``[C, 1, 1]``, ``[1, C, 1,
    1]``); None when it would vary along another axis or widen the tensor."""
    if value.ndim > rank:
        return None
    shape = (1,) * (rank - value.ndim) + value.shape
    if any(d != 1 for axis, d in enumerate(shape) if axis != 1):
        return None
    if shape[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1), (channels,)).astype(np.float32)
