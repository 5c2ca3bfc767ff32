"""The loader reads the manifest first and inflates nothing it did not check: duplicates,
unlisted members, bad names, bombs, lying sizes and external data are typed errors."""

from __future__ import annotations

import json
import resource
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgekit
from edgekit.artifact.archive import read_artifact
from edgekit.errors import ArtifactError, EdgekitError
from tools.fixtures import artifact_cases as cases


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture()
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The member names zipfile inflated (opened for reading), in order."""
    names: list[str] = []
    real_open = zipfile.ZipFile.open

    def spy(self: zipfile.ZipFile, name: Any, mode: str = "r", **kw: Any) -> Any:
        if mode == "r":  # crafting the case writes zips; only reads count
            names.append(name.filename if isinstance(name, zipfile.ZipInfo) else name)
        return real_open(self, name, mode, **kw)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return names


def test_a_valid_artifact_loads_and_predicts(tmp_path: Path) -> None:
    manifest, members = cases.base_members()
    with edgekit.load(write(tmp_path / "ok.edgekit", cases.artifact_bytes(manifest, members)),
                      threads=1, trusted_keys=[]) as model:
        assert model.predict(np.ones((1, 4), np.float32)).shape == (1, 3)


@pytest.mark.parametrize("name", ["manifest.json", "model.onnx"])
def test_duplicate_members_are_refused_before_anything_is_inflated(
        tmp_path: Path, opened: list[str], name: str) -> None:
    manifest, members = cases.base_members()
    raw = cases.zip_bytes([("manifest.json", json.dumps(manifest).encode()), *members,
                           (name, b"second copy")])
    with pytest.raises(ArtifactError, match=f"{name!r} appears twice"):
        read_artifact(write(tmp_path / "dup.edgekit", raw))
    assert opened == []


def test_unlisted_member_is_refused_with_only_the_manifest_read(tmp_path: Path,
                                                                opened: list[str]) -> None:
    manifest, members = cases.base_members()
    raw = cases.artifact_bytes(manifest, [*members, ("payload.bin", bytes(1 << 20))])
    with pytest.raises(ArtifactError, match="not covered by the manifest hashes.*payload.bin"):
        read_artifact(write(tmp_path / "extra.edgekit", raw))
    assert opened == ["manifest.json"]


@pytest.mark.parametrize("bad", ["sub/model.onnx", "../model.onnx", "/tmp/model.onnx",
                                 "a\\b.onnx", ".hidden"])
def test_nested_escaping_and_hidden_names_are_refused(tmp_path: Path, opened: list[str],
                                                      bad: str) -> None:
    manifest, members = cases.base_members()
    moved = [(bad if n == "model.onnx" else n, d) for n, d in members]
    edited = cases.rehash(manifest, moved)
    edited["models"][0]["path"] = bad
    with pytest.raises(ArtifactError, match="expected a plain file name"):
        read_artifact(write(tmp_path / "nested.edgekit", cases.artifact_bytes(edited, moved)))
    assert opened == []


def test_member_larger_than_its_manifest_figure_is_refused_unread(tmp_path: Path,
                                                                  opened: list[str]) -> None:
    manifest, members = cases.base_members()
    manifest["models"][0]["bytes"] = len(members[0][1]) - 1
    with pytest.raises(ArtifactError, match=r"'model.onnx' declares \d+ bytes; expected at "
                                            r"most \d+"):
        read_artifact(write(tmp_path / "big.edgekit", cases.artifact_bytes(manifest, members)))
    assert opened == ["manifest.json"]


@pytest.mark.parametrize("size", [0, 7, (1 << 32) - 1])
def test_bogus_declared_sizes_are_typed_errors(tmp_path: Path, size: int) -> None:
    manifest, members = cases.base_members()
    raw = cases.patch_sizes(cases.artifact_bytes(manifest, members), "model.onnx", size)
    with pytest.raises(ArtifactError):
        read_artifact(write(tmp_path / "sizes.edgekit", raw))


@pytest.mark.parametrize("lie", [False, True])
def test_zip_bomb_is_refused_without_inflating_it(tmp_path: Path, lie: bool) -> None:
    """256 MiB of zeros in a ~0.3 MB file: declared (ratio ceiling) or lying about its size
    (zipfile stops at the declared 1,000 bytes, the CRC fails). Peak RSS barely moves."""
    bomb = write(tmp_path / "bomb.edgekit", cases.bomb(0.25, lie=lie))
    assert bomb.stat().st_size < 1_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ArtifactError, match="zip bomb" if not lie else "Bad CRC"):
        edgekit.load(bomb, trusted_keys=[])
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100  # generous: the fuzz tool measures < 50 MB in a fresh process


def test_onnx_external_data_is_refused_and_the_secret_never_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's initializer W says its data is in ./secret.txt: onnxruntime given the
    bytes would read it from the working directory. The loader refuses the model."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.txt").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    manifest, members = cases.base_members()
    swapped = [("model.onnx", cases.tiny_onnx(external="secret.txt")), members[1]]
    path = write(tmp_path / "ext.edgekit",
                 cases.artifact_bytes(cases.rehash(manifest, swapped), swapped))
    with pytest.raises(ArtifactError, match=r"outside the artifact \('W' -> 'secret.txt'\)"):
        edgekit.load(path, trusted_keys=[])


@pytest.mark.parametrize("path, value, message", [
    (("files", "model.onnx"), "zz", r"files\['model.onnx'\] must be a sha256 hex string.*got 'zz'"),
    (("models", 0, "bytes"), -1, r"models\[0\].bytes must be an int >= 0, got -1"),
    (("models", 0, "bytes"), "12", r"models\[0\].bytes must be an int >= 0, got str '12'"),
    (("models", 0, "path"), "other.onnx", r"models\[0\].path must name a member listed in files"),
    (("models", 0, "sha256"), "ab" * 32, r"models\[0\].sha256 must equal files"),
    (("inputs", 0, "dtype"), "complex64", r"inputs\[0\].dtype must be one of .*got 'complex64'"),
    (("inputs", 0, "shape"), [-1, 4], r"inputs\[0\].shape must hold ints >= 0 or names, got -1"),
    (("inputs", 0, "quantization"), {"scale": 0, "zero_point": 0},
     r"inputs\[0\].quantization.scale must be a finite number > 0, got 0"),
    (("inputs",), [], r"inputs is empty \(expected at least one input\)"),
    (("outputs", 0, "labels"), [1, 2, 3], r"outputs\[0\].labels must be a list of strings"),
    (("test_vectors", "path"), "nope.npz", r"test_vectors.path must name a member listed"),
    (("test_vectors", "count"), True, r"test_vectors.count must be an int >= 0, got bool"),
    (("edgekit_version",), 3, r"edgekit_version must be a string, got int 3"),
    (("target", "sha256"), [], r"target.sha256 must be a string, got list"),
])
def test_every_manifest_field_names_field_expected_and_got(
        tmp_path: Path, path: tuple, value: Any, message: str) -> None:
    manifest, members = cases.base_members()
    parent = manifest
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    raw = cases.artifact_bytes(manifest, members)
    with pytest.raises(ArtifactError, match=message):
        read_artifact(write(tmp_path / "field.edgekit", raw))


@pytest.mark.parametrize("text", [b"{\"a\": NaN}", b"[" * 100000, b"1" * 5000, b"\xff{}"])
def test_manifest_json_hazards_are_typed(tmp_path: Path, text: bytes) -> None:
    manifest, members = cases.base_members()
    with pytest.raises(ArtifactError, match="manifest.json"):
        read_artifact(write(tmp_path / "json.edgekit", cases.artifact_bytes(text, members)))


@pytest.fixture(scope="module")
def base() -> tuple[dict, cases.Members]:
    return cases.base_members()


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(index=st.integers(0, 10 ** 6), seed=st.integers(0, 3))
def test_crafted_artifacts_load_or_fail_typed(tmp_path: Path, base: tuple[dict, cases.Members],
                                              index: int, seed: int) -> None:
    """The bounded fuzz (tools/studies/fuzz_artifact.py runs >= 5,000 in a crash-proof worker)."""
    _, data = cases.craft(index, seed, base)
    path = write(tmp_path / f"case-{index}.edgekit", data)
    try:
        edgekit.load(path, threads=1, trusted_keys=[]).close()
    except EdgekitError:
        pass  # typed: fine; anything else fails the test with its traceback
