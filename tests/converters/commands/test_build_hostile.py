"""Issue 12, item 8: hostile inputs to ``edgekit build``, each through the real CLI.

Each must end in a typed user error (exit 2) whose message names what was expected and what
came, before any output is written, with the source file untouched. All of them stop in
the load or data stage at the latest, so the module costs about a second.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import edgekit.converters as converters
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgekit.cli import main
from edgekit.errors import UserError

from ...conftest import DIGITS_NPZ, DIGITS_ONNX, SAMPLES


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    digits = np.load(DIGITS_NPZ)
    x, y = digits["x"][:64], digits["y"][:64]
    np.savez(root / "strings.npz", x=x, y=np.array([f"c{v}" for v in y]))
    np.savez(root / "fractions.npz", x=x, y=y + 0.5)
    np.savez(root / "nan.npz", x=np.full_like(x, np.nan))
    one_inf = x.copy()
    one_inf[3, 0, 2, 2] = np.inf
    np.savez(root / "inf.npz", x=one_inf)
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], "scalar",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, root / "scalar.onnx")
    np.savez(root / "scalar.npz", x=x)
    (root / "long").mkdir()
    (root / "long" / ("a" * 240 + ".onnx")).write_bytes(DIGITS_ONNX.read_bytes())
    (root / "folder.edgekit").mkdir()
    (root / "not_a_model.onnx").write_bytes(b"garbage")
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


CASES = {
    "300-char source name": (["{long_name}.onnx", "--calib", "{npz}"],
                             ["a file name of 305 bytes", "expected at most 255"]),
    # no -o: the default name (<source stem>.rpi4.edgekit, in the working folder) is too long
    "default output name too long": (["{work}/long/" + "a" * 240 + ".onnx", "--calib", "{npz}",
                                      "-o", ""],
                                     ["is 253 bytes; expected at most 231", "pass -o"]),
    "-o an existing folder, before the model is read": (
        ["{work}/not_a_model.onnx", "--calib", "{npz}", "-o", "{work}/folder.edgekit"],
        ["an existing folder; expected the artifact's file path",
         "folder.edgekit/not_a_model.rpi4.edgekit"]),
    "string labels": (["{onnx}", "--calib", "{work}/strings.npz"],
                      ["dtype <U2", "expected integer class indices"]),
    "fractional labels": (["{onnx}", "--calib", "{work}/fractions.npz"],
                          ["expected integer class indices"]),
    "all-NaN calibration": (["{onnx}", "--calib", "{work}/nan.npz"],
                            ["holds 4096 non-finite value(s)", "expected finite numbers"]),
    "one inf in calibration": (["{onnx}", "--calib", "{work}/inf.npz"],
                               ["holds 1 non-finite value(s) (NaN or inf) of 4096"]),
    "--calib-samples -5": (["{onnx}", "--calib", "{npz}", "--calib-samples", "-5"],
                           ["--calib-samples", "-5 is not in the range x>=1"]),
    "scalar output": (["{work}/scalar.onnx", "--calib", "{work}/scalar.npz"],
                      ["output(s) ['y'] are scalars (shape [])", "expected outputs with a batch"]),
}
TOML_CASES = {
    'mean = "x"': "preprocess mean holds 'x' (str); expected a finite number",
    "scale = true": "preprocess scale holds True (bool); expected a finite number",
    "mean = nan": "preprocess mean holds nan (float); expected a finite number",
    'size = [8, "a"]': "size must be [height, width] (two positive whole numbers), got [8, 'a']",
    "layout = 5": "preprocess layout = 5; allowed: NCHW, NHWC",
    "bogus = 1": "unknown preprocessing key(s) ['bogus']; allowed: size, resize",
    "std = [0.0]": "preprocess std = [0.0]; expected non-zero values",
    "preprocess = 3": "[preprocess] must be a table of keys, got 3",
}


def check(args: list[str], expected: list[str], work: Path, out: Path,
          capsys: pytest.CaptureFixture[str]) -> None:
    before = sha(DIGITS_ONNX)
    if args[-2:] == ["-o", ""]:
        args = args[:-2]
    elif "-o" not in args:
        args = [*args, "-o", str(out)]
    code = main(["build", "-t", "rpi4", *args, "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    for text in expected:
        assert text in err, err
    assert "internal error" not in err
    assert not out.exists() and sha(DIGITS_ONNX) == before  # nothing written, nothing lost
    assert not list(out.parent.glob("*.edgekit"))


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_build_input(case: str, work: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a default output name would land
    args, expected = CASES[case]
    fill = {"long_name": "b" * 300, "npz": str(DIGITS_NPZ), "onnx": str(DIGITS_ONNX),
            "work": str(work)}
    check([a.format(**fill) for a in args], expected, work, tmp_path / "x.edgekit", capsys)


@pytest.mark.parametrize("line", list(TOML_CASES))
def test_wrong_types_in_a_preprocess_toml(line: str, work: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "pre.toml"
    toml.write_text(line + "\n")
    check([str(DIGITS_ONNX), "--calib", str(SAMPLES), "--preprocess", str(toml)],
          [TOML_CASES[line]], work, tmp_path / "x.edgekit", capsys)


@pytest.mark.parametrize("value", [-5, 0, True, "8", 2.5])
def test_api_counts_are_checked(value: object, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"calib_samples expects a whole number >= 1, got"):
        converters.build(str(DIGITS_ONNX), target="rpi4", calib=str(DIGITS_NPZ),
                         output=tmp_path / "x.edgekit", calib_samples=value, quiet=True)
