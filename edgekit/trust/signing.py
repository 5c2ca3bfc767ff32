"""Ed25519 signatures over an artifact's manifest: key pairs, signing, verifying.

Hashes detect corruption, not tampering. The manifest lists every member's sha256, so a
flipped bit is caught; but whoever can swap the model can also recompute its hash and the
manifest's, and the artifact still passes every hash check. Signatures detect tampering: the
manifest (which hashes every member) is signed with a private key that stays on the build
host, and the device checks the signature against public keys it trusts
(:mod:`edgekit.trust.keys`). Changing any member changes its hash, hence the manifest, hence the
signed bytes; and without the private key nobody can sign the new bytes.

What is signed: :func:`signed_message` = a fixed domain prefix (so a signature made for
something else can never pass for a manifest signature) followed by :func:`canonical_bytes`,
the manifest without its ``signature`` field as ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=True, allow_nan=False)``. It is computed from the parsed
manifest, so re-indenting or re-ordering the JSON file keeps the signature valid and changing
any value breaks it. Sign the manifest as the device will parse it (after a JSON round
trip). The ``signature`` field holds::

    {"algorithm": "ed25519", "key_id": "<16 hex>", "public_key": "<base64 of 32 bytes>",
     "value": "<base64 of 64 bytes>"}

The key id is the first 16 hex digits of sha256(raw public key): a name for people and
logs. Trust is decided by the full public key, never by the id.

The crypto is `cryptography`'s (no hand-written primitives). It is imported only when a key
is made, loaded or used, so ``import edgekit`` never needs it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.errors import (
    SignatureError,
    SigningKeyError,
    SigningUnavailableError,
    UntrustedArtifactError,
)
from edgekit.tempfiles import replace_atomically, temp_beside

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SIGNATURE_FIELD = "signature"
ALGORITHM = "ed25519"
DOMAIN = b"edgekit manifest signature v1\n"
KEY_ID_HEX = 16
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
MAX_KEY_FILE_BYTES = 64 << 10  # a PEM key is ~120 bytes; refuse anything absurd


def crypto() -> Any:
    """The ``cryptography`` modules used here, imported on first use."""
    try:
        from cryptography import exceptions
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise SigningUnavailableError(
            "signing and verifying artifacts need the 'cryptography' package, which is not "
            f"installed ({exc}); install it with: pip install 'edgekit-sdk[sign]'") from exc
    return _Crypto(exceptions, serialization, ed25519)


@dataclass(frozen=True)
class _Crypto:
    exceptions: Any
    serialization: Any
    ed25519: Any


def key_id(raw_public_key: bytes) -> str:
    """Short fingerprint of a raw 32-byte Ed25519 public key (16 hex digits of sha256)."""
    return hashlib.sha256(raw_public_key).hexdigest()[:KEY_ID_HEX]


@dataclass(frozen=True)
class PublicKey:
    """A raw Ed25519 public key and where it came from (a file, for messages)."""

    raw: bytes
    source: str = ""

    @property
    def key_id(self) -> str:
        return key_id(self.raw)

    def describe(self) -> str:
        return f"{self.key_id} ({self.source})" if self.source else self.key_id


@dataclass(frozen=True)
class Signature:
    """The parsed ``signature`` field of a manifest; ``trusted_by`` names the trusted key
    that matched, empty when the check was made without trusted keys."""

    key_id: str
    public_key: bytes
    value: bytes
    algorithm: str = ALGORITHM
    trusted_by: str = ""


def canonical_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The manifest without its signature, as canonical JSON (see the module docstring)."""
    if not isinstance(manifest, Mapping):
        raise SignatureError(f"manifest to sign or verify: expected a JSON object, got "
                             f"{type(manifest).__name__}")
    body = {key: value for key, value in manifest.items() if key != SIGNATURE_FIELD}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise SignatureError(f"manifest has no canonical JSON form (expected plain JSON "
                             f"values, finite numbers): {exc}") from exc
    return text.encode("ascii")


def signed_message(manifest: Mapping[str, Any]) -> bytes:
    """The exact bytes an Ed25519 signature covers: domain prefix + canonical manifest."""
    return DOMAIN + canonical_bytes(manifest)


# -- key files ----------------------------------------------------------------------------

def generate_key_pair(private_path: str | os.PathLike[str],
                      public_path: str | os.PathLike[str] | None = None, *,
                      overwrite: bool = False, passphrase: bytes | None = None) -> PublicKey:
    """Write a new key pair: the private key as PKCS#8 PEM, mode 0600 whatever the umask
    (encrypted when ``passphrase`` is given); the public key as SubjectPublicKeyInfo PEM at
    ``public_path`` (default: private path + ``.pub``), mode from the umask. Both written
    atomically; existing files are refused unless ``overwrite``."""
    c = crypto()
    private_path = Path(private_path)
    public_path = Path(public_path) if public_path else Path(f"{private_path}.pub")
    if not overwrite:
        for path in (private_path, public_path):
            if path.exists() or path.is_symlink():
                raise SigningKeyError(f"{path} already exists (expected a new path; pass "
                                      "overwrite=True to replace the key)")
    key = c.ed25519.Ed25519PrivateKey.generate()
    encryption = (c.serialization.BestAvailableEncryption(passphrase) if passphrase
                  else c.serialization.NoEncryption())
    private_pem = key.private_bytes(c.serialization.Encoding.PEM,
                                    c.serialization.PrivateFormat.PKCS8, encryption)
    public = key.public_key()
    public_pem = public.public_bytes(c.serialization.Encoding.PEM,
                                     c.serialization.PublicFormat.SubjectPublicKeyInfo)
    raw = public.public_bytes(c.serialization.Encoding.Raw, c.serialization.PublicFormat.Raw)
    _write_atomically(private_path, private_pem, private=True)
    _write_atomically(public_path, public_pem, private=False)
    return PublicKey(raw, str(public_path))


def _write_atomically(path: Path, data: bytes, private: bool) -> None:
    """Temp file in the same folder, fsync, rename. A private file is created 0600 (never
    readable by others, not even for a moment); a public one gets the umask's mode."""
    if not path.parent.is_dir():
        raise SigningKeyError(f"folder {str(path.parent)!r} does not exist (expected an "
                              f"existing folder for {path.name!r})")
    # mkstemp makes 0600 (never readable by others, not even for a moment); public keys follow
    # the umask like any file
    fd, tmp = (tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent) if private
               else temp_beside(path))
    replace_atomically(fd, tmp, path, lambda handle: handle.write(data))


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a key file: a regular file of at most 64 KiB, else a typed error.
    Opened non-blocking and checked with fstat, so a FIFO in its place cannot hang us."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise SigningKeyError(f"key file {name!r}: cannot open it ({exc}); expected an "
                              "existing, readable key file") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SigningKeyError(f"key file {name!r}: expected a regular file, got a folder "
                                  "or special file")
        if info.st_size > MAX_KEY_FILE_BYTES:
            raise SigningKeyError(f"key file {name!r}: expected at most {MAX_KEY_FILE_BYTES} "
                                  f"bytes, got {info.st_size}")
        return os.read(fd, MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise SigningKeyError(f"key file {name!r}: cannot read it ({exc})") from exc
    finally:
        os.close(fd)


def _mode(path: str) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        raise SigningKeyError(f"key file {path!r}: cannot read it ({exc})") from exc


def load_private_key(path: str | os.PathLike[str],
                     passphrase: bytes | None = None) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file that only its owner may read (like ssh, a
    group- or world-readable private key is refused: it may have leaked)."""
    c = crypto()
    name = os.fspath(path)
    data = read_key_file(path)
    mode = _mode(name)
    if os.name == "posix" and mode & 0o077:
        raise SigningKeyError(f"private key {name!r} has mode {mode:04o}; expected 0600 (only "
                              f"its owner may read it): chmod 600 {name}")
    try:
        key = c.serialization.load_pem_private_key(data, password=passphrase)
    except (ValueError, TypeError, c.exceptions.UnsupportedAlgorithm) as exc:
        raise SigningKeyError(f"private key {name!r}: expected a PEM Ed25519 private key "
                              f"(from edgekit keygen), got one that does not load: {exc}"
                              ) from exc
    if not isinstance(key, c.ed25519.Ed25519PrivateKey):
        raise SigningKeyError(f"private key {name!r}: expected an Ed25519 key, got "
                              f"{type(key).__name__}")
    return key


def load_public_key(path: str | os.PathLike[str]) -> PublicKey:
    """A public key file: PEM (SubjectPublicKeyInfo, as written by :func:`generate_key_pair`)
    or one line of base64 of the raw 32 bytes."""
    name = os.fspath(path)
    return parse_public_key(read_key_file(path), name)


def parse_public_key(data: bytes, source: str) -> PublicKey:
    text = data.strip()
    if text.startswith(b"-----BEGIN") and b"PRIVATE KEY" in text.split(b"\n", 1)[0]:
        raise SigningKeyError(f"public key {source!r}: expected a public key, got a PRIVATE "
                              "key (it must stay on the build host; copy the .pub file that "
                              "edgekit keygen wrote beside it)")
    if text.startswith(b"-----BEGIN"):
        c = crypto()
        try:
            key = c.serialization.load_pem_public_key(text)
        except (ValueError, TypeError, c.exceptions.UnsupportedAlgorithm) as exc:
            raise SigningKeyError(f"public key {source!r}: expected a PEM Ed25519 public key, "
                                  f"got one that does not load: {exc}") from exc
        if not isinstance(key, c.ed25519.Ed25519PublicKey):
            raise SigningKeyError(f"public key {source!r}: expected an Ed25519 key, got "
                                  f"{type(key).__name__}")
        raw = key.public_bytes(c.serialization.Encoding.Raw, c.serialization.PublicFormat.Raw)
        return PublicKey(raw, source)
    raw = _base64(text, "public key", source)
    if len(raw) != PUBLIC_KEY_BYTES:
        raise SigningKeyError(f"public key {source!r}: expected PEM or base64 of "
                              f"{PUBLIC_KEY_BYTES} raw bytes, got {len(raw)} bytes")
    return PublicKey(raw, source)


def _base64(text: bytes | str, what: str, source: str,
            error: type[Exception] = SigningKeyError) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise error(f"{what} {source!r}: expected base64, got {str(text)[:40]!r}") from exc


# -- signing and verifying ----------------------------------------------------------------

def sign_manifest(manifest: Mapping[str, Any],
                  private_key: str | os.PathLike[str] | Ed25519PrivateKey,
                  passphrase: bytes | None = None,
                  release_version: int | None = None) -> dict[str, Any]:
    """A copy of ``manifest`` with its ``release`` section (``edgekit.trust.release``: target,
    ``release_version`` (default: the one it had, else 1), signing time; only for a
    manifest naming its target, as every artifact's does) and its ``signature`` field set
    (an old one is replaced). A device with trusted keys refuses an artifact signed
    without the release section."""
    from edgekit.trust.release import RELEASE_FIELD, release_section

    c = crypto()
    key = (private_key if isinstance(private_key, c.ed25519.Ed25519PrivateKey)
           else load_private_key(private_key, passphrase))
    raw = key.public_key().public_bytes(c.serialization.Encoding.Raw,
                                        c.serialization.PublicFormat.Raw)
    old = manifest.get(RELEASE_FIELD)
    if release_version is None:
        release_version = old.get("version", 1) if isinstance(old, Mapping) else 1
    target = manifest.get("target")
    name = target.get("name") if isinstance(target, Mapping) else None
    if isinstance(name, str) and name:  # an artifact's manifest: bind its release
        manifest = {**manifest, RELEASE_FIELD: release_section(name, release_version)}
    value = key.sign(signed_message(manifest))
    signed = {k: v for k, v in manifest.items() if k != SIGNATURE_FIELD}
    signed[SIGNATURE_FIELD] = {"algorithm": ALGORITHM, "key_id": key_id(raw),
                               "public_key": base64.b64encode(raw).decode("ascii"),
                               "value": base64.b64encode(value).decode("ascii")}
    return signed


def read_signature(manifest: Mapping[str, Any]) -> Signature | None:
    """The manifest's signature field, parsed and checked for form (no crypto: this is what
    ``inspect`` shows); ``None`` when unsigned. A malformed field is a SignatureError."""
    if not isinstance(manifest, Mapping):
        raise SignatureError(f"manifest: expected a JSON object, got {type(manifest).__name__}")
    field = manifest.get(SIGNATURE_FIELD)
    if field is None:
        return None
    where = f"manifest field {SIGNATURE_FIELD!r}"
    if not isinstance(field, Mapping):
        raise SignatureError(f"{where}: expected an object, got {type(field).__name__}")
    texts = {}
    for name in ("algorithm", "key_id", "public_key", "value"):
        value = field.get(name)
        if not isinstance(value, str):
            raise SignatureError(f"{where}.{name}: expected a string, got {value!r:.60}")
        texts[name] = value
    if texts["algorithm"] != ALGORITHM:
        raise SignatureError(f"{where}.algorithm: expected {ALGORITHM!r}, got "
                             f"{texts['algorithm']!r:.40}")
    public = _base64(texts["public_key"], f"{where}.public_key", "", SignatureError)
    value = _base64(texts["value"], f"{where}.value", "", SignatureError)
    if len(public) != PUBLIC_KEY_BYTES or len(value) != SIGNATURE_BYTES:
        raise SignatureError(f"{where}: expected a {PUBLIC_KEY_BYTES}-byte key and a "
                             f"{SIGNATURE_BYTES}-byte signature, got {len(public)} and "
                             f"{len(value)} bytes")
    if texts["key_id"] != key_id(public):
        raise SignatureError(f"{where}.key_id: expected {key_id(public)} (the fingerprint of "
                             f"its public_key), got {texts['key_id']!r:.40}")
    return Signature(texts["key_id"], public, value)


def verify_manifest(manifest: Mapping[str, Any],
                    trusted: tuple[PublicKey, ...] | list[PublicKey] = ()) -> Signature | None:
    """Check a manifest's signature; returns it (``None`` when unsigned and nothing is
    required).

    With trusted keys (see :func:`edgekit.trust.keys.discover_trusted_keys`) the manifest must be
    signed by one of them: unsigned or signed by another key is an
    :class:`UntrustedArtifactError`, a signature that does not match the manifest a
    :class:`SignatureError`. Without trusted keys nothing is required; a signature that is
    present is still checked when ``cryptography`` is installed (a mismatch means the
    manifest changed after signing), so that a corrupt or tampered signed artifact is never
    shown as signed.
    """
    signature = read_signature(manifest)
    expected = ", ".join(key.describe() for key in trusted)
    if signature is None:
        if trusted:
            raise UntrustedArtifactError(f"artifact is unsigned; expected a signature by a "
                                         f"trusted key: {expected}")
        return None
    match = next((key for key in trusted if key.raw == signature.public_key), None)
    if trusted and match is None:
        raise UntrustedArtifactError(f"artifact is signed by key {signature.key_id}, which is "
                                     f"not trusted; expected one of: {expected}")
    try:
        c = crypto()
    except SigningUnavailableError:
        if trusted:
            raise
        return signature  # nothing required and nothing to check with: as if unsigned
    public = c.ed25519.Ed25519PublicKey.from_public_bytes(signature.public_key)
    try:
        public.verify(signature.value, signed_message(manifest))
    except c.exceptions.InvalidSignature as exc:
        raise SignatureError(f"signature by key {signature.key_id} does not match the "
                             "manifest: it was changed after signing (tampered with or "
                             "corrupt); expected the manifest exactly as signed") from exc
    return Signature(signature.key_id, signature.public_key, signature.value,
                     trusted_by=match.describe() if match else "")
