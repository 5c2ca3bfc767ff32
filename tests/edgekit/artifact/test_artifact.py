"""A corrupt, truncated, tampered or foreign artifact is refused on load with a clear error."""

from __future__ import annotations

import json
import os
import shutil
import zipfile

import numpy as np
import pytest

import edgekit
import edgekit.artifact.archive as artifact_module
from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.errors import ArtifactError

from ..runtime_models import minimal_manifest, set_in

MODEL = b"\x08\x07"  # a protobuf ModelProto holding only ir_version 7 (the loader parses it)


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


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path, monkeypatch):
    out = tmp_path / "a.edgekit"
    manifest = minimal_manifest()

    class Boom:  # not JSON serialisable: the write fails before anything touches the disk
        pass

    with pytest.raises(TypeError):
        write_artifact(out, {**manifest, "x": Boom()}, {"model.onnx": MODEL})
    assert list(tmp_path.iterdir()) == []

    seen = []

    def failing_replace(src, dst):  # the rename fails after the temp file was fully written
        seen.append((os.path.getsize(src), os.path.dirname(src)))
        raise OSError("disk pulled out")

    with monkeypatch.context() as patch:
        patch.setattr(artifact_module.os, "replace", failing_replace)
        with pytest.raises(OSError, match="disk pulled out"):
            write_artifact(out, manifest, {"model.onnx": MODEL})
    assert seen and seen[0][0] > 0 and seen[0][1] == str(tmp_path)  # it did exist, in place
    assert list(tmp_path.iterdir()) == []  # ... and was removed
    size = write_artifact(out, {**manifest, "x": np.float32(1.5)}, {"model.onnx": MODEL})
    assert size == out.stat().st_size and read_artifact(out).read("model.onnx") == MODEL


def test_write_refuses_a_manifest_no_device_could_read(tmp_path):
    manifest = minimal_manifest()
    set_in(manifest, ("target", "profile", "power", "idle_w"), None)
    with pytest.raises(ArtifactError, match="missing field 'idle_w' in \\[power\\]"):
        write_artifact(tmp_path / "a.edgekit", manifest, {"model.onnx": MODEL})
    assert list(tmp_path.iterdir()) == []


def _rewrite_manifest(src, dst, change):
    def edit(name, data):
        if name == "manifest.json":
            manifest = json.loads(data)
            change(manifest)
            return json.dumps(manifest)
        return data

    _rezip(src, dst, edit)


def test_schema_version_true_is_not_version_1(digits_onnx_artifact, tmp_path):
    bad = tmp_path / "bool.edgekit"
    _rewrite_manifest(digits_onnx_artifact, bad, lambda m: m.update(schema_version=True))
    with pytest.raises(ArtifactError, match="schema_version True"):
        read_artifact(bad)


@pytest.mark.parametrize(("where", "value", "message"), [
    (("target", "profile"), None, "missing field 'target.profile'"),
    (("target", "profile", "cpu", "cores"), "four", r"\[cpu\] cores must be int, got str 'four'"),
    (("inputs", 0, "shape"), "1x784", r"inputs\[0\].shape must be a list"),
    (("models",), [], "models is empty"),
    (("models", 0, "path"), None, r"missing field 'models\[0\].path'"),
])
def test_malformed_manifest_names_the_field(digits_onnx_artifact, tmp_path, where, value,
                                            message):
    bad = tmp_path / "bad.edgekit"
    _rewrite_manifest(digits_onnx_artifact, bad, lambda m: set_in(m, where, value))
    with pytest.raises(ArtifactError, match=message):
        read_artifact(bad)


def test_typed_manifest_reads_fields(digits_onnx_artifact):
    spec = read_artifact(digits_onnx_artifact).spec
    assert spec.target.name == "host" and spec.target.profile.cpu.cores >= 1
    assert spec.models[0].format == "onnx" and spec.inputs[0].shape[1:] == (1, 8, 8)
    assert spec.test_vectors is not None and spec.test_vectors.count > 0
