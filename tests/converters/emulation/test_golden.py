"""``edgekit build --golden-on TARGET`` (issue 16): expected outputs computed under the
emulated target CPU; verify on that CPU then checks every element exactly, elsewhere it keeps
the measured cross-ISA bounds. A stored output one step off passes the bounds on this host and
fails the exact check on the emulated A72 (the golden check is the stricter one)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.emulation import emulate_batch
from edgekit.targets import load_profile

from edgekit.artifact.archive import encode_test_vectors, read_artifact, write_artifact
from edgekit.cli import main
from edgekit.ops.verify import verify_artifact

from ...conftest import DIGITS_NPZ, DIGITS_ONNX

pytestmark = pytest.mark.emulated


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory, sysroot) -> Path:  # noqa: ANN001
    folder = tmp_path_factory.mktemp("golden")
    out, key = folder / "digits.rpi4.edgekit", folder / "build.key"
    assert main(["keygen", str(key)]) == 0
    code = main(["build", str(DIGITS_ONNX), "--target", "rpi4", "--calib", str(DIGITS_NPZ),
                 "--format", "both", "-o", str(out), "--golden-on", "rpi4", "--sign", str(key),
                 "-q"])
    assert code == 0
    return out


def one_step_off(src: Path, dst: Path) -> None:
    """``src`` with one element of each stored output moved by one quantization step."""
    artifact = read_artifact(src)
    member = artifact.spec.test_vectors.path
    with np.load(io.BytesIO(artifact.read(member))) as data:
        raw = {k: data[k].copy() for k in data.files}
    for entry in artifact.manifest["models"]:
        for spec in artifact.manifest["outputs"]:
            q = entry.get("outputs_quantization", {}).get(spec["name"]) or spec["quantization"]
            raw[f"out/{entry['format']}/{spec['name']}"].flat[0] += np.float32(q["scale"])
    members = {n: artifact.read(n) for n in artifact.members if n != "manifest.json"}
    members[member] = encode_test_vectors(raw)
    # unsigned: the nudge is ours (a kept signature would be refused as tampering)
    manifest = {k: v for k, v in artifact.manifest.items() if k not in ("files", "signature")}
    write_artifact(dst, manifest, members)


def test_golden_vectors_are_exact_on_the_target_cpu_and_bounded_elsewhere(golden: Path,
                                                                         tmp_path: Path):
    vectors = read_artifact(golden).spec.test_vectors
    assert vectors.golden == {"target": "rpi4", "cpu": "cortex-a72", "part": "0xd08"}
    host = verify_artifact(golden, trusted_keys=[golden.parent / "build.key.pub"])
    assert host.passed and "not one" in host.golden  # re-signed after the rewrite
    assert "trusted" in host.signer
    assert all(d["need_max"] > 0 for f in host.formats for d in f.distribution.values())

    nudged = tmp_path / "nudged.edgekit"
    one_step_off(golden, nudged)
    assert verify_artifact(nudged).passed  # one step is within the cross-ISA bounds here
    result = emulate_batch(load_profile("rpi4"), verify=[golden, nudged])
    exact, off = (r.guest["report"] for r in result.verified)
    assert "every element must match exactly" in exact["golden"]
    for report, passes in ((exact, True), (off, False)):
        formats = {f["format"]: f for f in report["formats"] if not f["skipped"]}
        assert set(formats) == {"tflite", "onnx"}
        for f in formats.values():
            assert f["passed"] is passes
            assert all(d["need_max"] == 0 for d in f["distribution"].values())


def test_golden_on_a_target_without_emulation_is_refused_before_building(tmp_path: Path,
                                                                         capsys):  # noqa: ANN001
    out = tmp_path / "never.edgekit"
    code = main(["build", str(DIGITS_ONNX), "--target", "rpi4", "--calib", str(DIGITS_NPZ),
                 "-o", str(out), "--golden-on", "host"])
    assert code == 2 and not out.exists()
    assert "rpi4" in capsys.readouterr().err  # names the targets that can be emulated
