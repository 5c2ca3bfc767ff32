"""The accuracy guard keeps the profile's latency budget binding: a rung whose rebuild the
estimator costs over it is not shipped, the next rung is tried (``search/widen.py``).

The digits CNN with one crushed channel: its int16 rung wins the accuracy back (test_guard.py),
but LiteRT runs 16x8 convs on its reference kernel, one thread (``estimate/cost.REFERENCE_16X8``);
under a 1 ms budget (int8: 0.18 ms estimated on a Pi 4) that rung is over it and float, which
fits, ships. Before the estimator costed int16 layers, the guard shipped the int16 rung."""

from __future__ import annotations

from pathlib import Path

from edgekit.converters import build

from ..conftest import DIGITS_NPZ
from .sizing import outlier_digits

ROOT = Path(__file__).resolve().parents[2]


def tight_profile(folder: Path, latency_ms: float) -> Path:
    """rpi4 with another latency budget (everything else as shipped)."""
    text = (ROOT / "targets" / "rpi4.toml").read_text()
    assert 'name = "rpi4"' in text and "latency_ms = 100.0" in text
    path = folder / "rpi4_tight.toml"
    path.write_text(text.replace('name = "rpi4"', 'name = "rpi4-tight"')
                    .replace("latency_ms = 100.0", f"latency_ms = {latency_ms}"))
    return path


def test_the_guard_skips_a_rung_over_the_latency_budget(tmp_path):
    source = outlier_digits(tmp_path)
    result = build(str(source), target=str(tight_profile(tmp_path, 1.0)), calib=str(DIGITS_NPZ),
                   output=tmp_path / "tight.edgekit", formats=["onnx"], quiet=True)
    m = result.manifest
    section = m["accuracy_guard"]
    assert section["met"]
    over = section["over_latency"]
    assert over[0]["rung"] == "int16" and over[0]["latency_ms"] > over[0]["budget_ms"] == 1.0
    assert [a["rung"] for a in section["attempts"]] == ["float"]
    assert section["work"]["rebuilds"] == 2  # the int16 rebuild counts against --guard-steps
    layers = {entry["name"]: entry["precision"] for entry in m["layers"]}
    assert "int16" not in layers.values()
    assert m["validation"]["accuracy_drop"] <= 1.0
    assert m["estimate"]["variants"]["int8"]["latency_ms"]["4"] <= 1.0


def test_a_fix_widens_along_the_stretches_nearest_first():
    """YOLOv8n's first fix was the first stretch (model.0-4): the next ones follow it in graph
    order, then those before a fix in the middle; a fix that touches no stretch (a head branch,
    one tensor) is local and is not widened."""
    from edgekit.converters.search.widen import wider

    stretches = [{"a", "b"}, {"c"}, {"d", "e"}, {"f"}]
    assert wider({"a", "b"}, stretches) == [{"c"}, {"d", "e"}, {"f"}]
    assert wider({"c", "x"}, stretches) == [{"d", "e"}, {"f"}, {"a", "b"}]
    assert wider({"a", "b", "c"}, stretches) == [{"d", "e"}, {"f"}]
    assert wider({"x"}, stretches) == []
    # a fix holding the first stretch and one node of the third (a reader it shares) still
    # widens to the second next; one node of a stretch does not hold it
    assert wider({"a", "b", "d"}, stretches) == [{"c"}, {"d", "e"}, {"f"}]
    assert wider({"d"}, [{"a", "b"}, {"c"}, {"d", "e", "g"}]) == []
