"""The ``.edgekit`` file: one zip holding ``manifest.json``, model file(s) and test vectors.

The manifest is the contract between the host (converters) and the device (runtime).
Its ``files`` table gives every other member's sha256; loading checks each one, so a
corrupt or truncated artifact is refused before anything runs. Hashes detect corruption,
not tampering (whoever swaps a member can recompute its hash): a ``signature`` over the
manifest (``edgekit.trust.signing``) does that, checked against the device's trusted keys.

Schema (version 1), the keys the runtime relies on::

    schema_version, edgekit_version, content_key (created: older artifacts only)
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
    signature     {algorithm, key_id, public_key, value}   optional, edgekit.trust.signing
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from edgekit.artifact.manifest import SCHEMA_VERSION, Manifest
from edgekit.artifact.memory_budget import allowance, check_members, check_tensors
from edgekit.artifact.onnx_scan import check_self_contained
from edgekit.artifact.vectors import check_vectors, decode_quantized, read_vectors
from edgekit.artifact.zipread import (
    MAX_MANIFEST_BYTES,
    MAX_MEMBER_BYTES,
    directory,
    open_regular,
    read_member,
    zip_errors,
)
from edgekit.errors import ArtifactError
from edgekit.tempfiles import remove_stale_beside, replace_atomically, temp_beside
from edgekit.trust.release import Pin, check_release
from edgekit.trust.signing import PublicKey, Signature, verify_manifest

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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

    def __init__(self, path: str, spec: Manifest, members: dict[str, bytes],
                 signature: Signature | None = None) -> None:
        self.path = path
        self.signature = signature  # None: unsigned (or not checkable: no cryptography)
        self.spec = spec
        self.manifest: dict[str, Any] = spec.raw
        self._members = members
        # model member -> its Loop nodes without a constant trip count (edgekit.artifact.onnx_scan):
        # every run of such a model is bounded in time
        self.dynamic_loops: dict[str, list[str]] = {}

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
        """The bundled test vectors as ``{"in/<name>": array, "out/<format>/<name>": array}``,
        read bounded and checked against the manifest (``edgekit/artifact/vectors.py``): any flaw is
        an ``ArtifactError`` naming the array."""
        vectors = self.spec.test_vectors
        member = vectors.path if vectors is not None else TEST_VECTORS
        origin = f"{self.path}: {member}"
        arrays = decode_quantized(read_vectors(self.read(member), origin,
                                               allowance(self.spec.target.profile)), origin)
        check_vectors(arrays, self.spec.inputs, self.spec.outputs,
                      [m.format for m in self.spec.models], origin)
        return arrays


def read_artifact(path: str | os.PathLike[str],
                  trusted: Sequence[PublicKey] | None = None, pin: Pin | None = None) -> Artifact:
    """Open and verify an artifact, bounded at every step (``edgekit.artifact.zipread``): the zip's
    directory (unique plain names, sizes within ceilings), then the manifest (typed, every
    field checked; its signature, see below), then only the members it lists, each within
    its manifest figure, inflated in chunks and hashed as it streams. ONNX models that keep
    data outside the file are refused.

    ``trusted``: public keys (``edgekit.trust.keys.discover_trusted_keys``); when non-empty the
    manifest must be signed by one of them. Without keys a signature that is present is
    still checked when ``cryptography`` is installed. Hashes catch corruption only; the
    signature is what catches tampering. ``pin``: the release this device accepts (target,
    oldest version and build time: ``edgekit.trust.release``); with trusted keys a signature must
    bind a release.
    """
    path = os.fspath(path)
    with open_regular(path) as handle:
        with zip_errors(path, "zip directory"):
            archive = zipfile.ZipFile(handle)
        with archive:
            infos = directory(archive, path)
            if MANIFEST not in infos:
                raise ArtifactError(f"{path}: no {MANIFEST} inside; is this an edgekit "
                                    "artifact?")
            data, _ = read_member(archive, infos[MANIFEST], path, MAX_MANIFEST_BYTES)
            spec = Manifest.from_dict(parse_manifest(data, path), origin=path)
            signature = verify_manifest(spec.raw, tuple(trusted or ()))
            check_release(spec.release, spec.target.name, signature is not None,
                          bool(trusted), pin or Pin(), path)
            listed = set(spec.files)
            unlisted = sorted(set(infos) - listed - {MANIFEST})
            if unlisted:
                raise ArtifactError(f"{path}: members not covered by the manifest hashes: "
                                    f"{unlisted}")
            missing = sorted(listed - set(infos))
            if missing:
                raise ArtifactError(f"{path}: member {missing[0]!r} listed in the manifest "
                                    "is missing")
            check_members({m: infos[m].file_size for m in listed}, spec.target.profile, path)
            members = {}
            for member, expected in spec.files.items():
                limit = spec.member_bytes(member) or MAX_MEMBER_BYTES
                members[member], got = read_member(archive, infos[member], path, limit)
                if got != expected:
                    raise ArtifactError(
                        f"{path}: member {member!r} fails its hash check "
                        f"(manifest sha256 {expected[:12]}..., file {got[:12]}...): the "
                        "artifact is corrupt (hashes catch corruption; only a signature "
                        "catches deliberate tampering)")
    dynamic_loops: dict[str, list[str]] = {}
    for entry in spec.models:
        if entry.format == "onnx":
            scan = check_self_contained(members[entry.path], f"{path}: {entry.path}")
            check_tensors(((name, count * size) for name, count, size in scan.tensors),
                          spec.target.profile, f"{path}: {entry.path}")
            if scan.dynamic_loops:
                dynamic_loops[entry.path] = scan.dynamic_loops
    artifact = Artifact(path, spec, members, signature)
    artifact.dynamic_loops = dynamic_loops
    return artifact


def parse_manifest(data: bytes, origin: str) -> Any:
    """``manifest.json`` as JSON; NaN/Infinity, deep nesting and huge numbers refused."""
    def no_constant(name: str) -> Any:
        raise ArtifactError(f"{origin}: {MANIFEST} holds {name}; expected finite numbers")

    try:
        return json.loads(data.decode("utf-8"), parse_constant=no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise ArtifactError(f"{origin}: {MANIFEST} is not valid JSON: expected an object, "
                            f"got {type(exc).__name__}: {str(exc)[:120]}") from exc


def encode_test_vectors(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def write_artifact(
    path: str | os.PathLike[str], manifest: dict[str, Any], members: dict[str, bytes],
    sign_key: str | os.PathLike[str] | Ed25519PrivateKey | None = None,
    passphrase: bytes | None = None, release_version: int | None = None,
) -> int:
    """Write an artifact atomically (temp file in the same folder, then rename), with the
    mode the umask gives a new file. Temp files of earlier writers that died are removed.

    Fills ``manifest["files"]`` with each member's sha256 (and each model entry's ``bytes``
    and ``sha256``) and checks the result against the manifest contract (``ArtifactError``).
    With ``sign_key`` (a private key file) the final manifest is signed. Returns the size.
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
    models = manifest.get("models")
    if isinstance(models, list):  # the figures the loader bounds each model member by
        manifest["models"] = [
            {**entry, "bytes": len(members[entry["path"]]),
             "sha256": manifest["files"][entry["path"]]}
            if isinstance(entry, dict) and entry.get("path") in members else entry
            for entry in models]
    # the manifest exactly as the device will parse it, so that a signature verifies there
    manifest = json.loads(json.dumps(manifest, default=_json_default))
    if sign_key is not None:
        from edgekit.trust.signing import sign_manifest

        manifest = sign_manifest(manifest, sign_key, passphrase, release_version)
    Manifest.from_dict(manifest, origin=str(target))  # never write what no device could read
    payload = json.dumps(manifest, indent=2, sort_keys=False).encode()
    remove_stale_beside(target)
    def write(handle: BinaryIO) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(_member_info(MANIFEST), payload, compresslevel=9)
            for name, data in sorted(members.items()):
                archive.writestr(_member_info(name), data, compresslevel=9)

    fd, tmp = temp_beside(target)
    replace_atomically(fd, tmp, target, write)
    return target.stat().st_size


# Fixed member metadata, so that the same content gives the same bytes (deterministic builds):
# the zip epoch instead of the wall clock, a plain 0644 file, Unix as the creating system.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _member_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3
    info.external_attr = 0o100644 << 16
    return info


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
