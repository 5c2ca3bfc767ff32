"""The manifest of a ``.edgekit`` artifact as typed, frozen records, validated once.

The manifest is the contract between the host (converters) and the device (runtime); see
``edgekit/artifact/archive.py`` for the file layout. ``Manifest.from_dict`` checks every key the
runtime relies on and raises ``ArtifactError`` naming the field, what was expected and what
came; past it the runtime reads fields, never nested dict keys. Sections the runtime does
not interpret (stages, quantization, validation, host reports such as ``estimate``) stay
plain data, and ``raw`` keeps the whole file content for tools that show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgekit.artifact.manifest_fields import (
    SHA256_HEX,
    Where,
    parse_layer,
    parse_model,
    parse_pruning,
    parse_tensors,
    parse_vectors,
    short,
)
from edgekit.artifact.manifest_records import (
    ONE_STEP,
    PRECISIONS,
    CalibratedRange,
    LayerEntry,
    ModelEntry,
    OutputTolerance,
    PruningEntry,
    TargetInfo,
    TensorEntry,
    TestVectorsEntry,
)
from edgekit.artifact.zipread import safe_member_name
from edgekit.errors import ArtifactError, TargetError
from edgekit.targets import profile_from_dict
from edgekit.trust.release import Release, parse_release

# the records are defined in manifest_records; importing them from here keeps working
__all__ = ["ONE_STEP", "PRECISIONS", "SCHEMA_VERSION", "CalibratedRange", "LayerEntry",
           "Manifest", "ModelEntry", "OutputTolerance", "PruningEntry", "TargetInfo",
           "TensorEntry", "TestVectorsEntry"]

SCHEMA_VERSION = 1


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
    # what a signature binds besides the hashes (edgekit/trust/release.py); None: not signed so
    release: Release | None = None

    @classmethod
    def from_dict(cls, data: Any, origin: str = "manifest.json") -> Manifest:
        """Validate a parsed ``manifest.json``; ``ArtifactError`` on the first problem."""
        where = Where(origin)
        where.expect(data, dict, "manifest", "a JSON object")
        version = data.get("schema_version")
        # bool is an int to Python: ``true`` must not pass for version 1
        if type(version) is not int or version != SCHEMA_VERSION:
            raise ArtifactError(
                f"{origin}: manifest schema_version {short(version)}; this edgekit reads "
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
                                    f"folders or '..'), got {short(member)}")
            if not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest):
                raise ArtifactError(f"{origin}: files[{member!r}] must be a sha256 hex string "
                                    f"(64 lowercase hex digits), got {short(digest)}")
        models = tuple(parse_model(where, e, i, files) for i, e in enumerate(
            where.field(data, "models", list, "a list of model entries")))
        if not models:
            raise ArtifactError(f"{origin}: models is empty (expected at least one model entry)")
        vectors = data.get("test_vectors")
        key = where.field(data, "content_key", str, "a sha256 hex string", default="")
        if key and not SHA256_HEX.fullmatch(key):
            raise ArtifactError(f"{origin}: content_key must be a sha256 hex string (64 "
                                f"lowercase hex digits), got {short(key)}")
        inputs = parse_tensors(where, data, "inputs")
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
            outputs=parse_tensors(where, data, "outputs"),
            models=models,
            test_vectors=None if vectors is None or vectors == {} else parse_vectors(
                where, vectors, files),
            files=dict(files),
            source=where.field(data, "source", dict, "an object", default={}),
            quantization=where.field(data, "quantization", dict, "an object", default={}),
            validation=where.field(data, "validation", dict, "an object", default={}),
            layers=tuple(parse_layer(where, e, f"layers[{i}]") for i, e in enumerate(
                where.field(data, "layers", list, "a list of layer entries", default=[]))),
            pruning=parse_pruning(where, data.get("pruning")),
            raw=data,
            content_key=key,
            release=parse_release(data, origin),
        )

    def member_bytes(self, member: str) -> int | None:
        """The manifest's figure for a member's size (model entries state theirs)."""
        return next((m.bytes for m in self.models if m.path == member), None)

    def model(self, fmt: str) -> ModelEntry | None:
        return next((m for m in self.models if m.format == fmt), None)
