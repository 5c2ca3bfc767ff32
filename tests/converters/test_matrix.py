"""``edgekit matrix``: cells built on the executor, a second run all cache hits, failed cells
named (the others still built), the schema's errors naming what it expects (issue 20)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.matrix import Cell, load_spec, run_cell

from edgekit.artifact.archive import read_artifact
from edgekit.cli import main
from tools.fixtures.artifact_cases import tiny_onnx

SPEC = """
output = "out"
targets = ["rpi4", "rpi5"]
[options]
calib-samples = 32
[[models]]
source = "tiny.onnx"
calib = "data.npz"
[[models]]
name = "broken"
source = "broken.onnx"
calib = "data.npz"
"""


@pytest.fixture(scope="module")
def matrix_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("matrix")
    (root / "tiny.onnx").write_bytes(tiny_onnx())
    (root / "broken.onnx").write_bytes(b"not an onnx model")
    np.savez(root / "data.npz", x=np.random.default_rng(3).normal(size=(48, 4)).astype(np.float32))
    (root / "builds.toml").write_text(SPEC)
    return root / "builds.toml"


@pytest.fixture(scope="module")
def first_run(matrix_file: Path) -> tuple[int, dict[str, tuple[int, int]]]:
    """The first run's exit code, and each artifact's (inode, mtime_ns) after it."""
    code = main(["matrix", str(matrix_file), "-q", "--executor", "local"])
    out = matrix_file.parent / "out"
    return code, {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()}


def test_cells_build_and_failures_are_named(first_run: tuple[int, dict], matrix_file: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, artifacts = first_run
    assert code == 1  # the broken model's two cells failed
    assert sorted(artifacts) == ["tiny.rpi4.edgekit", "tiny.rpi5.edgekit"]  # nothing half-written
    for target in ("rpi4", "rpi5"):
        spec = read_artifact(matrix_file.parent / "out" / f"tiny.{target}.edgekit").spec
        assert spec.target.name == target and len(spec.content_key) == 64


def test_second_run_is_all_cache_hits(first_run: tuple[int, dict], matrix_file: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    _, before = first_run
    code = main(["matrix", str(matrix_file), "-q"])
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines()[1:-1]}
    assert rows == {"tiny.rpi4": "cached", "tiny.rpi5": "cached", "broken.rpi4": "failed",
                    "broken.rpi5": "failed"}
    assert "4 cell(s): 0 built, 2 cached, 2 failed" in out
    assert code == 1 and "2 of 4 matrix cell(s) failed" in err
    assert "broken.rpi4:" in err and "broken.rpi5:" in err and "not a readable ONNX" in err
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
             for p in (matrix_file.parent / "out").iterdir()}
    assert after == before  # nothing rewritten


def test_a_changed_option_misses_the_cache(first_run: tuple[int, dict], matrix_file: Path,
                                           tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = matrix_file.parent
    out = tmp_path / "out"
    shutil.copytree(root / "out", out, copy_function=shutil.copy2)
    kept = out.joinpath("tiny.rpi5.edgekit").stat().st_mtime_ns
    changed = tmp_path / "changed.toml"
    changed.write_text(f'output = "out"\ntargets = ["rpi4", "rpi5"]\n[[models]]\n'
                       f'source = "{root / "tiny.onnx"}"\ncalib = "{root / "data.npz"}"\n'
                       f'calib-samples = 32\n[[variants]]\nname = "x"\n'
                       f'[[variants]]\nname = "percentile"\nmethod = "percentile"\n')
    for name in ("tiny.rpi4", "tiny.rpi5"):  # the cells' new names; the same key for variant x
        out.joinpath(f"{name}.edgekit").rename(out / f"{name}.x.edgekit")
    assert main(["matrix", str(changed), "-q"]) == 0
    table = capsys.readouterr().out
    assert "4 cell(s): 2 built, 2 cached, 0 failed" in table
    rows = {line.split()[0]: line.split()[2] for line in table.splitlines()[1:-1]}
    assert rows == {"tiny.rpi4.x": "cached", "tiny.rpi5.x": "cached",
                    "tiny.rpi4.percentile": "built", "tiny.rpi5.percentile": "built"}
    assert out.joinpath("tiny.rpi5.x.edgekit").stat().st_mtime_ns == kept


def test_cells_are_picklable_for_remote_executors(matrix_file: Path) -> None:
    cell = Cell(name="x", source=str(matrix_file.parent / "broken.onnx"),
                options={"target": "rpi4", "output": str(matrix_file.parent / "x.edgekit"),
                         "calib": "synthetic", "quiet": True}, key="0" * 64)
    again = pickle.loads(pickle.dumps(cell))
    assert again == cell and pickle.loads(pickle.dumps(run_cell)) is run_cell
    result = run_cell(again)  # a failure comes back as a result, never raised
    assert result.status == "failed" and "not a readable ONNX" in result.error


@pytest.mark.parametrize("text, expected", [
    ('targets = ["rpi4"]\nmodel = 1\n[[models]]\nsource = "a.onnx"',
     "unknown key(s) ['model']; expected: output"),
    ('targets = "rpi4"\n[[models]]\nsource = "a.onnx"', "targets must be a list of target names"),
    ('targets = ["rpi4"]', "missing 'models'"),
    ('targets = ["rpi4"]\n[[models]]\nname = "a"', "models[0] has no source"),
    ('targets = ["rpi4"]\n[[models]]\nsource = "a.onnx"\ntarget = "rpi5"', "the matrix sets"),
    ('targets = ["rpi4"]\n[[models]]\nsource = "a.onnx"\n[[variants]]\nmethod = "entropy"',
     "variants[0] has no name"),
])
def test_schema_errors_name_what_is_expected(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(Exception) as info:
        load_spec(path)
    assert expected in str(info.value) and type(info.value).__name__ == "MatrixSpecError"


def test_unknown_build_option_or_target_exits_2(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('targets = ["rpi4"]\n[[models]]\nsource = "a.onnx"\ncalib-sample = 3\n')
    assert main(["matrix", str(path)]) == 2
    err = capsys.readouterr().err
    assert "models[0] (a): unknown key(s) ['calib-sample']" in err and "calib-samples" in err
    path.write_text('targets = ["rpi9"]\n[[models]]\nsource = "a.onnx"\n')
    assert main(["matrix", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: targets: unknown target 'rpi9'" in err and "rpi4" in err
    assert not (tmp_path / "matrix-out").exists()  # nothing made before the file is checked
