"""A manifest as a readable table (``edgekit inspect``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from edgekit.artifact.manifest import PRECISIONS, LayerEntry
from edgekit.errors import ArtifactError

STAGE_WIDTH = 90  # a stage's parameters on one line of the table; the rest: --json


def _clipped(text: str, width: int = STAGE_WIDTH) -> str:
    """A stage's parameters cut to one line with '...' where cut, so a cut value
    ('weight_type ' for 'weight_type int8') is never read as the whole."""
    return text if len(text) <= width else text[:width - 3].rstrip(", ") + "..."


def _kv(rows: list[tuple[str, Any]], width: int = 22) -> list[str]:
    return [f"  {k:<{width}} {v}" for k, v in rows]


def _size(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def artifact_labels(m: dict[str, Any]) -> list[str] | None:
    """Class names: the first output's ``labels``, or the build's (one subfolder per class)."""
    outputs = m.get("outputs") or [{}]
    labels = outputs[0].get("labels") or m.get("labels")
    return [str(label) for label in labels] if isinstance(labels, list) and labels else None


def unverified_manifest(path: str) -> dict[str, Any] | None:
    """The manifest of an artifact that failed its checks, read without them (forensics:
    ``edgekit inspect`` shows what a tampered file claims); None if there is none to read."""
    import json
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            manifest = json.loads(archive.read("manifest.json"))
    except Exception:  # anything unreadable: there is nothing to show
        return None
    return manifest if isinstance(manifest, dict) else None


def _calibrated(record: Any, where: str) -> str:
    """The drift watch's record (edgekit/numerics/drift.py): the calibrated range and the share of
    the build's validation values outside it (outputs: at its limits), per channel."""
    if not isinstance(record, dict) or not isinstance(record.get("range"), list):
        return ""
    low, high = record["range"][:2]
    text = f"; calibrated [{low:.4g}, {high:.4g}]"
    baseline = record.get("baseline") or []
    if baseline:
        each = " per channel" if len(baseline) > 1 else ""
        text += f", {'/'.join(f'{100 * b:.2f}' for b in baseline[:8])}% {where}{each} at build"
    return text


def manifest_table(m: dict[str, Any]) -> str:
    """The table; the runtime's fields are checked by the typed manifest, the host reports
    shown here (validation, estimate, sizes) are not, so a malformed one is a typed error."""
    try:
        return _table(m)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ArtifactError(f"manifest.json: a field `edgekit inspect` shows is malformed "
                            f"(expected the schema of edgekit/artifact/archive.py, got "
                            f"{type(exc).__name__}: {str(exc)[:120]}); see "
                            "`edgekit inspect --json`") from exc


def _table(m: dict[str, Any]) -> str:
    target = m["target"]
    profile = target.get("profile", {})
    cpu = profile.get("cpu", {})
    q = m.get("quantization", {})
    val = m.get("validation", {})
    lines = ["artifact"]
    lines += _kv([
        ("schema / edgekit", f"{m['schema_version']} / {m.get('edgekit_version')}"
                             + _commit(m.get("builder"))),
        # new artifacts carry no build time (deterministic builds); older ones a "created"
        ("content key", m.get("content_key") or f"- (created {m.get('created', '?')})"),
        ("target", f"{target['name']} ({cpu.get('cores')}x {cpu.get('core')}, profile "
                   f"sha256 {target.get('sha256', '')[:12]})"),
        ("source", f"{m.get('source', {}).get('name')} ({m['source'].get('format')}, "
                   f"{_size(m['source'].get('bytes', 0))}, sha256 {m['source'].get('sha256', '')[:12]})"),
    ])
    lines.append("models")
    for e in m["models"]:
        layouts = sorted({i.get("layout") for i in e.get("inputs", []) if i.get("layout")})
        extra = f", runs {'/'.join(layouts)} inside" if layouts else ""
        if e.get("float_ops"):
            extra += f", {len(e['float_ops'])} float op(s)"
        lines += _kv([(e["format"], f"{e['path']} {_size(e.get('bytes') or 0)} on "
                                    f"{e.get('runtime', '')}{extra}")])
    lines.append("inputs")
    for i in m["inputs"]:
        qn = i.get("quantization") or {}
        pre = i.get("preprocess")
        desc = f"{i['dtype']}{list(i['shape'])} {i.get('layout', '')}".strip()
        if pre:
            desc += f"; image {pre['size'][0]}x{pre['size'][1]} {pre['color']} resize={pre['resize']}"
        if qn:
            desc += f"; scale {qn.get('scale'):.6g} zp {qn.get('zero_point')}"
        desc += _calibrated(i.get("calibration"), "outside")
        lines += _kv([(i["name"], desc)])
    lines.append("outputs")
    for o in m["outputs"]:
        qn = o.get("quantization") or {}
        desc = f"{o['dtype']}{list(o['shape'])}"
        if qn:
            desc += f"; int8 step {qn.get('scale'):.6g}"
        desc += _calibrated(o.get("calibration"), "at its limits")
        lines += _kv([(o["name"], desc)])
    labels = artifact_labels(m)
    if labels:
        shown = ", ".join(f"{i}={name}" for i, name in enumerate(labels[:20]))
        lines += _kv([("labels", f"{len(labels)} classes: {shown}"
                       + (f" and {len(labels) - 20} more" if len(labels) > 20 else ""))])
    lines.append("quantization")
    floats = q.get("float_nodes") or []
    lines += _kv([
        ("method", q.get("method")),
        ("types", f"activations {q.get('activation_type')}, weights {q.get('weight_type')} "
                  f"{'per-channel' if q.get('per_channel') else 'per-tensor'}"),
        ("float nodes", ", ".join(f"{f['name']} ({f['op']})" for f in floats[:8])
         + (f" and {len(floats) - 8} more" if len(floats) > 8 else "") if floats else "none"),
    ])
    if val:
        lines.append("validation")
        rows = [("samples", f"{val.get('samples')} ({'verified' if val.get('verified') else 'UNVERIFIED: synthetic'})"),
                ("cosine", f"{val.get('cosine', 0):.5f} (min {val.get('cosine_min', 0):.5f})"),
                ("max abs error", f"{val.get('max_abs_error', 0):.4g}")]
        if "top1_agreement" in val:
            rows.append(("top-1 agreement", f"{val['top1_agreement']:.2%}"))
        if "accuracy_int8" in val:
            rows.append(("accuracy", f"{val['accuracy_float']:.2%} float -> {val['accuracy_int8']:.2%} int8"))
        check = val.get("accuracy_budget") or {}
        if isinstance(check, dict) and check.get("line"):
            rows.append(("judged", str(check["line"])))
        reference = val.get("reference_ptq") or {}
        if isinstance(reference, dict) and reference.get("line"):
            rows.append(("reference PTQ", str(reference["line"])))
        lines += _kv(rows)
    if m.get("sizes"):
        lines.append("sizes")
        lines += _kv([(k, _size(v)) for k, v in m["sizes"].items() if isinstance(v, (int, float))])
    est = m.get("estimate", {}).get("variants", {}).get("int8")
    if est:
        lines.append(f"estimate on {m['estimate'].get('target')} ({m['estimate'].get('cost_model')} cost model)")
        lines += _kv([(f"{t} thread(s)", f"{est['latency_ms'][t]:.3g} ms, {est['energy_mj'][t]:.3g} mJ, "
                       f"{est['power_w'][t]:.3g} W") for t in est["latency_ms"]])
        # the estimator's unit (2**20 bytes, as the profiles' ram_mb), as build and estimate print it
        lines += _kv([("RAM (load + run)", f"{est['ram_bytes'] / 2**20:.2f} MB"),
                      ("MACs", f"{est['macs'] / 1e6:.3g} M")])
    layers = [la for la in m.get("layers") or [] if isinstance(la, dict)]
    if layers:
        counts = Counter(str(la.get("precision")) for la in layers)
        measured = [la for la in layers if isinstance(la.get("sqnr_db"), (int, float))]
        worst = min(measured, key=lambda la: la["sqnr_db"], default=None)
        lines.append("layers")
        lines += _kv([("precision", ", ".join(f"{n} {p}" for p, n in counts.items())),
                      ("worst output SQNR", f"{worst['sqnr_db']:.1f} dB at {worst['name']} "
                       "(`edgekit inspect --layers`)" if worst else "not measured")])
    lines.append("stages")
    lines += _kv([(s["name"], f"{s['seconds']:.2f} s" if "seconds" in s else
                   _clipped(", ".join(f"{k} {v}" for k, v in (s.get("params") or {}).items()
                                      if isinstance(v, str | int | float))))
                  for s in m.get("stages", [])])
    for key in ("budgets", "pruning", "search", "accuracy_guard", "export"):
        if key in m:
            lines.append(f"{key}: see `edgekit inspect --json`")
    return "\n".join(lines)


def layers_table(layers: tuple[LayerEntry, ...]) -> str:
    """``edgekit inspect --layers``: compute layers, worst output SQNR against float first."""
    if not layers:
        return ("layers: this artifact has no per-layer record (built by an edgekit before "
                "per-layer records; rebuild it to get one)")
    ordered = sorted(layers, key=lambda la: (la.sqnr_db is None, la.sqnr_db or 0.0))
    counts = Counter(la.precision for la in layers)
    width = max(12, *(len(la.name) for la in layers))
    op_width = max(6, *(len(la.op) for la in layers))
    lines = [f"layers: {len(layers)} compute layers ("
             + ", ".join(f"{counts[p]} {p}" for p in PRECISIONS if counts[p])
             + "); SQNR of each layer's output against the float model on held-out samples, "
             "errors accumulated up to that layer; worst first",
             f"  {'layer':<{width}}  {'op':<{op_width}}  {'precision':<9}  {'SQNR dB':>8}  why not int8"]
    for la in ordered:
        sqnr = "-" if la.sqnr_db is None else f"{la.sqnr_db:.1f}"
        why = la.reason or ("" if la.precision == "int8" else "(not recorded)")
        lines.append(f"  {la.name:<{width}}  {la.op:<{op_width}}  {la.precision:<9}  {sqnr:>8}  {why}".rstrip())
    return "\n".join(lines)


def _commit(builder: object) -> str:
    """" (commit 1a2b3c4d5e6f[, uncommitted changes])" from the manifest's builder record."""
    if not isinstance(builder, dict) or not isinstance(builder.get("commit"), str):
        return ""
    dirty = ", uncommitted changes" if builder.get("dirty") else ""
    return f" (commit {builder['commit'][:12]}{dirty})"
