"""Find ONNX tensors that keep their data outside the model file, without importing onnx.

An artifact is self-contained. A TensorProto may instead say ``data_location: EXTERNAL``
with ``external_data: {location: "secret.txt", ...}``; onnxruntime, given the model as
bytes, resolves that path against the process's working directory and reads the file into
the model, so a hashed artifact could pull any readable file into its outputs. The device
has no onnx package, so this walks the protobuf wire format along the schema's paths to
every TensorProto (initializers, sparse initializers, node attributes, subgraphs of
If/Loop/Scan, functions, training graphs) and refuses any with external data.
"""

from __future__ import annotations

from collections.abc import Iterator

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


def external_tensors(model: bytes) -> list[str]:
    """Descriptions of the tensors whose data lives outside ``model`` (empty: none).
    ``ArtifactError`` when the bytes are not a protobuf message at all."""
    found: list[str] = []
    stack = [(_MODEL, 0, len(model), 0)]
    try:
        while stack:
            kind, start, end, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise _Malformed(f"nested deeper than {MAX_DEPTH} levels")
            children = _CHILDREN.get(kind, {})
            for number, wire, a, b in _fields(model, start, end):
                if kind == _TENSOR:
                    if (number == _TENSOR_EXTERNAL_DATA and wire == 2) or (
                            number == _TENSOR_DATA_LOCATION and wire == 0 and a != 0):
                        found.append(_describe(model, start, end))
                        break
                elif wire == 2 and number in children:
                    stack.append((children[number], a, b, depth + 1))
    except _Malformed as exc:
        raise ArtifactError(f"ONNX model: expected a protobuf ModelProto, got bytes that do "
                            f"not parse ({exc})") from exc
    return found


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


def check_self_contained(model: bytes, origin: str) -> None:
    """Refuse an ONNX model with any external tensor data (an artifact is self-contained)."""
    external = external_tensors(model)
    if external:
        raise ArtifactError(
            f"{origin}: the ONNX model keeps tensor data outside the artifact "
            f"({', '.join(external[:3])}); expected every initializer inside the model "
            "(an artifact is self-contained: re-export without external data)")
