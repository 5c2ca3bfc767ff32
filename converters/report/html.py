"""The HTML report of an artifact (``edgekit report``): per-layer SQNR, the precision of each
layer, the budget search's accuracy/latency front, and the tables behind them.

One file with everything inlined (CSS, SVG; no script, no font, no network), so it opens in
any browser, offline, and can be attached to a ticket. Reads only the manifest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from . import svg
from .front import front

PRECISION_COLORS = {"int8": "#3465a4", "int16": "#73d216", "fp16": "#f57900", "float": "#cc0000"}
STYLE = """body{font-family:sans-serif;margin:2em;max-width:60em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ccc;padding:2px 8px}
td.num{text-align:right}p.note{color:#555;font-size:.9em}p.missing{color:#a40000}"""


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return escape("-" if value is None else str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{_cell(v)}</td>' if isinstance(v, (int, float)) else f"<td>{_cell(v)}</td>"
        for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def layer_section(layers: Sequence[Mapping[str, Any]]) -> str:
    if not layers:
        return ('<h2>Layers</h2><p class="missing">This artifact has no per-layer record '
                "(built by an edgekit before per-layer records); rebuild it to get one.</p>")
    measured = [la for la in layers if isinstance(la.get("sqnr_db"), (int, float))]
    bars = [svg.Point(i, float(la["sqnr_db"]), f"{la['name']} ({la['op']}, {la['precision']})",
                      PRECISION_COLORS.get(la["precision"], "#888")) for i, la in enumerate(measured)]
    cells = [svg.Point(i, 0.0, f"{la['name']} ({la['op']}): {la['precision']}",
                       PRECISION_COLORS.get(la["precision"], "#888"), category=la["precision"])
             for i, la in enumerate(layers)]
    parts = ["<h2>Per-layer SQNR</h2>",
             '<p class="note">Each compute layer\'s output in the shipped model against the float '
             "model on held-out samples, in dB (higher is closer); errors accumulate along the "
             "graph, so a drop between two layers is what the later one adds. Bars are coloured "
             "by precision.</p>"]
    parts.append(svg.bars("sqnr", "per-layer output SQNR (dB)", bars, "SQNR dB") if bars else
                 '<p class="missing">No layer\'s SQNR was measured.</p>')
    parts += ["<h2>Precision per layer</h2>",
              svg.strip("precision", "precision chosen per layer", cells,
                        {k: v for k, v in PRECISION_COLORS.items()
                         if any(la["precision"] == k for la in layers)})]
    ordered = sorted(layers, key=lambda la: (la.get("sqnr_db") is None, la.get("sqnr_db") or 0.0))
    parts += ["<h2>Layers, worst SQNR first</h2>", _table(
        ["layer", "op", "precision", "SQNR dB", "why not int8"],
        [[la["name"], la["op"], la["precision"], la.get("sqnr_db"),
          la.get("reason") or ("" if la["precision"] == "int8" else "(not recorded)")]
         for la in ordered])]
    return "".join(parts)


def search_section(search: Mapping[str, Any] | None) -> str:
    head = "<h2>Search: accuracy / latency front</h2>"
    candidates = [c for c in (search or {}).get("candidates") or []
                  if isinstance((c.get("figures") or {}).get("latency_ms"), (int, float))
                  and isinstance((c.get("figures") or {}).get("accuracy_drop"), (int, float))]
    if not candidates:
        reason = ("the search recorded no candidate with both a latency estimate and an accuracy "
                  "figure" if search else "this build ran no search (budgets, --max-* or --search "
                  "start one)")
        return head + f'<p class="missing" id="front-missing">No front: {escape(reason)}.</p>'
    figures = [(float(c["figures"]["latency_ms"]), float(c["figures"]["accuracy_drop"]))
               for c in candidates]
    kept = front(figures)
    points = [svg.Point(x, y, f"{c['id']}{' (chosen)' if c.get('chosen') else ''}"
                        f"{'' if c.get('fits') else ' misses: ' + '; '.join(c.get('missed') or [])}",
                        "#3465a4" if c.get("fits") else "#888", bool(c.get("chosen")))
              for c, (x, y) in zip(candidates, figures, strict=True)]
    metric = next((c.get("accuracy_metric") for c in candidates if c.get("accuracy_metric")), None)
    parts = [head, '<p class="note">Each built candidate: estimated latency on the target against '
             f"its accuracy drop from float ({escape(str(metric or 'build metric points'))}; "
             "lower is better on both). The line joins the front (no candidate is both faster and "
             "more accurate); the outlined point was shipped; grey ones missed a budget.</p>",
             svg.scatter("front", "accuracy / latency front", points, "latency ms (estimate)",
                         "accuracy drop (points)", [points[i] for i in kept])]
    parts.append(_table(
        ["candidate", "prune", "method", "float nodes", "latency ms", "accuracy drop", "fits",
         "chosen", "on front"],
        [[c["id"], c.get("prune_ratio"), c.get("method"), c.get("float_nodes"), x, y,
          "yes" if c.get("fits") else "; ".join(c.get("missed") or []) or "no",
          "yes" if c.get("chosen") else "", "yes" if i in kept else ""]
         for i, (c, (x, y)) in enumerate(zip(candidates, figures, strict=True))]))
    return "".join(parts)


def summary_section(m: Mapping[str, Any]) -> str:
    val = m.get("validation") or {}
    source = m.get("source") or {}
    rows = [["target", (m.get("target") or {}).get("name")],
            ["source", source.get("name")],
            ["built", f"{m.get('created', '')} by edgekit {m.get('edgekit_version', '')}"],
            ["models", ", ".join(f"{e.get('format')} ({e.get('runtime')})" for e in m.get("models") or [])],
            ["calibration", (m.get("quantization") or {}).get("method")]]
    if val:
        cosine = val.get("cosine")
        rows += [["validation samples", val.get("samples")],
                 ["cosine to float", f"{cosine:.5f}" if isinstance(cosine, float) else cosine],
                 ["accuracy drop (points)", val.get("accuracy_drop")]]
    return _table(["artifact", ""], rows)


def render(manifest: Mapping[str, Any], title: str = "") -> str:
    """The whole report page for a manifest (as stored in the artifact)."""
    name = title or (manifest.get("source") or {}).get("name") or "artifact"
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>edgekit report: {escape(str(name))}</title><style>{STYLE}</style></head><body>"
            f"<h1>edgekit report: {escape(str(name))}</h1>"
            + summary_section(manifest) + layer_section(manifest.get("layers") or [])
            + search_section(manifest.get("search")) + "</body></html>\n")


def write_report(manifest: Mapping[str, Any], path: str | Path, title: str = "") -> Path:
    """Write the report atomically (a temp file beside ``path``, then rename)."""
    import os

    from edgekit.tempfiles import temp_beside

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(render(manifest, title))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
