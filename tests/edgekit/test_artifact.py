"""A corrupt, truncated, tampered or foreign artifact is refused on load with a clear error."""

from __future__ import annotations

import json
import shutil
import zipfile

import numpy as np
import pytest

import edgekit
from edgekit.artifact import read_artifact, write_artifact
from edgekit.errors import ArtifactError


def _rezip(src, dst, change):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = change(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)


def test_truncated_artifact(digits_onnx_artifact, tmp_path):
    data = digits_onnx_artifact.read_bytes()
    bad = tmp_path / "cut.edgekit"
    bad.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ArtifactError, match="corrupt or truncated"):
        edgekit.load(bad)


def test_flipped_byte_in_the_model_fails_the_hash(digits_onnx_artifact, tmp_path):
    bad = tmp_path / "tampered.edgekit"

    def flip(name, data):
        if name == "model.onnx":
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
            return bytes(data)
        return data

    _rezip(digits_onnx_artifact, bad, flip)
    with pytest.raises(ArtifactError, match="'model.onnx' fails its hash check"):
        edgekit.load(bad)


def test_other_schema_version_is_refused(digits_onnx_artifact, tmp_path):
    bad = tmp_path / "future.edgekit"

    def bump(name, data):
        if name == "manifest.json":
            manifest = json.loads(data)
            manifest["schema_version"] = 99
            return json.dumps(manifest)
        return data

    _rezip(digits_onnx_artifact, bad, bump)
    with pytest.raises(ArtifactError, match="schema_version 99"):
        edgekit.load(bad)


def test_extra_unhashed_member_is_refused(digits_onnx_artifact, tmp_path):
    bad = tmp_path / "extra.edgekit"
    shutil.copy(digits_onnx_artifact, bad)
    with zipfile.ZipFile(bad, "a") as z:
        z.writestr("payload.bin", b"x")
    with pytest.raises(ArtifactError, match="not covered"):
        read_artifact(bad)


def test_not_a_zip_and_missing_file(tmp_path):
    text = tmp_path / "a.edgekit"
    text.write_text("hello")
    with pytest.raises(ArtifactError, match="not a readable"):
        edgekit.load(text)
    with pytest.raises(ArtifactError, match="no such artifact"):
        edgekit.load(tmp_path / "missing.edgekit")


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path):
    out = tmp_path / "a.edgekit"

    class Boom:  # not JSON serialisable: the write fails after the temp file exists
        pass

    with pytest.raises(TypeError):
        write_artifact(out, {"x": Boom()}, {"m": b"1"})
    assert list(tmp_path.iterdir()) == []
    size = write_artifact(out, {"x": np.float32(1.5)}, {"m": b"1"})
    assert size == out.stat().st_size and read_artifact(out).read("m") == b"1"
