"""Interrupted builds leave nothing that the next build does not remove; artifacts get the
umask's mode; ``build --sign`` signs the final manifest."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from edgekit.converters import build
from edgekit.converters.context import BUILD_TEMP

from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.trust.signing import generate_key_pair, load_public_key
from tools.fixtures import artifact_cases as cases


def dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture()
def tmpdir_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private TMPDIR for the build (tempfile.gettempdir() answers it)."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def tiny_source(folder: Path) -> Path:
    path = folder / "tiny.onnx"
    path.write_bytes(cases.tiny_onnx())
    return path


def test_next_build_removes_what_a_killed_build_left(tmp_path: Path, tmpdir_root: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "tiny.edgekit"
    gone = dead_pid()
    # what SIGKILL leaves: the artifact's temp file, the build folder with a library's temp
    stale_file = out_dir / f".tiny.edgekit.{gone}.x1y2.tmp"
    stale_file.write_bytes(b"half an artifact")
    live_file = out_dir / f".tiny.edgekit.{os.getpid()}.abcd.tmp"  # a live writer's: kept
    live_file.write_bytes(b"being written")
    build_root = tmpdir_root / f"{BUILD_TEMP}-{os.getuid()}"
    build_root.mkdir(mode=0o700)
    stale_dir = build_root / f"{gone}-k1ll3d"
    (stale_dir / "pre.quant.abc").mkdir(parents=True)
    (stale_dir / "float.onnx").write_bytes(b"x")
    live_dir = build_root / f"{os.getpid()}-running"
    live_dir.mkdir()

    build(str(tiny_source(tmp_path)), target="rpi4", calib="synthetic", output=out,
          calib_samples=8, val_samples=4, test_vectors=2, quiet=True)

    assert out.is_file() and not stale_file.exists() and live_file.exists()
    assert not stale_dir.exists() and live_dir.exists()
    # everything the build (and onnxruntime's quant_pre_process) made went under the root
    assert sorted(p.name for p in tmpdir_root.iterdir()) == [build_root.name]
    assert sorted(p.name for p in build_root.iterdir()) == [live_dir.name]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_artifacts_get_the_umask_mode(tmp_path: Path, umask: int, mode: int) -> None:
    manifest, members = cases.base_members()
    old = os.umask(umask)
    try:
        write_artifact(tmp_path / "a.edgekit", manifest, dict(members))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.edgekit").stat().st_mode) == mode


def test_build_sign_signs_the_final_manifest(tmp_path: Path, tmpdir_root: Path) -> None:
    key = tmp_path / "build.key"
    public = generate_key_pair(key)
    out = tmp_path / "signed.edgekit"
    old = os.umask(0o022)
    try:
        build(str(tiny_source(tmp_path)), target="rpi4", calib="synthetic", output=out,
              calib_samples=8, val_samples=4, test_vectors=2, quiet=True, sign_key=str(key))
    finally:
        os.umask(old)
    loaded = read_artifact(out, [load_public_key(f"{key}.pub")])
    assert loaded.signature.key_id == public.key_id and loaded.signature.trusted_by
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
