"""Trust fails closed (issue 36, defect 1): a configured key source without a usable key is
an error naming it; a .pem public key is read; a signature binds target, release version and
build time, and a device can pin them."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

import edgekit
from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.errors import SigningKeyError, UntrustedArtifactError
from edgekit.trust.keys import ENV_TRUSTED_KEYS, discover_trusted_keys
from edgekit.trust.release import ENV_MIN_RELEASE, ENV_PIN_TARGET, Pin
from edgekit.trust.signing import generate_key_pair, key_id, load_private_key, signed_message
from tools.fixtures import artifact_cases as cases


@pytest.fixture()
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private = tmp_path / "build.key"
    generate_key_pair(private)
    return private, Path(f"{private}.pub")


@pytest.fixture()
def unsigned(tmp_path: Path) -> Path:
    manifest, members = cases.base_members()
    path = tmp_path / "unsigned.edgekit"
    path.write_bytes(cases.artifact_bytes(manifest, members))
    return path


def signed_artifact(folder: Path, private: Path, version: int | None = None,
                    target: str = "rpi4") -> Path:
    manifest, members = cases.base_members(target=target)
    path = folder / f"signed-{target}-{version}.edgekit"
    write_artifact(path, manifest, dict(members), sign_key=private, release_version=version)
    return path


@pytest.mark.parametrize("content", [{}, {"README": "keys go here"}, {"key.txt": "x"}])
def test_an_explicit_folder_without_keys_is_an_error_naming_it(
        tmp_path: Path, unsigned: Path, content: dict[str, str]) -> None:
    folder = tmp_path / "trusted"
    folder.mkdir()
    for name, text in content.items():
        (folder / name).write_text(text)
    with pytest.raises(SigningKeyError, match="holds no public key") as caught:
        edgekit.load(unsigned, trusted_keys=[folder])
    assert str(folder) in str(caught.value)
    with pytest.raises(SigningKeyError, match=ENV_TRUSTED_KEYS.replace("$", r"\$")):
        discover_trusted_keys(environ={ENV_TRUSTED_KEYS: str(folder)}, config_dirs=[])


def test_a_device_folder_with_files_but_no_key_fails_closed(tmp_path: Path) -> None:
    folder = tmp_path / "etc-trusted"
    folder.mkdir()
    assert discover_trusted_keys(environ={}, config_dirs=[folder]) == ()  # empty: none there
    (folder / "signer.key").write_text("not a public key file name")
    with pytest.raises(SigningKeyError, match="holds no public key"):
        discover_trusted_keys(environ={}, config_dirs=[folder])


def test_a_pem_key_is_read_and_enforced(tmp_path: Path, keys: tuple[Path, Path],
                                        unsigned: Path) -> None:
    private, public = keys
    folder = tmp_path / "trusted"
    folder.mkdir()
    (folder / "signer.pem").write_bytes(public.read_bytes())
    with pytest.raises(UntrustedArtifactError, match="unsigned"):
        edgekit.load(unsigned, trusted_keys=[folder])
    with edgekit.load(signed_artifact(tmp_path, private), threads=1,
                      trusted_keys=[folder]) as model:
        assert model.artifact.signature is not None


def test_a_private_key_in_the_trust_folder_is_named(tmp_path: Path,
                                                     keys: tuple[Path, Path]) -> None:
    private, _ = keys
    folder = tmp_path / "trusted"
    folder.mkdir()
    (folder / "oops.pem").write_bytes(private.read_bytes())
    with pytest.raises(SigningKeyError, match="PRIVATE key"):
        discover_trusted_keys([folder], environ={}, config_dirs=[])


def test_verify_command_fails_closed_on_an_empty_folder(tmp_path: Path, unsigned: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-m", "edgekit.cli", "verify", str(unsigned),
                           "--trusted-key", str(folder)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "holds no public key" in proc.stderr and "PASS" not in proc.stdout


def test_signature_binds_target_version_and_time(tmp_path: Path,
                                                 keys: tuple[Path, Path]) -> None:
    private, public = keys
    path = signed_artifact(tmp_path, private, version=7)
    release = read_artifact(path).spec.release
    assert release is not None and (release.target, release.version) == ("rpi4", 7)
    trusted = discover_trusted_keys([public], environ={}, config_dirs=[])
    read_artifact(path, trusted, Pin(target="rpi4", min_version=7))
    with pytest.raises(UntrustedArtifactError, match="release 8 or newer"):
        read_artifact(path, trusted, Pin(min_version=8))
    with pytest.raises(UntrustedArtifactError, match="pinned to 'rpi5'"):
        read_artifact(path, trusted, Pin(target="rpi5"))
    env = {**os.environ, ENV_MIN_RELEASE: "9", ENV_PIN_TARGET: "rpi4"}
    proc = subprocess.run([sys.executable, "-m", "edgekit.cli", "verify", str(path),
                           "--trusted-key", str(public)], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 2 and "release 9 or newer" in proc.stderr, proc.stderr


def test_a_signature_without_release_fails_closed_under_trusted_keys(
        tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """What an artifact signed before the binding looks like: refused, since nothing in it
    says which release it is."""
    private, public = keys
    manifest, members = cases.base_members()
    key = load_private_key(private)
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    manifest["signature"] = {
        "algorithm": "ed25519", "key_id": key_id(raw),
        "public_key": base64.b64encode(raw).decode(),
        "value": base64.b64encode(key.sign(signed_message(manifest))).decode()}
    path = tmp_path / "old.edgekit"
    path.write_bytes(cases.artifact_bytes(manifest, members))
    read_artifact(path)  # without trusted keys: loads as before
    with pytest.raises(UntrustedArtifactError, match="without a release section"):
        read_artifact(path, discover_trusted_keys([public], environ={}, config_dirs=[]))


def test_sign_command_binds_the_release_number(tmp_path: Path, keys: tuple[Path, Path],
                                               unsigned: Path) -> None:
    private, public = keys
    proc = subprocess.run([sys.executable, "-m", "edgekit.cli", "sign", str(unsigned), "--key",
                           str(private), "--release-version", "5"], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and "release 5 for rpi4" in proc.stdout, proc.stderr
    for minimum, code in (("5", 0), ("6", 2)):
        proc = subprocess.run([sys.executable, "-m", "edgekit.cli", "verify", str(unsigned),
                               "--trusted-key", str(public), "--min-release", minimum,
                               "--backend", "onnxruntime"], capture_output=True, text=True)
        assert proc.returncode == code, proc.stdout + proc.stderr
