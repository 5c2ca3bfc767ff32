"""Find ONNX tensors that keep their data outside the model file, without importing onnx.

An artifact is self-contained. A TensorProto may instead say ``data_location: EXTERNAL``
with ``external_data: {location: "secret.txt", ...}``; onnxruntime, given the model as
bytes, resolves that path against the process's working directory and reads the file into
the model, so a hashed artifact could pull any readable file into its outputs. The device
has no onnx package, so this walks the protobuf wire format along the schema's paths to
every TensorProto (initializers, sparse initializers, node attributes, subgraphs of
If/Loop/Scan, functions, training graphs) and refuses any with external data.

The same walk reads every declared tensor size (graph inputs, outputs and value infos,
initializer dims), so that a model declaring a tensor larger than the target's RAM budget is
refused before onnxruntime allocates anything, and finds the ``Loop`` nodes whose trip count
is not a constant (an initializer or a ``Constant`` output): such a loop may never end, so
the runtime bounds every run of that model (``edgekit/model.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from edgekit.errors import ArtifactError

MAX_DEPTH = 64  # nested subgraphs; a real model nests a few levels

# (message, field number) -> message type of that field, for the fields leading to tensors.
_MODEL, _GRAPH, _NODE, _ATTR, _TENSOR, _SPARSE, _FUNCTION, _TRAINING = range(8)
_CHILDREN: dict[int, dict[int, int]] = {
    _MODEL: {7: _GRAPH, 20: _TRAINING, 25: _FUNCTION},
    _TRAINING: {1: _GRAPH, 2: _GRAPH},
    _FUNCTION: {7: _NODE, 11: _ATTR},
    _GRAPH: {1: _NODE, 5: _TENSOR, 15: _SPARSE},
    _NODE: {5: _ATTR},
    _ATTR: {5: _TENSOR, 6: _GRAPH, 10: _TENSOR, 11: _GRAPH, 22: _SPARSE, 23: _SPARSE},
    _SPARSE: {1: _TENSOR, 2: _TENSOR},
}
_GRAPH_VALUE_INFOS = {11, 12, 13}  # GraphProto input, output, value_info
# bytes per element of TensorProto.DataType (STRING and unknown types counted as 4)
ELEMENT_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
                 14: 8, 15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1}
_TENSOR_EXTERNAL_DATA = 13  # repeated StringStringEntryProto
_TENSOR_DATA_LOCATION = 14  # enum DataLocation { DEFAULT = 0; EXTERNAL = 1; }


class _Malformed(Exception):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Malformed("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value or payload start, payload end) of one message."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value, pos
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise _Malformed("length past the end of its message")
            yield number, wire, pos, pos + length
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise _Malformed(f"unsupported wire type {wire}")
    if pos != end:
        raise _Malformed("message overruns its length")


@dataclass
class ModelScan:
    """What one pass over an ONNX model's bytes finds: tensors with external data, every
    declared tensor size (graph inputs, outputs, value infos, initializers: (name, elements,
    bytes per element)) and the Loop nodes whose trip count is not a constant."""

    external: list[str] = field(default_factory=list)
    tensors: list[tuple[str, int, int]] = field(default_factory=list)
    dynamic_loops: list[str] = field(default_factory=list)

    def largest(self) -> tuple[str, int] | None:
        """(name, bytes) of the largest declared tensor."""
        best = max(self.tensors, key=lambda t: t[1] * t[2], default=None)
        return None if best is None else (best[0], best[1] * best[2])


def _text(data: bytes, a: int, b: int) -> str:
    return data[a:b].decode("utf-8", "replace")[:80]


def _ints(data: bytes, number: int, wire: int, a: int, b: int) -> list[int]:
    """A repeated int64 field's values, packed (wire 2) or one by one (wire 0)."""
    if wire == 0:
        return [a]
    values, pos = [], a
    while pos < b:
        value, pos = _varint(data, pos)
        values.append(value)
    return values


def _dims_elements(dims: list[int]) -> int:
    """Elements of a declared shape; symbolic (absent, 0 or negative) dims count as 1."""
    count = 1
    for dim in dims:
        count *= dim if 0 < dim < 1 << 62 else 1
    return count


def _value_info(data: bytes, start: int, end: int) -> tuple[str, int, int] | None:
    """(name, elements, bytes per element) of a ValueInfoProto's tensor type, else None."""
    name, tensor = "?", None
    for number, wire, a, b in _fields(data, start, end):
        if number == 1 and wire == 2:
            name = _text(data, a, b)
        elif number == 2 and wire == 2:  # TypeProto: tensor_type = 1
            tensor = next(((ta, tb) for no, tw, ta, tb in _fields(data, a, b)
                           if no == 1 and tw == 2), None)
    if tensor is None:
        return None
    elem, dims = 1, []
    for number, wire, a, b in _fields(data, *tensor):
        if number == 1 and wire == 0:
            elem = a
        elif number == 2 and wire == 2:  # TensorShapeProto: dim = 1
            for no, tw, da, db in _fields(data, a, b):
                if no == 1 and tw == 2:
                    value = next((v for n, w, v, _ in _fields(data, da, db)
                                  if n == 1 and w == 0), 0)
                    dims.append(value)
    return name, _dims_elements(dims), ELEMENT_BYTES.get(elem, 4)


def _tensor_info(data: bytes, start: int, end: int) -> tuple[str, list[int], int]:
    name, dims, elem = "?", [], 1
    for number, wire, a, b in _fields(data, start, end):
        if number == 1 and wire in (0, 2):
            dims += _ints(data, number, wire, a, b)
        elif number == 2 and wire == 0:
            elem = a
        elif number == 8 and wire == 2:
            name = _text(data, a, b)
    return name, dims, elem


def scan_model(model: bytes) -> ModelScan:
    """One walk over the protobuf wire format (no onnx import); ``ArtifactError`` when the
    bytes are not a protobuf message at all."""
    found = ModelScan()
    constants: set[str] = set()
    loops: list[tuple[str, str]] = []  # (node name, trip count input)
    stack = [(_MODEL, 0, len(model), 0)]
    try:
        while stack:
            kind, start, end, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise _Malformed(f"nested deeper than {MAX_DEPTH} levels")
            children = _CHILDREN.get(kind, {})
            if kind == _TENSOR:
                name, dims, elem = _tensor_info(model, start, end)
                constants.add(name)
                found.tensors.append((name, _dims_elements(dims), ELEMENT_BYTES.get(elem, 4)))
            if kind == _NODE:
                _node(model, start, end, constants, loops)
            for number, wire, a, b in _fields(model, start, end):
                if kind == _TENSOR:
                    if (number == _TENSOR_EXTERNAL_DATA and wire == 2) or (
                            number == _TENSOR_DATA_LOCATION and wire == 0 and a != 0):
                        found.external.append(_describe(model, start, end))
                        break
                elif kind == _GRAPH and wire == 2 and number in _GRAPH_VALUE_INFOS:
                    info = _value_info(model, a, b)
                    if info is not None:
                        found.tensors.append(info)
                elif wire == 2 and number in children:
                    stack.append((children[number], a, b, depth + 1))
    except _Malformed as exc:
        raise ArtifactError(f"ONNX model: expected a protobuf ModelProto, got bytes that do "
                            f"not parse ({exc})") from exc
    found.dynamic_loops = [f"{name!r} (trip count {trips or 'none'!r})"
                           for name, trips in loops if trips not in constants]
    return found


def _node(model: bytes, start: int, end: int, constants: set[str],
          loops: list[tuple[str, str]]) -> None:
    """Record a Constant node's outputs and a Loop node's trip count input."""
    op, name, inputs, outputs = "", "?", [], []
    for number, wire, a, b in _fields(model, start, end):
        if wire != 2:
            continue
        if number == 1:
            inputs.append(_text(model, a, b))
        elif number == 2:
            outputs.append(_text(model, a, b))
        elif number == 3:
            name = _text(model, a, b)
        elif number == 4:
            op = _text(model, a, b)
    if op == "Constant":
        constants.update(outputs)
    elif op == "Loop":
        loops.append((name, inputs[0] if inputs else ""))


def external_tensors(model: bytes) -> list[str]:
    """Descriptions of the tensors whose data lives outside ``model`` (empty: none).
    ``ArtifactError`` when the bytes are not a protobuf message at all."""
    return scan_model(model).external


def _describe(model: bytes, start: int, end: int) -> str:
    """The tensor's name (TensorProto field 8) and external location, for the message."""
    name, location = "?", "?"
    for number, wire, a, b in _fields(model, start, end):
        if number == 8 and wire == 2:
            name = model[a:b].decode("utf-8", "replace")[:60]
        elif number == _TENSOR_EXTERNAL_DATA and wire == 2:  # {key: 1, value: 2}
            entry = {no: model[ka:kb] for no, kw, ka, kb in _fields(model, a, b) if kw == 2}
            if entry.get(1) == b"location":
                location = entry.get(2, b"").decode("utf-8", "replace")[:60]
    return f"{name!r} -> {location!r}"


def check_self_contained(model: bytes, origin: str) -> ModelScan:
    """Refuse an ONNX model with any external tensor data (an artifact is self-contained);
    returns the scan (declared sizes, dynamic loops) for the other checks."""
    scan = scan_model(model)
    external = scan.external
    if external:
        raise ArtifactError(
            f"{origin}: the ONNX model keeps tensor data outside the artifact "
            f"({', '.join(external[:3])}); expected every initializer inside the model "
            "(an artifact is self-contained: re-export without external data)")
    return scan
