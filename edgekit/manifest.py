"""The manifest of a ``.edgekit`` artifact as typed, frozen records, validated once.

The manifest is the contract between the host (converters) and the device (runtime); see
``edgekit/artifact.py`` for the file layout. ``Manifest.from_dict`` checks every key the
runtime relies on and raises ``ArtifactError`` naming the field, what was expected and what
came; past it the runtime reads fields, never nested dict keys. Sections the runtime does
not interpret (stages, quantization, validation, host reports such as ``estimate``) stay
plain data, and ``raw`` keeps the whole file content for tools that show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgekit.errors import ArtifactError, TargetError
from edgekit.targets import Profile, profile_from_dict

SCHEMA_VERSION = 1


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
    data: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class TestVectorsEntry:
    path: str
    count: int
    tolerance: float | str  # a number, or how verify derives it ("1 quantization step ...")


@dataclass(frozen=True)
class Manifest:
    schema_version: int
    edgekit_version: str
    created: str
    target: TargetInfo
    inputs: tuple[TensorEntry, ...]
    outputs: tuple[TensorEntry, ...]
    models: tuple[ModelEntry, ...]
    test_vectors: TestVectorsEntry | None
    files: dict[str, str]
    source: dict[str, Any] = field(default_factory=dict, compare=False)
    quantization: dict[str, Any] = field(default_factory=dict, compare=False)
    validation: dict[str, Any] = field(default_factory=dict, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any, origin: str = "manifest.json") -> Manifest:
        """Validate a parsed ``manifest.json``; ``ArtifactError`` on the first problem."""
        where = _Where(origin)
        where.expect(data, dict, "manifest", "a JSON object")
        version = data.get("schema_version")
        # bool is an int to Python: ``true`` must not pass for version 1
        if type(version) is not int or version != SCHEMA_VERSION:
            raise ArtifactError(
                f"{origin}: manifest schema_version {version!r}; this edgekit reads version "
                f"{SCHEMA_VERSION} (rebuild the artifact or upgrade edgekit)")
        target = where.field(data, "target", dict, "an object")
        try:
            profile = profile_from_dict(where.field(target, "profile", dict, "an object",
                                                    "target."), origin=f"{origin} target.profile")
        except TargetError as exc:
            raise ArtifactError(str(exc)) from exc
        vectors = data.get("test_vectors")
        files = where.field(data, "files", dict, "an object mapping member -> sha256", default={})
        for member, digest in files.items():
            where.expect(digest, str, f"files[{member!r}]", "a sha256 hex string")
        models = tuple(_model(where, e, i) for i, e in enumerate(
            where.field(data, "models", list, "a list of model entries")))
        if not models:
            raise ArtifactError(f"{origin}: models is empty (expected at least one model entry)")
        return cls(
            schema_version=version,
            edgekit_version=str(data.get("edgekit_version", "")),
            created=str(data.get("created", "")),
            target=TargetInfo(where.field(target, "name", str, "a string", "target."),
                              str(target.get("sha256", "")), profile),
            inputs=tuple(_tensor(where, e, f"inputs[{i}]") for i, e in enumerate(
                where.field(data, "inputs", list, "a list of tensor entries"))),
            outputs=tuple(_tensor(where, e, f"outputs[{i}]") for i, e in enumerate(
                where.field(data, "outputs", list, "a list of tensor entries"))),
            models=models,
            test_vectors=None if not vectors else _vectors(where, vectors),
            files=dict(files),
            source=where.field(data, "source", dict, "an object", default={}),
            quantization=where.field(data, "quantization", dict, "an object", default={}),
            validation=where.field(data, "validation", dict, "an object", default={}),
            raw=data,
        )

    def model(self, fmt: str) -> ModelEntry | None:
        return next((m for m in self.models if m.format == fmt), None)


class _Where:
    """Error messages that name the artifact, the field, what was expected and what came."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def expect(self, value: Any, kind: type, name: str, expected: str) -> None:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ArtifactError(f"{self.origin}: {name} must be {expected}, got "
                                f"{type(value).__name__} {_short(value)}")

    def field(self, table: dict[str, Any], key: str, kind: type, expected: str,
              prefix: str = "", default: Any = ...) -> Any:
        if key not in table:
            if default is not ...:
                return default
            raise ArtifactError(f"{self.origin}: missing field '{prefix}{key}' (expected "
                                f"{expected})")
        self.expect(table[key], kind, prefix + key, expected)
        return table[key]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tensor(where: _Where, entry: Any, name: str) -> TensorEntry:
    where.expect(entry, dict, name, "an object")
    shape = where.field(entry, "shape", list, "a list of dims", f"{name}.")
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int | str):
            raise ArtifactError(f"{where.origin}: {name}.shape must hold ints or names, got "
                                f"{_short(dim)}")
    labels = entry.get("labels")
    return TensorEntry(
        name=where.field(entry, "name", str, "a string", f"{name}."),
        shape=tuple(shape),
        dtype=where.field(entry, "dtype", str, "a string", f"{name}.", default="float32"),
        layout=where.field(entry, "layout", str, "a string", f"{name}.", default=""),
        preprocess=where.field(entry, "preprocess", dict, "an object", f"{name}.",
                               default=None) or None,
        labels=tuple(where.field(entry, "labels", list, "a list", f"{name}.")) if labels
        else None,
        data=entry,
    )


def _model(where: _Where, entry: Any, i: int) -> ModelEntry:
    name = f"models[{i}]"
    where.expect(entry, dict, name, "an object")
    return ModelEntry(
        format=where.field(entry, "format", str, "a string", f"{name}."),
        path=where.field(entry, "path", str, "a member name", f"{name}."),
        runtime=where.field(entry, "runtime", str, "a string", f"{name}.", default=""),
        data=entry,
    )


def _vectors(where: _Where, entry: Any) -> TestVectorsEntry:
    where.expect(entry, dict, "test_vectors", "an object")
    tolerance = entry.get("tolerance", 0)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float | str):
        raise ArtifactError(f"{where.origin}: test_vectors.tolerance must be a number or a "
                            f"description, got {_short(tolerance)}")
    return TestVectorsEntry(
        path=where.field(entry, "path", str, "a member name", "test_vectors.",
                         default="test_vectors.npz"),
        count=where.field(entry, "count", int, "an int", "test_vectors.", default=0),
        tolerance=tolerance if isinstance(tolerance, str) else float(tolerance),
    )
