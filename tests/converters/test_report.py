"""Per-layer records and the HTML report on the real digits CNN: each compute layer's
precision read from the shipped QDQ graph and its output SQNR against float (exact int8 math),
and a self-contained report whose plots a real HTML parser finds with their data points."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from edgekit.converters.context import Dataset
from edgekit.converters.metrics.sqnr import CAP_DB
from edgekit.converters.report.front import front
from edgekit.converters.report.html import PRECISION_COLORS, render
from edgekit.converters.report.layers import COMPUTE_OPS, layer_records, taps
from edgekit.converters.report.svg import BOTTOM, HEIGHT, TOP
from edgekit.converters.report.why import USER, wide_reasons
from onnx import TensorProto, helper, numpy_helper

from edgekit.artifact.archive import read_artifact
from edgekit.cli import cli

from ..conftest import DIGITS_NPZ, DIGITS_ONNX


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The digits CNN built through the CLI with a search and --report (one real candidate)."""
    folder = tmp_path_factory.mktemp("report")
    out, page = folder / "digits.edgekit", folder / "report.html"
    result = CliRunner().invoke(cli, ["build", str(DIGITS_ONNX), "--target", "rpi4", "--calib",
                                       str(DIGITS_NPZ), "--format", "onnx", "--search", "--method",
                                       "minmax", "--report", str(page), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out, page


@pytest.fixture(scope="module")
def digits() -> Dataset:
    with np.load(DIGITS_NPZ) as npz:
        return Dataset({"image": npz["x"][:8]})


class Plots(HTMLParser):
    """Every <svg> by id, with the attributes of its elements of class ``point``."""

    def __init__(self) -> None:
        super().__init__()
        self.svgs: dict[str, list[dict[str, str]]] = {}
        self.tags: list[str] = []
        self.urls: list[str] = []
        self._svg: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        self.urls += [v for k, v in a.items() if k in ("src", "href", "xlink:href")]
        if tag == "svg":
            self._svg = a.get("id", "")
            self.svgs[self._svg] = []
        elif self._svg is not None and "point" in a.get("class", "").split():
            self.svgs[self._svg].append({"tag": tag, **a})

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._svg = None


def parse(page: str) -> Plots:
    plots = Plots()
    plots.feed(page)
    plots.close()
    return plots


def test_each_compute_layer_is_recorded_with_precision_and_sqnr(searched) -> None:
    loaded = read_artifact(str(searched[0]))
    shipped = onnx.load_model_from_string(loaded.read("model.onnx"))
    compute = [n.name for n in shipped.graph.node if n.op_type in COMPUTE_OPS]
    layers = loaded.spec.layers
    assert [la.name for la in layers] == compute and len(compute) == 5
    assert [la.op for la in layers] == ["Conv", "Conv", "Conv", "Gemm", "Gemm"]
    assert {la.precision for la in layers} == {"int8"}
    # int8 noise on a well-calibrated CNN: tens of dB, far from identical and from garbage
    assert all(20.0 < la.sqnr_db < 80.0 for la in layers)


def test_sqnr_finds_the_layer_whose_weights_went_wrong(searched, digits, tmp_path) -> None:
    shipped = onnx.load_model_from_string(read_artifact(str(searched[0])).read("model.onnx"))
    before = layer_records(DIGITS_ONNX, _saved(shipped, tmp_path / "ok.onnx"), digits)
    weights = next(i for i in shipped.graph.initializer if i.name == "features.5.weight_quantized")
    codes = numpy_helper.to_array(weights)
    weights.CopyFrom(numpy_helper.from_array(-codes, weights.name))  # conv2d_2's weights negated
    after = layer_records(DIGITS_ONNX, _saved(shipped, tmp_path / "bad.onnx"), digits)
    assert [r["sqnr_db"] for r in after[:2]] == [r["sqnr_db"] for r in before[:2]]
    assert after[2]["name"] == "node_conv2d_2" and after[2]["sqnr_db"] < 10.0 < before[2]["sqnr_db"]
    same = layer_records(DIGITS_ONNX, DIGITS_ONNX, digits)
    assert all(r["sqnr_db"] == CAP_DB and r["precision"] == "float" for r in same)


def test_a_layer_with_float_weights_is_float_and_says_why(searched, digits, tmp_path) -> None:
    shipped = onnx.load_model_from_string(read_artifact(str(searched[0])).read("model.onnx"))
    conv = next(n for n in shipped.graph.node if n.name == "node_conv2d_1")
    dq = next(n for n in shipped.graph.node if n.output[0] == conv.input[1])
    float_w = onnx.load(str(DIGITS_ONNX)).graph.initializer
    shipped.graph.initializer.append(next(i for i in float_w if i.name == "features.2.weight"))
    conv.input[1] = "features.2.weight"  # what nodes_to_exclude leaves: float weights
    shipped.graph.node.remove(dq)
    reasons = wide_reasons(None, ["node_conv2d_1"])
    records = layer_records(DIGITS_ONNX, _saved(shipped, tmp_path / "f.onnx"), digits, reasons)
    wide = [r for r in records if r["precision"] != "int8"]
    assert wide == [{**wide[0], "name": "node_conv2d_1", "precision": "float", "reason": USER}]


def test_precision_is_read_from_the_graph_int16_fp16_and_depthwise() -> None:
    int16 = _conv_graph(TensorProto.INT16, TensorProto.FLOAT, group=1)
    half = _conv_graph(None, TensorProto.FLOAT16, group=4)
    assert [(t.op, t.precision) for t in taps(int16, int16)] == [("Conv", "int16")]
    assert [(t.op, t.precision) for t in taps(half, half)] == [("DepthwiseConv", "fp16")]


def test_wide_reasons_name_the_guard_and_the_user() -> None:
    guard = {"layers": [{"tensor": "t", "nodes": ["a"], "reason": "quantizing t alone leaves 9 dB"}],
             "keep_float": ["a", "b"]}
    reasons = wide_reasons(guard, ["u"], ["b", "c", "u"])
    assert reasons["a"] == "accuracy guard: quantizing t alone leaves 9 dB"
    assert reasons["u"] == USER and "accuracy guard" in reasons["b"] and "accuracy guard" in reasons["c"]


def test_report_has_every_plot_with_its_data_points_and_no_network(searched) -> None:
    out, page = searched
    m = read_artifact(str(out)).manifest
    again = page.with_name("again.html")
    result = CliRunner().invoke(cli, ["report", str(out), "-o", str(again)])
    assert result.exit_code == 0 and again.read_text() == page.read_text(), result.output
    plots = parse(page.read_text(encoding="utf-8"))
    assert set(plots.svgs) == {"sqnr", "precision", "front"}
    assert [float(p["data-y"]) for p in plots.svgs["sqnr"]] == [la["sqnr_db"] for la in m["layers"]]
    assert [p["data-category"] for p in plots.svgs["precision"]] == [
        la["precision"] for la in m["layers"]]
    chosen = [c for c in m["search"]["candidates"] if c["chosen"]]
    points = plots.svgs["front"]
    assert len(points) == len(m["search"]["candidates"]) and len(chosen) == 1
    assert m["search"]["front"] == [chosen[0]["id"]]  # one candidate: the front
    assert [float(p["data-x"]) for p in points if p["r"] == "7"] == [
        chosen[0]["figures"]["latency_ms"]]
    assert not {"script", "link", "img", "iframe"} & set(plots.tags) and plots.urls == []


def test_front_keeps_the_candidates_nothing_beats_on_both_axes() -> None:
    points = [(1.0, 5.0), (2.0, 1.0), (3.0, 2.0), (0.5, 9.0), (2.5, 0.5)]
    assert front(points) == [3, 0, 1, 4]
    manifest = {"layers": [], "search": {"candidates": [
        {"id": f"c{i}", "figures": {"latency_ms": x, "accuracy_drop": y}, "fits": i != 2,
         "chosen": i == 1} for i, (x, y) in enumerate(points)]}}
    plots = parse(render(manifest))
    assert len(plots.svgs["front"]) == 5 and "sqnr" not in plots.svgs  # no layers: said in words
    assert [p["r"] for p in plots.svgs["front"]] == ["4", "7", "4", "4", "4"]  # c1 was chosen
    assert "no per-layer record" in render(manifest)


BROWSER = shutil.which("chromium-headless-shell") or shutil.which("chromium")
# the report's own markup, with everything but its plots hidden: they stack at known offsets
ONLY_PLOTS = "<style>body{margin:0} body>*:not(svg){display:none} svg{display:block}</style>"


def _runs(row: list[tuple[int, int, int]], color: str) -> int:
    """How many separate stretches of ``row`` are drawn in ``color`` (a few steps of slack
    for antialiased edges)."""
    want = tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))
    hits = [sum(abs(a - b) for a, b in zip(px[:3], want, strict=True)) < 24 for px in row]
    return sum(1 for i, hit in enumerate(hits) if hit and (i == 0 or not hits[i - 1]))


# CI (CI=true: .ci/run) installs the browser, so there a missing one fails instead of skipping
@pytest.mark.skipif(BROWSER is None and os.environ.get("CI") != "true",
                    reason="no headless browser here: apt-get install chromium-headless-shell "
                    "to run it (CI=true bash tools/test.sh installs it, as .ci/run does)")
def test_a_headless_browser_draws_each_plot_with_its_points(searched, tmp_path) -> None:
    from PIL import Image

    out, page = searched
    layers = read_artifact(str(out)).manifest["layers"]
    shown = tmp_path / "plots.html"
    shown.write_text(page.read_text(encoding="utf-8").replace("</head>", ONLY_PLOTS + "</head>"))
    shot = tmp_path / "plots.png"
    subprocess.run([BROWSER, "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=800,800",
                    f"--screenshot={shot}", shown.as_uri()],
                   check=True, capture_output=True, timeout=120)
    image = Image.open(shot).convert("RGB")
    pixels = image.load()

    def row(y: int) -> list[tuple[int, int, int]]:
        return [pixels[x, y] for x in range(image.width)]

    int8 = PRECISION_COLORS["int8"]
    # SQNR bars (top plot): just above the axis every bar crosses the row, one run each
    assert _runs(row(HEIGHT - BOTTOM - 3), int8) == len(layers) == 5
    # precision strip (below it, 150 px high): one cell per layer, in the layer's colour
    assert _runs(row(HEIGHT + TOP + 50), int8) == sum(la["precision"] == "int8" for la in layers)
    # the front (below the strip): the shipped candidate's point is drawn
    front = [row(y) for y in range(HEIGHT + 150, HEIGHT + 150 + HEIGHT)]
    assert sum(_runs(r, "#3465a4") > 0 for r in front) >= 10  # a 14 px disc spans >= 10 rows


def _saved(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def _conv_graph(act: int | None, floats: int, group: int) -> onnx.ModelProto:
    """x -> [Q/DQ at ``act`` width] -> Conv(W) -> y, channels 4, as a typed graph."""
    w = helper.make_tensor("w", floats, [4, 4 // group, 1, 1], [0.5] * (16 // group))
    nodes, data = [], "x"
    inits = [w]
    if act is not None:
        inits += [helper.make_tensor("s", TensorProto.FLOAT, [], [0.1]),
                  helper.make_tensor("z", act, [], [0]),
                  helper.make_tensor("wq", TensorProto.INT8, [4, 4, 1, 1], [1] * 16),
                  helper.make_tensor("wz", TensorProto.INT8, [], [0])]
        nodes += [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
                  helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
                  helper.make_node("DequantizeLinear", ["wq", "s", "wz"], ["wd"], name="wdq")]
        data, weight = "xd", "wd"
    else:
        weight = "w"
    nodes.append(helper.make_node("Conv", [data, weight], ["y"], name="conv", group=group))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", floats, [1, 4, 2, 2])],
                              [helper.make_tensor_value_info("y", floats, [1, 4, 2, 2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
