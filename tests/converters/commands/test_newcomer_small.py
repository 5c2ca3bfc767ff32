"""The newcomer's smaller stumbles (issue 35): a misspelt target, the --input-shape hint, a
flat folder of <label>_<i>.png files."""

from __future__ import annotations

import shutil
import subprocess
import sys

from edgekit.converters.inputs.datasets import labels_from_names, load_dataset
from edgekit.converters.pytorch.inputs import shape_hint

from ...conftest import DIGITS_NPZ, DIGITS_ONNX, SAMPLES


def edgekit(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_target_pi4_suggests_rpi4():
    for command in (["build", "-t", "pi4", DIGITS_ONNX, "--calib", DIGITS_NPZ],
                    ["estimate", "-t", "pi4", DIGITS_ONNX], ["doctor", "-t", "pi4"]):
        proc = edgekit(*command)
        assert proc.returncode == 2, (command, proc.stderr)
        assert "unknown target 'pi4' (did you mean 'rpi4'?)" in proc.stderr, proc.stderr
    far = edgekit("build", "-t", "banana", DIGITS_ONNX, "--calib", DIGITS_NPZ)
    assert far.returncode == 2 and "did you mean" not in far.stderr and "rpi4" in far.stderr


def test_input_shape_hint_comes_from_the_calibration_data(tmp_path, digits_data):
    (tmp_path / "net.py").write_text(
        "import torch\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = torch.nn.Linear(64, 10)\n\n"
        "    def forward(self, x):\n        return self.fc(x.flatten(1))\n")
    proc = edgekit("build", "-t", "host", "net.py:Net", "--calib", DIGITS_NPZ,
                   "--random-weights", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--input-shape 1x1x8x8" in proc.stderr and "224" not in proc.stderr, proc.stderr
    x, _ = digits_data
    assert shape_hint(x) == "1x1x8x8" and shape_hint({"a": x[:, 0], "y": x}) == "1x8x8"
    assert shape_hint("synthetic") is None and shape_hint(str(tmp_path / "none.npz")) is None


def test_flat_folder_of_label_named_images_is_labelled(tmp_path):
    for path in SAMPLES.glob("*.png"):  # 0_0009.png ... 9_0019.png: two of each digit
        if not path.name.startswith("2_"):  # a class missing: the others keep their index
            shutil.copy(path, tmp_path / path.name)
    inputs = [{"name": "image", "shape": [1, 1, 8, 8], "dtype": "float32"}]
    data, _ = load_dataset(str(tmp_path), inputs, {}, progress=False)
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert data.labels is not None and len(data) == 18
    assert sorted(data.labels.tolist()) == sorted(int(n[0]) for n in names)  # '3_0021.png' -> 3
    assert data.class_names == [str(i) for i in range(10)]
    # not every file so named, or one label only: left unlabelled
    mixed = [("a/3_1.png", None), ("a/photo.png", None)]
    assert labels_from_names(mixed) is mixed
    single = [("a/cat_1.png", None), ("a/cat_2.png", None)]
    assert labels_from_names(single) is single
    assert labels_from_names([("a/cat_1.png", None), ("a/dog_7.jpg", None)]) == [
        ("a/cat_1.png", "cat"), ("a/dog_7.jpg", "dog")]


def test_build_on_the_samples_folder_reports_labelled_accuracy(tmp_path):
    proc = edgekit("build", "-t", "host", DIGITS_ONNX, "--calib", SAMPLES, "--format", "onnx",
                   "-o", tmp_path / "s.edgekit")
    assert proc.returncode == 0, proc.stderr
    assert "(labelled" in proc.stderr and "accuracy 100.00% float" in proc.stdout


def test_manifest_names_the_builders_version_and_commit(digits_onnx_artifact):
    import re

    from edgekit import __version__
    from edgekit.artifact.archive import read_artifact

    m = read_artifact(digits_onnx_artifact).manifest
    assert m["edgekit_version"] == m["builder"]["version"] == __version__ != "0.1.0"
    if (shutil.which("git") and subprocess.run(["git", "-C", str(DIGITS_ONNX.parent), "rev-parse"],
                                               capture_output=True).returncode == 0):
        assert re.fullmatch(r"[0-9a-f]{40}", m["builder"]["commit"])  # a checkout: its commit
        assert isinstance(m["builder"]["dirty"], bool)
        shown = edgekit("inspect", digits_onnx_artifact).stdout
        assert f"(commit {m['builder']['commit'][:12]}" in shown


def test_license_is_apache_2_and_declared():
    from ...conftest import ROOT

    assert "Apache License" in (ROOT / "LICENSE").read_text().splitlines()[1]
    assert 'license="Apache-2.0"' in (ROOT / "setup.py").read_text()


def test_two_error_figures_say_what_they_compare(digits_onnx_artifact):
    """The build's max|err| is int8 against float (tens of steps is normal); verify's is this
    runtime against the stored int8 outputs (0 steps when reproduced): each names its pair."""
    from edgekit.converters.summary import max_error_text

    from edgekit.artifact.archive import read_artifact

    text = max_error_text(read_artifact(digits_onnx_artifact).manifest)
    assert text.startswith("int8 vs float max|err| ") and "int8 steps of" in text
    shown = edgekit("verify", digits_onnx_artifact).stdout
    assert "max|err| vs stored int8 outputs 0 (0.00 steps)" in shown


def test_ram_figure_is_one_unit_in_build_inspect_and_estimate(digits_artifact):
    import re

    from edgekit.artifact.archive import read_artifact

    ram = read_artifact(digits_artifact).manifest["estimate"]["variants"]["int8"]["ram_bytes"]
    inspected = re.search(r"RAM \(load \+ run\)\s+([\d.]+) MB", edgekit("inspect", digits_artifact).stdout)
    estimated = re.search(r"RAM \(load \+ run\)\s+[\d.]+ MB\s+([\d.]+) MB",
                          edgekit("estimate", "-t", "rpi4", digits_artifact).stdout)
    assert inspected and float(inspected[1]) == round(ram / 2**20, 2)
    # estimate reads the shipped .tflite, the build the int8 ONNX: the same within 0.1 MB
    assert estimated and abs(float(estimated[1]) - ram / 2**20) < 0.1


def test_the_verdict_against_the_reference_ptq_says_beyond_noise() -> None:
    """An interval of -47..+21 points does not show 'not worse': it shows not worse beyond
    noise (EfficientNet-Lite0 on 24 photos, a newcomer's first build)."""
    from edgekit.converters.summary import decision_lines

    val = {"accuracy_budget": {"line": "12.50 points", "judged": "agreement",
                               "versus_reference": {"figure": -12.5, "low": -47.35, "high": 21.42,
                                                    "worse": False}},
           "reference_ptq": {"line": "25.00 points"}}
    line = next(x for x in decision_lines(val) if "reference PTQ" in x)
    assert line.endswith("(-47.35..+21.42): not worse beyond noise"), line


def test_the_task_metric_line_shows_a_share_as_a_percentage() -> None:
    from edgekit.converters.summary import metric_line

    line = metric_line({"name": "top1", "reason": "class scores", "score": 1.0, "unit": "accuracy"})
    assert line.endswith("): int8 100.00% accuracy"), line  # was '1 accuracy'
    regions = metric_line({"name": "regions", "score": 0.94117, "unit": "F1 of regions"})
    assert regions.endswith("): int8 0.9412 F1 of regions"), regions
