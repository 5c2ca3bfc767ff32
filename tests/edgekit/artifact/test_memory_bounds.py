"""Memory bounded by the target's RAM (issue 36, defect 5): members declared past half the
board's RAM, a .tflite or ONNX model declaring a tensor past it, are refused before anything
is inflated or allocated, naming the member or tensor; a member is held once, not twice."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.errors import ResourceLimitError
from tools.fixtures import artifact_cases as cases

from ..hostile_models import FEATURES, huge_activation_artifact
from ..runtime_models import minimal_manifest

REPO = Path(__file__).resolve().parents[3]


def peak_rss_mb(code: str) -> dict:
    """Run ``code`` (which prints one JSON line) in a fresh interpreter; add its peak RSS."""
    wrapped = textwrap.dedent(code) + textwrap.dedent("""
        # VmHWM: this process's own peak (ru_maxrss keeps pytest's across fork and exec)
        _hwm = next(int(line.split()[1]) for line in open("/proc/self/status")
                    if line.startswith("VmHWM:"))
        print(json.dumps({**result, "peak_mb": _hwm / 1024}))
    """)
    proc = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_members_declared_past_the_ram_are_refused_before_inflating(tmp_path: Path) -> None:
    """Two members declaring ~1 GiB each at a 70x ratio (under the 200x zip-bomb limit)
    loaded in 65 s at 3.1 GiB; the directory alone refuses them now."""
    manifest, members = cases.base_members()
    filler = [("a.bin", bytes(64)), ("b.bin", bytes(64))]
    raw = cases.artifact_bytes(cases.rehash(manifest, members + filler), members + filler)
    for name in ("a.bin", "b.bin"):
        raw = cases.patch_sizes(raw, name, file_size=1000 << 20, compress_size=(1000 << 20) // 70)
    path = tmp_path / "two-gib.edgekit"
    path.write_bytes(raw)
    with pytest.raises(ResourceLimitError, match="half the 1024 MB of RAM"):
        edgekit.load(path, threads=1, trusted_keys=[])


def test_a_tflite_declaring_an_8_gib_activation_is_refused_naming_it(tmp_path: Path) -> None:
    path = huge_activation_artifact(tmp_path / "huge.edgekit")
    report = peak_rss_mb(f"""
        import json, edgekit
        from edgekit.errors import ResourceLimitError
        try:
            edgekit.load({str(path)!r}, backend="litert", threads=1, trusted_keys=[])
            result = {{"error": None}}
        except ResourceLimitError as exc:
            result = {{"error": str(exc)}}
    """)
    assert report["error"] and "'mid'" in report["error"], report
    assert report["peak_mb"] < 200, report


def test_an_onnx_value_info_past_the_ram_is_refused_naming_it(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", FEATURES])
    mid = helper.make_tensor_value_info("mid", TensorProto.FLOAT, [1 << 22, 8, 8, 32])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["mid"]),
                               helper.make_node("Relu", ["mid"], ["y"])], "g", [x], [y],
                              value_info=[mid])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    manifest = minimal_manifest(inputs=[{"name": "x", "shape": ["N", FEATURES]}],
                                outputs=[{"name": "y", "shape": ["N", FEATURES]}])
    from edgekit.artifact.archive import write_artifact

    path = tmp_path / "value-info.edgekit"
    write_artifact(path, manifest, {"model.onnx": data})
    with pytest.raises(ResourceLimitError, match="tensor 'mid' declares 34359738368 bytes"):
        edgekit.load(path, threads=1, trusted_keys=[])


def test_a_member_is_held_once_while_it_is_read(tmp_path: Path) -> None:
    """A 200 MB stored member: the reader's peak is about one copy (was two: the chunks
    and their join)."""
    report = peak_rss_mb("""
        import io, json, os, zipfile
        from edgekit.artifact.zipread import read_member

        def hwm_mb():
            return next(int(line.split()[1]) for line in open("/proc/self/status")
                        if line.startswith("VmHWM:")) / 1024

        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            with archive.open("m", "w") as out:
                for _ in range(200):
                    out.write(os.urandom(1 << 20))
        archive = zipfile.ZipFile(buffer)
        before = hwm_mb()
        data, _ = read_member(archive, archive.getinfo("m"), "test", 1 << 30)
        after = hwm_mb()
        result = {"grew_mb": after - before, "size_mb": len(data) / 2**20}
    """)
    assert report["size_mb"] == 200
    assert report["grew_mb"] < 1.3 * 200, report


def test_a_normal_artifact_still_loads() -> None:
    manifest, members = cases.base_members()
    assert manifest and np.asarray(members[0][1][:1]).size == 1
