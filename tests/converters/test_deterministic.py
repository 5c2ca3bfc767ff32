"""Deterministic builds: the same inputs give the same artifact bytes, and the content key in
the manifest names those inputs (issue 20)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from edgekit.converters import BuildConfig, build
from edgekit.converters.core.content_key import content_key
from edgekit.targets import load_profile

from edgekit.artifact.archive import read_artifact
from tools.fixtures.artifact_cases import tiny_onnx

OPTIONS = {"target": "rpi4", "calib_samples": 32, "val_samples": 16, "test_vectors": 2,
           "quiet": True}


def inputs_in(folder: Path) -> tuple[Path, Path]:
    """The tiny model and its data written into ``folder`` (same bytes in every folder)."""
    folder.mkdir()
    source = folder / "tiny.onnx"
    source.write_bytes(tiny_onnx())
    data = folder / "data.npz"
    x = np.random.default_rng(7).normal(size=(48, 4)).astype(np.float32)
    with data.open("wb") as handle:  # np.savez on a handle: fixed member times, same bytes
        np.savez(handle, x=x)
    return source, data


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """The same build run twice, from copies of the inputs in two different folders."""
    root = tmp_path_factory.mktemp("deterministic")
    outs = []
    for name in ("a", "b"):
        source, data = inputs_in(root / name)
        out = root / name / "out" / "tiny.edgekit"
        result = build(str(source), calib=str(data), output=out, **OPTIONS)
        assert result.timings["stages.calibrate"] >= 0  # the times: in the result, not the file
        outs.append(out)
    return outs[0], outs[1], root / "a" / "tiny.onnx", root / "a" / "data.npz"


def test_same_inputs_give_the_same_bytes(two_builds: tuple[Path, Path, Path, Path]) -> None:
    first, second, _, _ = two_builds
    assert first.read_bytes() == second.read_bytes()
    manifest = read_artifact(first).manifest
    assert "created" not in manifest
    text = first.read_bytes().decode("latin-1")
    assert str(first.parent.parent) not in text  # no host path (the zip is deflated: check the manifest too)
    assert str(first.parent.parent) not in str(manifest)
    assert not any("seconds" in stage for stage in manifest["stages"])
    with zipfile.ZipFile(first) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == ["manifest.json", *sorted(i.filename for i in infos[1:])]
    assert {(i.date_time, i.external_attr >> 16) for i in infos} == {((1980, 1, 1, 0, 0, 0),
                                                                       0o100644)}


def test_content_key_names_the_inputs(two_builds: tuple[Path, Path, Path, Path]) -> None:
    first, _, source, data = two_builds
    spec = read_artifact(first).spec
    profile = load_profile("rpi4")

    def key(**changed: object) -> str:
        options = {k: v for k, v in OPTIONS.items() if k != "quiet"} | changed
        return content_key(BuildConfig.from_options(source=str(source), calib=str(data),
                                                    **options), profile)

    assert len(spec.content_key) == 64 and spec.content_key == key()
    assert key(quiet=False) == key()  # how a build reports does not change its bytes
    assert key(output="elsewhere.edgekit") == key()
    changed = {key(method="percentile"), key(calib_samples=24), key(formats=["onnx"]),
               key(target="rpi5")}
    assert len(changed) == 4 and spec.content_key not in changed
    other = data.with_name("other.npz")
    np.savez(other, x=np.zeros((48, 4), np.float32))
    assert content_key(BuildConfig.from_options(source=str(source), calib=str(other),
                                                **{k: v for k, v in OPTIONS.items()}),
                       profile) != spec.content_key


GUARDED_BUILD = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.conftest import DIGITS_NPZ
from tests.converters.sizing import outlier_digits
from edgekit.converters import build
out = Path(sys.argv[1])
out.parent.mkdir(parents=True, exist_ok=True)
build(str(outlier_digits(out.parent)), target="rpi4", calib=str(DIGITS_NPZ), output=out, quiet=True)
"""


@pytest.mark.slow
def test_a_guarded_build_gives_the_same_bytes_beside_a_cpu_hog(tmp_path: Path) -> None:
    """Issue 31: the accuracy decision (a miss, the guard's ranking and rebuilds up the ladder,
    the shipped .tflite scored on LiteRT) reads no clock and no process state: the outlier
    digits build, run in two processes with different string-hash seeds (set order), the second
    beside two CPU-hog processes, writes the same bytes, and both keep their per-layer record."""
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    script = GUARDED_BUILD.format(root=root)

    def run(name: str, seed: str) -> Path:
        out = tmp_path / name / "digits.edgekit"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", script, str(out)], check=True, env=env, timeout=900)
        return out

    quiet = run("quiet", "1")
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        busy = run("busy", "2")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    manifests = [read_artifact(p).manifest for p in (quiet, busy)]
    for manifest in manifests:
        assert manifest["accuracy_guard"]["attempts"], "the guard did not run: this test needs a miss"
        assert manifest["layers"] and not any("per-layer" in w for w in manifest["warnings"])
    assert manifests[0] == manifests[1]
    assert quiet.read_bytes() == busy.read_bytes()
