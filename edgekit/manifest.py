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

    def expect(self, value: Any, kind: type | tuple[type, ...], name: str,
               expected: str) -> None:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ArtifactError(f"{self.origin}: {name} must be {expected}, got "
                                f"{type(value).__name__} {_short(value)}")

    def field(self, table: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
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
    outputs = where.field(entry, "outputs", dict, "an object mapping output -> bounds",
                          "test_vectors.", default={})
    return TestVectorsEntry(
        path=where.field(entry, "path", str, "a member name", "test_vectors.",
                         default="test_vectors.npz"),
        count=where.field(entry, "count", int, "an int", "test_vectors.", default=0),
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
