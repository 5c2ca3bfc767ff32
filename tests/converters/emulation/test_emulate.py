"""``edgekit emulate``: real artifacts verified on the boards' CPU models under QEMU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.emulation import TIMING_LABEL, emulate
from edgekit.targets import load_profile

from edgekit.artifact.archive import encode_test_vectors, read_artifact, write_artifact
from edgekit.backends import backends_for
from edgekit.cli import main

pytestmark = pytest.mark.emulated
SHIPPED = Path(__file__).resolve().parents[3] / "examples" / "raspberrypi" / "digits.rpi4.edgekit"

BOTH = {"tflite", "onnx"}


def expected_formats(path: Path, target: str) -> set[str]:
    """Formats in the artifact that this edgekit has a backend for and the target's sysroot
    has the runtime of: each must be verified, not skipped. Never empty: a test comparing
    against an empty set would pass without verifying anything."""
    runtimes = set(load_profile(target).emulation.runtimes)
    formats = set()
    for entry in read_artifact(path).manifest["models"]:
        if any(cls.package in runtimes for cls in backends_for(entry["format"])):
            formats.add(entry["format"])
    assert formats, f"{path}: no format of this artifact has a runtime in {target}'s sysroot"
    return formats


def tamper(src: Path, dst: Path, vector: int = 1, steps: float = 10.0) -> None:
    """Shift one test vector's expected outputs by ``steps`` quantization steps and re-hash
    the member in the manifest, so the artifact still passes load's hash check."""
    artifact = read_artifact(src)
    members = {name: artifact.read(name) for name in artifact.members if name != "manifest.json"}
    vectors = artifact.test_vectors()
    for spec in artifact.manifest["outputs"]:
        scale = float((spec.get("quantization") or {}).get("scale") or 1.0)
        for key in [k for k in vectors if k.startswith("out/") and k.endswith("/" + spec["name"])]:
            vectors[key] = vectors[key].copy()
            vectors[key][vector] += np.float32(steps * scale)
    members[artifact.manifest["test_vectors"]["path"]] = encode_test_vectors(vectors)
    manifest = {k: v for k, v in artifact.manifest.items() if k != "files"}
    write_artifact(dst, manifest, members)


def test_digits_pass_on_the_pi4_cortex_a72(sysroot, digits_artifact: Path) -> None:  # noqa: ANN001
    result = emulate(digits_artifact, load_profile("rpi4"), runs=2)
    text = "\n".join(result.lines())
    assert result.passed, text
    assert result.cpu.model == "cortex-a72" and result.guest["cpuinfo"]["part"] == "0xd08"
    assert not result.guest["hwcap"]["asimddp"]
    formats = {f["format"]: f for f in result.guest["report"]["formats"] if not f["skipped"]}
    assert expected_formats(digits_artifact, "rpi4") == set(formats) == BOTH, text
    count = read_artifact(digits_artifact).manifest["test_vectors"]["count"]
    assert count > 0
    for report in formats.values():
        assert report["passed"] and len(report["steps"]) == count
        assert all(step <= 1.001 for vector in report["steps"] for step in vector.values())
        assert len(result.guest["timings_ms"][report["format"]]) == 2
    assert "onnxruntime 1.32.0" in text and TIMING_LABEL in text and "emulate PASS" in text


def test_digits_pass_on_the_zero2w_cortex_a53_from_the_cli(
        sysroot, zero2w_artifact: Path, capsys: pytest.CaptureFixture) -> None:  # noqa: ANN001
    code = main(["emulate", "--target", "rpi-zero2w", "--runs", "1", "-q", str(zero2w_artifact)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cortex-a53" in out and "part 0xd03" in out and "-asimddp" in out
    expected = expected_formats(zero2w_artifact, "rpi-zero2w")
    assert expected == {"tflite"}  # by default a build ships the profile's preferred format only
    for fmt in expected:
        assert any(f"{fmt} on " in line and "PASS" in line for line in out.splitlines()), out
    assert "emulate PASS" in out
    assert "artifact was built for" not in out  # built for the board it runs on: no note


def test_tampered_test_vectors_fail_with_a_clear_report(
        sysroot, digits_artifact: Path, tmp_path: Path,  # noqa: ANN001
        capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "tampered.edgekit"
    tamper(digits_artifact, bad, vector=1, steps=10.0)
    read_artifact(bad)  # still loads: the hashes match, only the expectations are wrong
    code = main(["emulate", "--target", "rpi4", "--runs", "1", "-q", str(bad)])
    captured = capsys.readouterr()
    assert code == 1, captured.out + captured.err  # a failed check, not a usage error
    assert "emulated verification on rpi4 (cortex-a72) failed" in captured.err
    lines = captured.out.splitlines()
    for runtime in ("onnx on onnxruntime", "tflite on litert"):
        assert any(runtime in line and "FAIL" in line for line in lines), captured.out

    def steps(index: int) -> list[float]:  # one figure per verified format
        found = [line for line in lines if line.strip().startswith(f"vector {index}:")]
        return [float(line.split("(")[1].split(" steps")[0]) for line in found]

    # the 10 steps we added, measured in each format's own quantization step (both formats)
    assert len(steps(1)) == 2 and all(9.0 <= s <= 11.0 for s in steps(1)), captured.out
    assert len(steps(0)) == 2 and all(s <= 1.001 for s in steps(0)), captured.out  # untouched
    assert "emulate FAIL" in captured.out and "timing" not in captured.out


@pytest.mark.slow
def test_a_mobilenetv2_size_artifact_passes_on_the_pi4(sysroot, mobilenetv2_artifact: Path  # noqa: ANN001
                                                       ) -> None:
    result = emulate(mobilenetv2_artifact, load_profile("rpi4"), runs=1)
    text = "\n".join(result.lines())
    assert result.passed, text
    verified = {f["format"] for f in result.guest["report"]["formats"] if not f["skipped"]}
    assert expected_formats(mobilenetv2_artifact, "rpi4") == verified == BOTH, text
    assert all(f["steps"] for f in result.guest["report"]["formats"])  # vectors really compared


def test_the_shipped_example_passes_on_litert_and_onnxruntime_on_a53(sysroot) -> None:  # noqa: ANN001
    """The committed example artifact holds both formats: both runtimes verify it on the
    Zero 2 W's Cortex-A53 (it was built for the Pi 4, and the report says so)."""
    result = emulate(SHIPPED, load_profile("rpi-zero2w"), runs=1)
    text = "\n".join(result.lines())
    assert result.passed, text
    verified = {f["format"]: f["runtime"] for f in result.guest["report"]["formats"]
                if not f["skipped"] and f["passed"]}
    assert verified == {"tflite": "litert", "onnx": "onnxruntime"}, text
    assert "artifact was built for 'rpi4', emulated as 'rpi-zero2w'" in text
    assert set(result.guest["timings_ms"]) == {"tflite", "onnx"}
