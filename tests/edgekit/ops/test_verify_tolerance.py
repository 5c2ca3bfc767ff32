"""verify holds each output to the manifest's measured tolerance and reports the distribution."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.artifact.manifest import Manifest
from edgekit.cli import main
from edgekit.errors import ArtifactError
from edgekit.ops.verify import verify_artifact


@pytest.fixture(scope="module")
def tflite_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from edgekit.converters import build

    from tests.conftest import DIGITS_NPZ, DIGITS_ONNX

    out = tmp_path_factory.mktemp("digits-tflite") / "digits.tflite.edgekit"
    build(str(DIGITS_ONNX), target="rpi4", calib=str(DIGITS_NPZ), output=out, quiet=True,
          formats=["tflite"])
    return out


def test_the_manifest_records_per_output_bounds(digits_artifact: Path) -> None:
    vectors = read_artifact(digits_artifact).spec.test_vectors
    assert vectors is not None and "study_cross_isa" in vectors.basis
    bounds = vectors.for_output("logits")
    # 4 vectors x 10 logits: two spare elements -> 95%; a 5-layer net: 2 steps
    assert bounds.within_1_step == pytest.approx(0.95) and bounds.max_steps == 2.0
    assert bounds.min_sqnr_db is not None and bounds.min_sqnr_db > 10.0
    assert bounds.slices and bounds.axis == 1


def test_verify_reports_the_distribution(digits_artifact: Path) -> None:
    report = verify_artifact(digits_artifact)
    assert report.passed
    text = "\n".join(report.lines())
    for fmt in report.formats:
        d = fmt.distribution["logits"]
        assert d["within_1"] >= d["need_within_1"] and d["max"] <= d["need_max"]
    assert "exact" in text and "within 1 step" in text and "worst slice" in text


def test_one_flipped_weight_fails_both_formats(digits_artifact: Path, tmp_path: Path) -> None:
    from tools.studies.perturb_weight import perturb_artifact

    bad = tmp_path / "perturbed.edgekit"
    flipped = perturb_artifact(digits_artifact, bad)
    assert len(flipped) == 2
    report = verify_artifact(bad)
    assert not report.passed
    for fmt in report.formats:
        assert not fmt.passed and any("steps >" in r for r in fmt.failures), fmt.failures


def test_verify_with_a_backend_the_artifact_has_no_model_for_exits_2(
        tflite_only: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["verify", "--backend", "onnxruntime", str(tflite_only)])
    err = capsys.readouterr().err
    assert code == 2
    assert "runs onnx models; this artifact holds tflite only" in err
    assert "FAIL" not in capsys.readouterr().out


def test_bad_bounds_are_refused_with_the_field_named(digits_artifact: Path) -> None:
    raw = dict(read_artifact(digits_artifact).manifest)
    raw["test_vectors"] = dict(raw["test_vectors"])
    raw["test_vectors"]["outputs"] = {"logits": {"within_1_step": 1.5, "max_steps": 2}}
    with pytest.raises(ArtifactError, match=r"outputs\['logits'\]\.within_1_step"):
        Manifest.from_dict(raw)
    raw["test_vectors"]["outputs"] = {"logits": {"within_1_step": 0.9, "max_steps": 2,
                                                 "slices": [[3, 1]]}}
    with pytest.raises(ArtifactError, match="slices"):
        Manifest.from_dict(raw)


def test_artifacts_without_bounds_keep_the_one_step_rule(digits_artifact: Path,
                                                          tmp_path: Path) -> None:
    artifact = read_artifact(digits_artifact)
    manifest = {k: v for k, v in artifact.manifest.items() if k != "files"}
    manifest["test_vectors"] = {k: v for k, v in manifest["test_vectors"].items()
                                if k not in ("outputs", "basis")}
    old = tmp_path / "old.edgekit"
    write_artifact(old, manifest, {n: artifact.read(n) for n in artifact.members
                                   if n != "manifest.json"})
    report = verify_artifact(old)
    assert report.passed
    assert all(f.distribution["logits"]["need_max"] == 1.0 for f in report.formats)
