"""Signing and verifying inside the emulated rpi4 sysroot (Cortex-A72, aarch64 wheels of
cryptography): a signed artifact loads with its trusted key, a tampered-and-rehashed one is
refused, and the guest signs a manifest the host verifies."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from edgekit.converters.emulation import CpuSpec, run_python
from edgekit.targets import load_profile

from edgekit.artifact.archive import MANIFEST, write_artifact
from edgekit.trust.signing import generate_key_pair, load_public_key, verify_manifest
from tools.fixtures import artifact_cases as cases

GUEST = """
import json, sys
import edgekit
from edgekit.errors import EdgekitError
from edgekit.trust.signing import generate_key_pair, sign_manifest
signed, forged, public, folder = sys.argv[1:5]
report = {}
with edgekit.load(signed, threads=1, trusted_keys=[public]) as model:
    report["key_id"] = model.artifact.signature.key_id
    report["y"] = model.predict(__import__("numpy").ones((1, 4), "float32")).tolist()
try:
    edgekit.load(forged, threads=1, trusted_keys=[public])
    report["forged"] = "loaded"
except EdgekitError as exc:
    report["forged"] = type(exc).__name__ + ": " + str(exc)
generate_key_pair(folder + "/guest.key")
report["guest_signed"] = sign_manifest({"made": "in the guest"}, folder + "/guest.key")
print("RESULT " + json.dumps(report))
"""


@pytest.mark.emulated
def test_signed_artifacts_on_the_emulated_pi4(sysroot, tmp_path: Path) -> None:  # noqa: ANN001
    key = tmp_path / "build.key"
    public = generate_key_pair(key)
    manifest, members = cases.base_members()
    signed = tmp_path / "signed.edgekit"
    write_artifact(signed, manifest, dict(members), sign_key=key)
    with zipfile.ZipFile(signed) as archive:
        stolen = json.loads(archive.read(MANIFEST))
    swapped = [("model.onnx", cases.tiny_onnx(seed=3)), members[1]]
    forged = tmp_path / "forged.edgekit"
    forged.write_bytes(cases.artifact_bytes(cases.rehash(stolen, swapped), swapped))

    cpu = CpuSpec.from_profile(load_profile("rpi4"))
    proc = run_python(sysroot, cpu, ["-c", GUEST, str(signed), str(forged), f"{key}.pub",
                                     str(tmp_path)], timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"guest failed ({proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(lines[-1][len("RESULT "):])
    assert report["key_id"] == public.key_id and len(report["y"][0]) == 3
    assert report["forged"].startswith("SignatureError") and "changed after signing" in (
        report["forged"])
    guest_key = load_public_key(tmp_path / "guest.key.pub")
    checked = verify_manifest(report["guest_signed"], [guest_key])
    assert checked is not None and checked.key_id == guest_key.key_id
