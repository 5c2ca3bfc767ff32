"""Signed manifests: key files, sign/verify round trip, tampering, trust discovery."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from edgekit.artifact.archive import MANIFEST, read_artifact, write_artifact
from edgekit.errors import (
    ArtifactError,
    SignatureError,
    SigningKeyError,
    UntrustedArtifactError,
)
from edgekit.trust.keys import ENV_TRUSTED_KEYS, discover_trusted_keys, user_key_dir
from edgekit.trust.signing import (
    canonical_bytes,
    generate_key_pair,
    load_private_key,
    load_public_key,
    read_signature,
    sign_manifest,
    verify_manifest,
)

from ..runtime_models import mlp_onnx, set_in, write_model_artifact

MANIFEST_LIKE: dict[str, Any] = {
    "schema_version": 1, "name": "digits",
    "files": {"model.onnx": "ab" * 32, "test_vectors.npz": "cd" * 32},
    "target": {"name": "rpi4", "profile": {"thermal": {"soft_limit_c": 80.0}}},
    "inputs": [{"name": "x", "shape": [1, 1, 28, 28], "dtype": "float32"}],
}


@pytest.fixture()
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private = tmp_path / "keys" / "build.key"
    private.parent.mkdir()
    generate_key_pair(private)
    return private, Path(f"{private}.pub")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_keygen_modes_and_key_id(tmp_path: Path) -> None:
    old = os.umask(0)  # the most permissive umask: the private key must still be 0600
    try:
        public = generate_key_pair(tmp_path / "a.key")
    finally:
        os.umask(old)
    assert mode(tmp_path / "a.key") == 0o600 and mode(tmp_path / "a.key.pub") == 0o666
    old = os.umask(0o027)
    try:
        generate_key_pair(tmp_path / "b.key", tmp_path / "b-public.pem")
    finally:
        os.umask(old)
    assert mode(tmp_path / "b.key") == 0o600 and mode(tmp_path / "b-public.pem") == 0o640
    assert (tmp_path / "a.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    loaded = load_public_key(tmp_path / "a.key.pub")
    assert loaded.raw == public.raw and len(public.raw) == 32
    assert len(public.key_id) == 16 and int(public.key_id, 16) >= 0
    assert public.key_id != load_public_key(tmp_path / "b-public.pem").key_id
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave nothing behind
    with pytest.raises(SigningKeyError, match="already exists"):
        generate_key_pair(tmp_path / "a.key")
    assert load_public_key(tmp_path / "a.key.pub").raw == public.raw  # not replaced


def test_sign_verify_round_trip(keys: tuple[Path, Path]) -> None:
    private, public_path = keys
    public = load_public_key(public_path)
    signed = sign_manifest(MANIFEST_LIKE, private)
    assert "signature" not in MANIFEST_LIKE  # the input is not modified
    assert signed["signature"]["key_id"] == public.key_id
    # as the device sees it: written with indentation, parsed back
    on_device = json.loads(json.dumps(signed, indent=2))
    result = verify_manifest(on_device, (public,))
    assert result is not None and result.key_id == public.key_id
    assert result.trusted_by == f"{public.key_id} ({public_path})"
    # key order and whitespace are not part of the signed bytes
    reordered = json.loads(json.dumps(dict(reversed(list(on_device.items())))))
    assert verify_manifest(reordered, [public]) is not None
    # signing adds the release it binds (edgekit/trust/release.py) and nothing else
    assert canonical_bytes(reordered) == canonical_bytes({**MANIFEST_LIKE,
                                                          "release": signed["release"]})
    # without trusted keys a valid signature still checks, and an unsigned manifest loads
    assert verify_manifest(on_device).trusted_by == ""
    assert verify_manifest(MANIFEST_LIKE) is None
    # re-signing replaces the old signature
    assert sign_manifest(signed, private)["signature"] == signed["signature"]


@pytest.mark.parametrize("change", [
    lambda m: m["files"].__setitem__("model.onnx", "ef" * 32),  # swapped model, rehashed
    lambda m: set_in(m, ("target", "profile", "thermal", "soft_limit_c"), 95.0),
    lambda m: m.__setitem__("extra", 1),
    lambda m: m.pop("name"),
])
def test_tampered_manifest_is_refused(keys: tuple[Path, Path], change: Any) -> None:
    private, public_path = keys
    signed = json.loads(json.dumps(sign_manifest(MANIFEST_LIKE, private)))
    change(signed)
    with pytest.raises(SignatureError, match="changed after signing"):
        verify_manifest(signed, [load_public_key(public_path)])
    with pytest.raises(SignatureError):  # also without trusted keys: never "signed and fine"
        verify_manifest(signed)


def test_wrong_key_and_unsigned_are_refused_naming_the_keys(tmp_path: Path,
                                                            keys: tuple[Path, Path]) -> None:
    private, public_path = keys
    trusted = load_public_key(public_path)
    attacker = generate_key_pair(tmp_path / "attacker.key")
    forged = sign_manifest(MANIFEST_LIKE, tmp_path / "attacker.key")
    with pytest.raises(UntrustedArtifactError) as info:
        verify_manifest(forged, [trusted])
    assert attacker.key_id in str(info.value) and trusted.key_id in str(info.value)
    assert isinstance(info.value, ArtifactError) and info.value.exit_code == 2
    # the attacker keeps the trusted key's id and public key but signs with his own
    disguised = json.loads(json.dumps(forged))
    disguised["signature"]["public_key"] = base64.b64encode(trusted.raw).decode()
    disguised["signature"]["key_id"] = trusted.key_id
    with pytest.raises(SignatureError, match="changed after signing"):
        verify_manifest(disguised, [trusted])
    with pytest.raises(UntrustedArtifactError, match=f"unsigned.*{trusted.key_id}"):
        verify_manifest(MANIFEST_LIKE, [trusted])


@pytest.mark.parametrize("field, message", [
    ("not an object", "expected an object"),
    ({"algorithm": "rsa", "key_id": "x", "public_key": "x", "value": "x"}, "expected 'ed25519'"),
    ({"algorithm": "ed25519", "key_id": 5, "public_key": "", "value": ""}, "expected a string"),
    ({"algorithm": "ed25519", "key_id": "x", "public_key": "!!", "value": ""}, "base64"),
    ({"algorithm": "ed25519", "key_id": "x", "public_key": "AAAA", "value": "AAAA"},
     "32-byte key"),
    ({"algorithm": "ed25519", "key_id": "0" * 16,
      "public_key": base64.b64encode(bytes(32)).decode(),
      "value": base64.b64encode(bytes(64)).decode()}, "fingerprint"),
])
def test_malformed_signature_fields_are_typed_errors(field: Any, message: str) -> None:
    with pytest.raises(SignatureError, match=message):
        read_signature({**MANIFEST_LIKE, "signature": field})


def test_manifest_without_canonical_form_is_a_typed_error(keys: tuple[Path, Path]) -> None:
    with pytest.raises(SignatureError, match="canonical"):
        sign_manifest({**MANIFEST_LIKE, "budget": float("nan")}, keys[0])


def test_private_key_readable_by_others_is_refused(keys: tuple[Path, Path]) -> None:
    private, public_path = keys
    private.chmod(0o644)
    with pytest.raises(SigningKeyError, match="mode 0644; expected 0600"):
        sign_manifest(MANIFEST_LIKE, private)
    private.chmod(0o600)
    assert load_private_key(private) is not None
    with pytest.raises(SigningKeyError, match="private key"):
        load_private_key(public_path.rename(public_path.parent / "pub.key"))  # not a private key


def test_encrypted_private_key(tmp_path: Path) -> None:
    public = generate_key_pair(tmp_path / "k", passphrase=b"correct horse")
    signed = sign_manifest(MANIFEST_LIKE, tmp_path / "k", passphrase=b"correct horse")
    assert verify_manifest(signed, [public]).key_id == public.key_id
    with pytest.raises(SigningKeyError):
        load_private_key(tmp_path / "k", passphrase=b"wrong")


def test_trusted_keys_from_env_and_config_dirs(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    _, first = keys
    etc, user, loose = tmp_path / "etc", tmp_path / "xdg/edgekit/trusted_keys", tmp_path / "l"
    for folder in (etc, user, loose):
        folder.mkdir(parents=True)
    second = generate_key_pair(tmp_path / "second.key", etc / "second.pub")
    third = generate_key_pair(tmp_path / "third.key", user / "third.pub")
    (etc / "README").write_text("not a key: ignored, only *.pub files count\n")
    raw_line = loose / "fourth.pub"  # the raw base64 form
    fourth = generate_key_pair(tmp_path / "fourth.key", tmp_path / "fourth.pem")
    raw_line.write_text(base64.b64encode(fourth.raw).decode() + "\n")
    environ = {ENV_TRUSTED_KEYS: os.pathsep.join([str(first), "", str(loose)]),
               "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert user_key_dir(environ) == str(user)
    found = discover_trusted_keys(environ=environ, config_dirs=[etc, user_key_dir(environ)])
    assert [k.key_id for k in found] == [load_public_key(first).key_id, fourth.key_id,
                                         second.key_id, third.key_id]
    assert found[1].source == str(raw_line)
    # explicit keys come first; the same key twice is kept once
    again = discover_trusted_keys([etc / "second.pub", first], environ={}, config_dirs=[etc])
    assert [k.key_id for k in again] == [second.key_id, load_public_key(first).key_id]
    assert discover_trusted_keys(environ={}, config_dirs=[tmp_path / "absent"]) == ()


def test_trust_configuration_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match=f"from \\${ENV_TRUSTED_KEYS}. does not exist"):
        discover_trusted_keys(environ={ENV_TRUSTED_KEYS: str(tmp_path / "gone.pub")},
                              config_dirs=[])
    bad = tmp_path / "trusted"
    bad.mkdir()
    (bad / "broken.pub").write_text("this is not a key\n")
    with pytest.raises(SigningKeyError, match="broken.pub"):
        discover_trusted_keys(environ={}, config_dirs=[bad])
    (bad / "broken.pub").unlink()
    os.mkfifo(bad / "fifo.pub")  # a FIFO must not hang discovery
    with pytest.raises(SigningKeyError, match="regular file"):
        discover_trusted_keys(environ={}, config_dirs=[bad])
    with pytest.raises(SigningKeyError, match="expected paths or PublicKey"):
        discover_trusted_keys([42], environ={}, config_dirs=[])  # type: ignore[list-item]


def test_signed_artifact_swapped_and_rehashed_is_refused(tmp_path: Path,
                                                         keys: tuple[Path, Path]) -> None:
    """The attack of issue 12: swap a member, rewrite every hash. Hashes pass, the
    signature does not."""
    private, public_path = keys
    trusted = [load_public_key(public_path)]
    original = write_model_artifact(tmp_path / "m.edgekit", mlp_onnx(classes=3), [1, 16], 3)
    members = {name: read_artifact(original).read(name) for name in read_artifact(original).members}
    write_artifact(original, read_artifact(original).manifest, members, sign_key=private)
    loaded = read_artifact(original, trusted)
    assert loaded.signature is not None and loaded.signature.key_id == trusted[0].key_id

    with zipfile.ZipFile(original) as archive:
        stolen = json.loads(archive.read(MANIFEST))
    forged = tmp_path / "forged.edgekit"
    write_artifact(forged, stolen, {**members, "model.onnx": mlp_onnx(classes=3, seed=9)})
    with zipfile.ZipFile(forged) as archive:  # every sha256 recomputed, the signature kept
        assert json.loads(archive.read(MANIFEST))["signature"] == stolen["signature"]
    with pytest.raises(SignatureError, match="changed after signing"):
        read_artifact(forged)  # a present signature is checked even without trusted keys
    with pytest.raises(SignatureError, match="changed after signing"):
        read_artifact(forged, trusted)


def test_import_edgekit_does_not_import_cryptography() -> None:
    code = ("import sys, edgekit, edgekit.trust.signing, edgekit.trust.keys, edgekit.device.power; "
            "sys.exit('cryptography' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
