"""The ``.edgekit`` file: one zip holding ``manifest.json``, model file(s) and test vectors.

The manifest is the contract between the host (converters) and the device (runtime).
Its ``files`` table gives every other member's sha256; loading checks each one, so a
corrupt, truncated or tampered artifact is refused before anything runs.

Schema (version 1), the keys the runtime relies on::

    schema_version, edgekit_version, created
    target        {name, sha256, profile}            the full target profile used
    source        {name, format, sha256, bytes}
    stages        [{name, params, seconds}, ...]      every pipeline stage, in order
    quantization  {...}                               method, types, float nodes
    inputs        [{name, shape, dtype, layout, preprocess?, quantization?}]
    outputs       [{name, shape, dtype, quantization?, kind?, labels?}]
    models        [{format, path, runtime, sha256, bytes, inputs?, outputs?}]
    test_vectors  {path, count, tolerance}            npz: "in/<input>" (or "q/<input>" +
                                                      "qparams/<input>"), "out/<format>/<output>"
    validation    {...}
    files         {member: sha256}
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import ArtifactError
from edgekit.manifest import SCHEMA_VERSION, Manifest

MANIFEST = "manifest.json"
TEST_VECTORS = "test_vectors.npz"
SUFFIX = ".edgekit"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Artifact:
    """A verified, in-memory view of a ``.edgekit`` file: ``spec`` is the manifest typed
    (what the runtime reads), ``manifest`` the same content as stored (a dict, for tools
    that show or extend it)."""

    def __init__(self, path: str, spec: Manifest, members: dict[str, bytes]) -> None:
        self.path = path
        self.spec = spec
        self.manifest: dict[str, Any] = spec.raw
        self._members = members

    def read(self, member: str) -> bytes:
        try:
            return self._members[member]
        except KeyError:
            raise ArtifactError(
                f"{self.path}: no member {member!r}; it holds {', '.join(sorted(self._members))}"
            ) from None

    @property
    def members(self) -> list[str]:
        return sorted(self._members)

    def test_vectors(self) -> dict[str, np.ndarray]:
        """The bundled test vectors as ``{"in/<name>": array, "out/<format>/<name>": array}``."""
        vectors = self.spec.test_vectors
        member = vectors.path if vectors is not None else TEST_VECTORS
        with np.load(io.BytesIO(self.read(member)), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
        # Inputs on the model's input quantization grid are stored as integers (4x smaller):
        # "q/<name>" plus "qparams/<name>" = [scale, zero_point]; decode them to floats here.
        for key in [k for k in arrays if k.startswith("q/")]:
            name = key[2:]
            scale, zero_point = arrays.pop(f"qparams/{name}")
            values = arrays.pop(key).astype(np.float32) - np.float32(zero_point)
            arrays[f"in/{name}"] = values * np.float32(scale)
        return arrays


def read_artifact(path: str | os.PathLike[str]) -> Artifact:
    """Open and verify an artifact: zip integrity, schema version and every member's hash."""
    path = str(path)
    if not os.path.isfile(path):
        raise ArtifactError(f"{path}: no such artifact file (expected a {SUFFIX} file)")
    try:
        with zipfile.ZipFile(path) as archive:
            members = {name: archive.read(name) for name in archive.namelist()}
    except (zipfile.BadZipFile, EOFError, OSError, zipfile.LargeZipFile) as exc:
        raise ArtifactError(
            f"{path}: not a readable {SUFFIX} artifact (corrupt or truncated zip: {exc})"
        ) from exc
    except Exception as exc:  # zlib.error and friends on damaged members
        raise ArtifactError(f"{path}: corrupt artifact member: {exc}") from exc
    if MANIFEST not in members:
        raise ArtifactError(f"{path}: no {MANIFEST} inside; is this an edgekit artifact?")
    try:
        manifest = json.loads(members[MANIFEST])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: {MANIFEST} is not valid JSON: {exc}") from exc
    spec = Manifest.from_dict(manifest, origin=path)
    files = spec.files
    for member, expected in files.items():
        if member not in members:
            raise ArtifactError(f"{path}: member {member!r} listed in the manifest is missing")
        got = sha256_bytes(members[member])
        if got != expected:
            raise ArtifactError(
                f"{path}: member {member!r} fails its hash check "
                f"(manifest sha256 {expected[:12]}..., file {got[:12]}...): "
                "the artifact was corrupted or tampered with"
            )
    unlisted = sorted(set(members) - set(files) - {MANIFEST})
    if unlisted:
        raise ArtifactError(f"{path}: members not covered by the manifest hashes: {unlisted}")
    return Artifact(path, spec, members)


def encode_test_vectors(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def write_artifact(
    path: str | os.PathLike[str], manifest: dict[str, Any], members: dict[str, bytes]
) -> int:
    """Write an artifact atomically (temp file in the same folder, then rename).

    Fills ``manifest["files"]`` with each member's sha256 and checks the result against the
    manifest contract (``ArtifactError``). Returns the file size.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ArtifactError(
            f"output folder {str(target.parent)!r} does not exist (expected an existing "
            f"folder for {target.name!r})"
        )
    manifest = dict(manifest)
    manifest["schema_version"] = SCHEMA_VERSION
    manifest["files"] = {name: sha256_bytes(data) for name, data in sorted(members.items())}
    Manifest.from_dict(manifest, origin=str(target))  # never write what no device could read
    payload = json.dumps(manifest, indent=2, sort_keys=False, default=_json_default).encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr(MANIFEST, payload, compresslevel=9)
                for name, data in sorted(members.items()):
                    archive.writestr(name, data, compresslevel=9)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target.stat().st_size


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
