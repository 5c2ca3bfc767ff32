"""Signed artifacts end to end: edgekit.load with trusted keys, keygen/sign/inspect/verify."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.artifact.archive import MANIFEST, read_artifact, write_artifact
from edgekit.errors import SignatureError, UntrustedArtifactError
from edgekit.trust.keys import ENV_TRUSTED_KEYS
from edgekit.trust.signing import generate_key_pair, load_public_key
from tools.fixtures import artifact_cases as cases


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


@pytest.fixture()
def signed(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(signed artifact, private key, public key)."""
    private = tmp_path / "build.key"
    generate_key_pair(private)
    manifest, members = cases.base_members()
    path = tmp_path / "signed.edgekit"
    write_artifact(path, manifest, dict(members), sign_key=private)
    return path, private, Path(f"{private}.pub")


def tampered_and_rehashed(source: Path, out: Path) -> Path:
    """Another model in, every hash recomputed, the original signature kept."""
    with zipfile.ZipFile(source) as archive:
        manifest = json.loads(archive.read(MANIFEST))
        members = [(n, archive.read(n)) for n in archive.namelist() if n != MANIFEST]
    swapped = [("model.onnx", cases.tiny_onnx(seed=7)) if n == "model.onnx" else (n, d)
               for n, d in members]
    out.write_bytes(cases.artifact_bytes(cases.rehash(manifest, swapped), swapped))
    return out


def test_signed_loads_with_its_key_and_tampered_rehashed_is_refused(
        tmp_path: Path, signed: tuple[Path, Path, Path]) -> None:
    path, _, public = signed
    with edgekit.load(path, threads=1, trusted_keys=[public]) as model:
        assert model.artifact.signature.key_id == load_public_key(public).key_id
        assert model.predict(np.ones((1, 4), np.float32)).shape == (1, 3)
    forged = tampered_and_rehashed(path, tmp_path / "forged.edgekit")
    with pytest.raises(SignatureError, match="changed after signing"):
        edgekit.load(forged, trusted_keys=[public])


def test_configured_keys_refuse_unsigned_and_foreign_artifacts(
        tmp_path: Path, signed: tuple[Path, Path, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, _, public = signed
    manifest, members = cases.base_members()
    unsigned = tmp_path / "unsigned.edgekit"
    write_artifact(unsigned, manifest, dict(members))
    edgekit.load(unsigned, threads=1).close()  # no keys anywhere: loads as before
    monkeypatch.setenv(ENV_TRUSTED_KEYS, str(public))
    with pytest.raises(UntrustedArtifactError, match="unsigned"):
        edgekit.load(unsigned)
    generate_key_pair(tmp_path / "other.key")
    foreign = tmp_path / "foreign.edgekit"
    write_artifact(foreign, manifest, dict(members), sign_key=tmp_path / "other.key")
    with pytest.raises(UntrustedArtifactError, match="not trusted"):
        edgekit.load(foreign)
    edgekit.load(path, threads=1).close()  # the environment's key signed this one


def test_cli_keygen_sign_inspect_verify(tmp_path: Path) -> None:
    private = tmp_path / "k.key"
    made = cli("keygen", str(private))
    assert made.returncode == 0, made.stderr
    key_id = load_public_key(f"{private}.pub").key_id
    assert key_id in made.stdout and oct(private.stat().st_mode & 0o777) == "0o600"
    manifest, members = cases.base_members()
    art = tmp_path / "a.edgekit"
    write_artifact(art, manifest, dict(members))
    trust = {ENV_TRUSTED_KEYS: f"{private}.pub"}
    refused = cli("verify", str(art), env=trust)
    assert refused.returncode == 2 and "unsigned" in refused.stderr
    assert "unsigned" in cli("inspect", str(art)).stdout
    signing = cli("sign", str(art), "--key", str(private))
    assert signing.returncode == 0 and key_id in signing.stdout, signing.stderr
    shown = cli("inspect", str(art), env=trust)
    assert f"signed by key {key_id} (trusted: " in shown.stdout
    checked = cli("verify", str(art), env=trust)
    assert checked.returncode == 0 and f"signature: signed by key {key_id}" in checked.stdout
    forged = tampered_and_rehashed(art, tmp_path / "forged.edgekit")
    assert cli("verify", str(forged), env=trust).returncode == 2
    assert read_artifact(art, [load_public_key(f"{private}.pub")]).signature.key_id == key_id


def test_sign_refuses_a_readable_private_key_before_touching_the_artifact(
        tmp_path: Path, signed: tuple[Path, Path, Path]) -> None:
    path, private, _ = signed
    before = path.read_bytes()
    private.chmod(0o644)
    proc = cli("sign", str(path), "--key", str(private))
    assert proc.returncode == 2 and "expected 0600" in proc.stderr
    assert path.read_bytes() == before
