"""``edgekit inspect --layers``: the manifest's per-layer record as a table, worst output SQNR
first, with each layer's precision and why it runs wider than int8; numpy only on the device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgekit.artifact.archive import read_artifact, write_artifact
from edgekit.artifact.manifest import Manifest
from edgekit.cli import cli
from edgekit.errors import ArtifactError

from ..test_device_imports import HOST_ONLY, SHIPPED, imported_modules


def rows(output: str) -> list[list[str]]:
    """The table's rows (after the two header lines), split on runs of two spaces."""
    return [[c.strip() for c in line.strip().split("  ") if c.strip()]
            for line in output.splitlines()[2:]]


def with_layers(source: Path, layers: list[dict], dest: Path) -> Path:
    loaded = read_artifact(source)
    manifest = dict(loaded.manifest, layers=layers)
    write_artifact(dest, manifest, {m: loaded.read(m) for m in loaded.members if m != "manifest.json"})
    return dest


def test_layers_of_a_real_build_worst_first(digits_artifact: Path) -> None:
    result = CliRunner().invoke(cli, ["inspect", "--layers", str(digits_artifact)])
    assert result.exit_code == 0, result.output
    layers = read_artifact(digits_artifact).spec.layers
    table = rows(result.output)
    assert sorted(r[0] for r in table) == sorted(la.name for la in layers) and len(table) == 5
    sqnr = [float(r[3]) for r in table]
    assert sqnr == sorted(sqnr) and sqnr[0] == round(min(la.sqnr_db for la in layers), 1)
    assert all(r[2] == "int8" for r in table) and "5 int8" in result.output.splitlines()[0]


def test_wide_layers_say_why_and_unmeasured_ones_come_last(digits_artifact: Path,
                                                           tmp_path: Path) -> None:
    layers = [{"name": "conv_a", "op": "Conv", "precision": "int8", "sqnr_db": 31.5},
              {"name": "conv_b", "op": "DepthwiseConv", "precision": "int16", "sqnr_db": 22.0,
               "reason": "kept wide by the accuracy guard"},
              {"name": "head", "op": "Gemm", "precision": "fp16"},
              {"name": "mm", "op": "MatMul", "precision": "float", "sqnr_db": 48.0}]
    path = with_layers(digits_artifact, layers, tmp_path / "wide.edgekit")
    result = CliRunner().invoke(cli, ["inspect", "--layers", str(path)])
    assert result.exit_code == 0, result.output
    assert rows(result.output) == [
        ["conv_b", "DepthwiseConv", "int16", "22.0", "kept wide by the accuracy guard"],
        ["conv_a", "Conv", "int8", "31.5"],
        ["mm", "MatMul", "float", "48.0", "(not recorded)"],
        ["head", "Gemm", "fp16", "-", "(not recorded)"]]
    as_json = CliRunner().invoke(cli, ["inspect", "--layers", "--json", str(path)])
    assert json.loads(as_json.output) == [{"sqnr_db": None, **la} for la in layers]
    summary = CliRunner().invoke(cli, ["inspect", str(path)]).output
    assert "worst output SQNR      22.0 dB at conv_b" in summary


@pytest.mark.parametrize("entry, field", [
    ({"name": "c", "op": "Conv", "precision": "int4", "sqnr_db": 1.0}, "layers[0].precision"),
    ({"name": "c", "op": "Conv", "precision": "int8", "sqnr_db": "high"}, "layers[0].sqnr_db"),
    ({"op": "Conv", "precision": "int8"}, "layers[0].name"),
])
def test_a_malformed_layer_entry_is_refused_naming_the_field(digits_artifact: Path, entry: dict,
                                                             field: str) -> None:
    manifest = dict(read_artifact(digits_artifact).manifest, layers=[entry])
    with pytest.raises(ArtifactError, match=field.replace("[", r"\[").replace("]", r"\]")):
        Manifest.from_dict(manifest)


def test_an_artifact_without_a_record_says_so_and_imports_no_host_module(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["inspect", "--layers", str(SHIPPED)])
    assert result.exit_code == 0 and "no per-layer record" in result.output
    code = ("import sys; from edgekit.cli import main; sys.argv = ['edgekit', 'inspect', "
            f"'--layers', {str(SHIPPED)!r}]; main()")
    modules = imported_modules(code.replace("main()", "\ntry:\n    main()\nexcept SystemExit as e:"
                                            "\n    assert e.code in (0, None), e.code"), tmp_path)
    assert "edgekit.ops.inspect" in modules
    assert [m for m in modules if m.split(".")[0] in HOST_ONLY or m.startswith("edgekit.converters")] == []


def test_a_tampered_file_shows_its_claimed_layers_under_the_banner(digits_artifact: Path,
                                                                  tmp_path: Path) -> None:
    import zipfile

    bad = tmp_path / "bad.edgekit"
    with zipfile.ZipFile(digits_artifact) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data if item.filename != "model.onnx" else data[:-1] + b"\0")
    result = CliRunner().invoke(cli, ["inspect", "--layers", str(bad)])
    assert isinstance(result.exception, ArtifactError)  # exit 2 through edgekit's main
    assert result.output.startswith("!!! HASH MISMATCH") and "worst first" in result.output
