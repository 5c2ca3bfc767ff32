"""The manifest of a ``.edgekit`` artifact as typed, frozen records, validated once.

The manifest is the contract between the host (converters) and the device (runtime); see
``edgekit/artifact.py`` for the file layout. ``Manifest.from_dict`` checks every key the
runtime relies on and raises ``ArtifactError`` naming the field, what was expected and what
came; past it the runtime reads fields, never nested dict keys. Sections the runtime does
not interpret (stages, quantization, validation, host reports such as ``estimate``) stay
plain data, and ``raw`` keeps the whole file content for tools that show it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from edgekit.errors import ArtifactError, TargetError
from edgekit.targets import Profile, profile_from_dict
from edgekit.zipread import safe_member_name

SCHEMA_VERSION = 1
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
DTYPES = frozenset({"float32", "float16", "float64", "int8", "uint8", "int16", "uint16",
                    "int32", "int64", "bool"})
MAX_RANK = 8
MAX_TENSORS = 256
# a layer's arithmetic width in ``layers[]``: int16 is 16-bit activations with int8 weights
PRECISIONS = ("int8", "int16", "fp16", "float")

@dataclass(frozen=True)
class TargetInfo:
    """The board the artifact was built for, with the full profile used."""

    name: str
    sha256: str
    profile: Profile


@dataclass(frozen=True)
class TensorEntry:
    """One ``inputs[]`` / ``outputs[]`` entry. ``data`` is the entry as stored (backends and
    ``TensorSpec`` read optional keys such as ``quantization`` from it)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    layout: str
    preprocess: dict[str, Any] | None
    labels: tuple[str, ...] | None
    data: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class ModelEntry:
    """One ``models[]`` entry: a model file, its format and the runtime it was checked on."""

    format: str
    path: str
    runtime: str
    bytes: int | None  # the model file's size as built (None: not stated)
    data: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class OutputTolerance:
    """What ``verify`` accepts for one output, over all test vectors of a format: at least
    ``within_1_step`` of the elements within one quantization step of the stored value, none
    further than ``max_steps``, and every channel slice (``slices`` along ``axis``) at least
    ``min_sqnr_db`` against the stored output (a float-space check: an error spread over a
    whole slice fails it even when each element is within the step bounds)."""

    within_1_step: float
    max_steps: float
    min_sqnr_db: float | None = None
    axis: int = 1
    slices: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"within_1_step": self.within_1_step, "max_steps": self.max_steps,
                "min_sqnr_db": self.min_sqnr_db, "axis": self.axis,
                "slices": [list(s) for s in self.slices]}


# artifacts from before per-output tolerances: every element within one step
ONE_STEP = OutputTolerance(within_1_step=1.0, max_steps=1.0)


@dataclass(frozen=True)
class TestVectorsEntry:
    path: str
    count: int
    tolerance: float | str  # a number, or how verify derives it ("1 quantization step ...")
    outputs: dict[str, OutputTolerance] = field(default_factory=dict)  # output name -> bounds
    basis: str = ""  # where the bounds come from (the study, the model's depth)

    def for_output(self, name: str) -> OutputTolerance:
        return self.outputs.get(name, ONE_STEP)


@dataclass(frozen=True)
class LayerEntry:
    """One ``layers[]`` entry: a compute layer of the shipped model, the precision it runs in
    and the SQNR of its output against the float model (None: not measured), with why it
    runs wider than int8 when the build knows."""

    name: str
    op: str
    precision: str
    sqnr_db: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "op": self.op, "precision": self.precision,
                                 "sqnr_db": self.sqnr_db}
        if self.reason:
            entry["reason"] = self.reason
        return entry


@dataclass(frozen=True)
class PruningEntry:
    """What pruning removed: the width kept per layer (``channels``: before, after) and how
    the widths were chosen (``uniform``, ``sensitivity``; ``sparsity`` for ONNX sources)."""

    method: str
    ratio: float
    widths: str
    channels: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class Manifest:
    schema_version: int
    edgekit_version: str
    created: str  # older artifacts: the build time; new ones carry content_key instead
    target: TargetInfo
    inputs: tuple[TensorEntry, ...]
    outputs: tuple[TensorEntry, ...]
    models: tuple[ModelEntry, ...]
    test_vectors: TestVectorsEntry | None
    files: dict[str, str]
    source: dict[str, Any] = field(default_factory=dict, compare=False)
    quantization: dict[str, Any] = field(default_factory=dict, compare=False)
    validation: dict[str, Any] = field(default_factory=dict, compare=False)
    layers: tuple[LayerEntry, ...] = ()
    pruning: PruningEntry | None = field(default=None, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # sha256 over the build's inputs (source, data, profile, options, versions): the same key
    # means the same bytes; "" in artifacts from before deterministic builds
    content_key: str = ""

    @classmethod
    def from_dict(cls, data: Any, origin: str = "manifest.json") -> Manifest:
        """Validate a parsed ``manifest.json``; ``ArtifactError`` on the first problem."""
        where = _Where(origin)
        where.expect(data, dict, "manifest", "a JSON object")
        version = data.get("schema_version")
        # bool is an int to Python: ``true`` must not pass for version 1
        if type(version) is not int or version != SCHEMA_VERSION:
            raise ArtifactError(
                f"{origin}: manifest schema_version {_short(version)}; this edgekit reads "
                f"version {SCHEMA_VERSION} (rebuild the artifact or upgrade edgekit)")
        target = where.field(data, "target", dict, "an object")
        try:
            profile = profile_from_dict(where.field(target, "profile", dict, "an object",
                                                    "target."), origin=f"{origin} target.profile")
        except TargetError as exc:
            raise ArtifactError(str(exc)) from exc
        except (TypeError, ValueError, AttributeError, KeyError, RecursionError,
                OverflowError) as exc:
            raise ArtifactError(f"{origin}: target.profile must be a valid target profile, "
                                f"got one that fails: {type(exc).__name__}: {exc}") from exc
        files = where.field(data, "files", dict, "an object mapping member -> sha256", default={})
        for member, digest in files.items():
            if not safe_member_name(member) or member == "manifest.json":
                raise ArtifactError(f"{origin}: files key must be a plain member name (no "
                                    f"folders or '..'), got {_short(member)}")
            if not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest):
                raise ArtifactError(f"{origin}: files[{member!r}] must be a sha256 hex string "
                                    f"(64 lowercase hex digits), got {_short(digest)}")
        models = tuple(_model(where, e, i, files) for i, e in enumerate(
            where.field(data, "models", list, "a list of model entries")))
        if not models:
            raise ArtifactError(f"{origin}: models is empty (expected at least one model entry)")
        vectors = data.get("test_vectors")
        key = where.field(data, "content_key", str, "a sha256 hex string", default="")
        if key and not SHA256_HEX.fullmatch(key):
            raise ArtifactError(f"{origin}: content_key must be a sha256 hex string (64 "
                                f"lowercase hex digits), got {_short(key)}")
        inputs = _tensors(where, data, "inputs")
        if not inputs:
            raise ArtifactError(f"{origin}: inputs is empty (expected at least one input)")
        return cls(
            schema_version=version,
            edgekit_version=where.field(data, "edgekit_version", str, "a string", default=""),
            created=where.field(data, "created", str, "a string", default=""),
            target=TargetInfo(where.field(target, "name", str, "a string", "target."),
                              where.field(target, "sha256", str, "a string", "target.",
                                          default=""), profile),
            inputs=inputs,
            outputs=_tensors(where, data, "outputs"),
            models=models,
            test_vectors=None if vectors is None or vectors == {} else _vectors(
                where, vectors, files),
            files=dict(files),
            source=where.field(data, "source", dict, "an object", default={}),
            quantization=where.field(data, "quantization", dict, "an object", default={}),
            validation=where.field(data, "validation", dict, "an object", default={}),
            layers=tuple(_layer(where, e, f"layers[{i}]") for i, e in enumerate(
                where.field(data, "layers", list, "a list of layer entries", default=[]))),
            pruning=_pruning(where, data.get("pruning")),
            raw=data,
            content_key=key,
        )

    def member_bytes(self, member: str) -> int | None:
        """The manifest's figure for a member's size (model entries state theirs)."""
        return next((m.bytes for m in self.models if m.path == member), None)

    def model(self, fmt: str) -> ModelEntry | None:
        return next((m for m in self.models if m.format == fmt), None)


class _Where:
    """Error messages that name the artifact, the field, what was expected and what came."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def expect(self, value: Any, kind: type | tuple[type, ...], name: str,
               expected: str) -> None:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ArtifactError(f"{self.origin}: {name} must be {expected}, got "
                                f"{type(value).__name__} {_short(value)}")

    def field(self, table: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
              prefix: str = "", default: Any = ...) -> Any:
        if key not in table or (table[key] is None and default is not ...):
            if default is not ...:  # an optional field given as null counts as absent
                return default
            raise ArtifactError(f"{self.origin}: missing field '{prefix}{key}' (expected "
                                f"{expected})")
        self.expect(table[key], kind, prefix + key, expected)
        return table[key]


def _pruning(where: _Where, entry: Any) -> PruningEntry | None:
    if entry is None:
        return None
    where.expect(entry, dict, "pruning", "an object")
    method = where.field(entry, "method", str, "a string", "pruning.")
    ratio = where.field(entry, "ratio", (int, float), "a number", "pruning.")
    widths = where.field(entry, "widths", str, "a string", "pruning.",
                         default="uniform" if method.startswith("structured") else "sparsity")
    channels: dict[str, tuple[int, int]] = {}
    for name, pair in where.field(entry, "channels", dict, "an object", "pruning.",
                                  default={}).items():
        if not (isinstance(pair, list) and len(pair) == 2
                and all(type(v) is int and v >= 0 for v in pair)):
            raise ArtifactError(f"{where.origin}: pruning.channels[{name!r}] must be [before, "
                                f"after] channel counts, got {_short(pair)}")
        channels[name] = (pair[0], pair[1])
    return PruningEntry(method, float(ratio), widths, channels)


def _finite(value: int | float) -> bool:
    """A number that is a finite float (a 400-digit int is not: float() overflows)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tensors(where: _Where, data: dict[str, Any], key: str) -> tuple[TensorEntry, ...]:
    entries = where.field(data, key, list, "a list of tensor entries")
    if len(entries) > MAX_TENSORS:
        raise ArtifactError(f"{where.origin}: {key} must hold at most {MAX_TENSORS} entries, "
                            f"got {len(entries)}")
    tensors = tuple(_tensor(where, e, f"{key}[{i}]") for i, e in enumerate(entries))
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise ArtifactError(f"{where.origin}: {key} names must be unique, got {names[:8]}")
    return tensors


def _tensor(where: _Where, entry: Any, name: str) -> TensorEntry:
    where.expect(entry, dict, name, "an object")
    tensor_name = where.field(entry, "name", str, "a string", f"{name}.")
    shape = where.field(entry, "shape", list, "a list of dims", f"{name}.")
    if len(shape) > MAX_RANK:
        raise ArtifactError(f"{where.origin}: {name}.shape must have at most {MAX_RANK} dims, "
                            f"got {len(shape)}")
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int | str) or (
                isinstance(dim, int) and not 0 <= dim < 1 << 31):
            raise ArtifactError(f"{where.origin}: {name}.shape must hold ints >= 0 or names, "
                                f"got {_short(dim)}")
    dtype = where.field(entry, "dtype", str, "a string", f"{name}.", default="float32")
    if dtype not in DTYPES:
        raise ArtifactError(f"{where.origin}: {name}.dtype must be one of "
                            f"{', '.join(sorted(DTYPES))}, got {_short(dtype)}")
    labels = where.field(entry, "labels", list, "a list of strings", f"{name}.", default=None)
    if labels is not None and not all(isinstance(label, str) for label in labels):
        raise ArtifactError(f"{where.origin}: {name}.labels must be a list of strings, got "
                            f"{_short(labels)}")
    _quantization(where, entry, name)
    return TensorEntry(
        name=tensor_name,
        shape=tuple(shape),
        dtype=dtype,
        layout=where.field(entry, "layout", str, "a string", f"{name}.", default=""),
        preprocess=where.field(entry, "preprocess", dict, "an object", f"{name}.",
                               default=None) or None,
        labels=tuple(labels) if labels else None,
        data=entry,
    )


def _quantization(where: _Where, entry: dict[str, Any], name: str) -> None:
    """``quantization``: absent/empty, or a finite scale > 0 and an integer zero point."""
    q = where.field(entry, "quantization", dict, "an object", f"{name}.", default=None)
    if not q:
        return
    scale, zero_point = q.get("scale"), q.get("zero_point", 0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not (
            _finite(scale) and scale > 0):
        raise ArtifactError(f"{where.origin}: {name}.quantization.scale must be a finite "
                            f"number > 0, got {_short(scale)}")
    if isinstance(zero_point, bool) or not isinstance(zero_point, int) or not (
            -(1 << 15) <= zero_point < 1 << 16):
        raise ArtifactError(f"{where.origin}: {name}.quantization.zero_point must be an "
                            f"integer in the int16/uint16 range, got {_short(zero_point)}")


def _model(where: _Where, entry: Any, i: int, files: dict[str, str]) -> ModelEntry:
    name = f"models[{i}]"
    where.expect(entry, dict, name, "an object")
    path = where.field(entry, "path", str, "a member name", f"{name}.")
    if path not in files:
        raise ArtifactError(f"{where.origin}: {name}.path must name a member listed in files "
                            f"({', '.join(sorted(files)) or 'none'}), got {_short(path)}")
    size = where.field(entry, "bytes", int, "an int >= 0", f"{name}.", default=None)
    if size is not None and size < 0:
        raise ArtifactError(f"{where.origin}: {name}.bytes must be an int >= 0, got {size}")
    digest = where.field(entry, "sha256", str, "a sha256 hex string", f"{name}.", default=None)
    if digest is not None and digest != files[path]:
        raise ArtifactError(f"{where.origin}: {name}.sha256 must equal files[{path!r}] "
                            f"({files[path][:12]}...), got {_short(digest)}")
    return ModelEntry(
        format=where.field(entry, "format", str, "a string", f"{name}."),
        path=path,
        runtime=where.field(entry, "runtime", str, "a string", f"{name}.", default=""),
        bytes=size,
        data=entry,
    )


def _layer(where: _Where, entry: Any, name: str) -> LayerEntry:
    where.expect(entry, dict, name, "an object")
    prefix = f"{name}."
    precision = where.field(entry, "precision", str, "a string", prefix)
    if precision not in PRECISIONS:
        raise ArtifactError(f"{where.origin}: {prefix}precision must be one of "
                            f"{', '.join(PRECISIONS)}, got {_short(precision)}")
    sqnr = entry.get("sqnr_db")
    return LayerEntry(
        name=where.field(entry, "name", str, "a string", prefix),
        op=where.field(entry, "op", str, "a string", prefix),
        precision=precision,
        sqnr_db=None if sqnr is None else _number(where, entry, "sqnr_db", prefix, -1e3, 1e3),
        reason=where.field(entry, "reason", str, "a string", prefix, default=""),
    )


def _vectors(where: _Where, entry: Any, files: dict[str, str]) -> TestVectorsEntry:
    where.expect(entry, dict, "test_vectors", "an object")
    tolerance = entry.get("tolerance", 0)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float | str) or (
            not isinstance(tolerance, str) and not _finite(tolerance)):
        raise ArtifactError(f"{where.origin}: test_vectors.tolerance must be a number or a "
                            f"description, got {_short(tolerance)}")
    path = where.field(entry, "path", str, "a member name", "test_vectors.",
                       default="test_vectors.npz")
    if path not in files:
        raise ArtifactError(f"{where.origin}: test_vectors.path must name a member listed in "
                            f"files ({', '.join(sorted(files)) or 'none'}), got {_short(path)}")
    count = where.field(entry, "count", int, "an int >= 0", "test_vectors.", default=0)
    if count < 0:
        raise ArtifactError(f"{where.origin}: test_vectors.count must be an int >= 0, got "
                            f"{count}")
    outputs = where.field(entry, "outputs", dict, "an object mapping output -> bounds",
                          "test_vectors.", default={})
    return TestVectorsEntry(
        path=path,
        count=count,
        tolerance=tolerance if isinstance(tolerance, str) else float(tolerance),
        outputs={name: _output_tolerance(where, bounds, f"test_vectors.outputs[{name!r}]")
                 for name, bounds in outputs.items()},
        basis=where.field(entry, "basis", str, "a string", "test_vectors.", default=""),
    )


def _number(where: _Where, table: dict[str, Any], key: str, prefix: str,
            low: float, high: float) -> float:
    value = where.field(table, key, (int, float), f"a number in [{low}, {high}]", prefix)
    if isinstance(value, bool) or not low <= value <= high:
        raise ArtifactError(f"{where.origin}: {prefix}{key} must be a number in [{low}, {high}],"
                            f" got {_short(value)}")
    return float(value)


def _output_tolerance(where: _Where, entry: Any, name: str) -> OutputTolerance:
    where.expect(entry, dict, name, "an object")
    prefix = f"{name}."
    sqnr = entry.get("min_sqnr_db")
    slices = where.field(entry, "slices", list, "a list of [start, stop]", prefix, default=[])
    for item in slices:
        if (not isinstance(item, list) or len(item) != 2
                or not all(type(v) is int and v >= 0 for v in item) or item[0] >= item[1]):
            raise ArtifactError(f"{where.origin}: {prefix}slices must hold [start, stop] "
                                f"pairs of ints with start < stop, got {_short(item)}")
    return OutputTolerance(
        within_1_step=_number(where, entry, "within_1_step", prefix, 0.0, 1.0),
        max_steps=_number(where, entry, "max_steps", prefix, 0.0, 1e6),
        min_sqnr_db=None if sqnr is None else _number(where, entry, "min_sqnr_db", prefix,
                                                      -1e3, 1e3),
        axis=where.field(entry, "axis", int, "an int", prefix, default=1),
        slices=tuple((a, b) for a, b in slices),
    )
