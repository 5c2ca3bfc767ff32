"""The short human summary printed after a build."""

from __future__ import annotations

from typing import Any


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def max_error_text(manifest: dict[str, Any]) -> str:
    """The largest int8-vs-float output difference with its unit: the output's own units, and
    as int8 quantization steps when there is one quantized output (a step is its scale).
    Named "int8 vs float": ``edgekit verify``'s steps measure another difference, this
    runtime against the int8 outputs stored at build time (0 when it reproduces them)."""
    err = float((manifest.get("validation") or {}).get("max_abs_error", 0.0))
    text = f"int8 vs float max|err| {err:.4g} (output units"
    outputs = manifest.get("outputs") or []
    scale = (outputs[0].get("quantization") or {}).get("scale") if len(outputs) == 1 else None
    if scale:
        text += f" = {err / scale:.1f} int8 steps of {scale:.3g}"
    return text + ")"


def ptq_line(q: dict[str, Any]) -> str:
    """Calibration size and what each post-training technique did (issue 15)."""
    parts = []
    if q.get("calibration_samples"):
        parts.append(f"calibrated on {q['calibration_samples']} samples")
    eq = q.get("equalization") or {}
    if eq.get("pairs") or eq.get("skipped_clip"):
        parts.append(f"equalized {eq.get('pairs', 0)} conv pair(s)"
                     + (f" ({eq['skipped_clip']} Relu6 pairs left)" if eq.get("skipped_clip") else ""))
    ada = (q.get("adaround") or {}).get(q.get("method", ""), {})
    if ada.get("layers"):
        parts.append(f"AdaRound on {ada['layers']}/{ada['of']} layers {'kept' if ada.get('kept') else 'dropped'} "
                     f"(output MSE {ada['output_mse_before']:.3g} -> {ada['output_mse_after']:.3g})")
    bc = (q.get("bias_correction") or {}).get(q.get("method", ""), {})
    if bc.get("layers"):
        parts.append(f"bias correction {'kept' if bc.get('kept') else 'dropped'} (output MSE "
                     f"{bc['output_mse_before']:.3g} -> {bc['output_mse_after']:.3g})")
    if q.get("pertensor_choices") and q.get("method") == "pertensor":
        parts.append("ranges per tensor: " + ", ".join(f"{m} {n}" for m, n in q["pertensor_choices"].items()))
    return "  post-training: " + "; ".join(parts) if parts else ""


def decision_lines(val: dict[str, Any]) -> list[str]:
    """What was judged (accuracy with labels, agreement without), the figure with N and its
    interval and verdict, and the reference PTQ beside it (issue 31)."""
    check = val.get("accuracy_budget") or {}
    lines = []
    if check.get("line"):
        what = ("accuracy against the labels" if check.get("judged") == "accuracy"
                else "agreement with float (no labels)")
        lines.append(f"  judged: {what}, {check['line']}")
    reference = val.get("reference_ptq") or {}
    if reference.get("line"):
        versus = check.get("versus_reference") or {}
        if versus:
            compared = (f"; the artifact {versus['figure']:+.2f} points against it ({versus['low']:+.2f}.."
                        f"{versus['high']:+.2f}): {'WORSE beyond noise' if versus.get('worse') else 'not worse beyond noise'}")
        else:
            compared = ""
        lines.append(f"  reference PTQ ({reference.get('tool', 'onnxruntime quantize_static')}): "
                     f"{reference['line']}{compared}")
    metric = val.get("metric") or {}
    regions = metric.get("details") or {}
    if metric.get("name") == "regions" and "float_regions" in regions:
        # the drop pools regions over pages: a few inventions on a blank page barely move it,
        # so the counts are said (converters/metrics/regions.py)
        blank = regions.get("blank_pages", 0)
        lines.append(f"  regions: {regions['float_regions'] - regions['lost_regions']:.0f} of "
                     f"{regions['float_regions']:.0f} float regions kept, "
                     f"{regions['invented_regions']:.0f} invented"
                     + (f"; {regions.get('blank_pages_with_invented', 0):.0f} of {blank:.0f} blank "
                        "pages show text that is not there" if blank else ""))
    if metric.get("name") == "signal":
        lines.append("  no task read from the outputs: judged by the conservative per-slice signal; pass --metric "
                     + (metric.get("suggest") or "NAME") + " to judge the task")
    return lines


SHARE_UNITS = ("accuracy", "agreement", "share")


def metric_line(metric: dict[str, Any]) -> str:
    """The int8 model's task score: a share as a percentage ('100.00% accuracy', not
    '1 accuracy'), other units as measured ('0.9412 F1 of regions ...')."""
    score = float(metric["score"])
    shown = f"{score:.2%}" if metric.get("unit") in SHARE_UNITS else f"{score:.4g}"
    return f"  task metric {metric['name']} ({metric.get('reason', '')}): int8 {shown} {metric['unit']}"


def summary_lines(result: Any) -> list[str]:
    m = result.manifest
    sizes = m.get("sizes", {})
    source = sizes.get("source_bytes", 0)
    val = m.get("validation", {})
    lines = [
        f"built {result.path} for {m['target']['name']} in {result.seconds:.1f} s",
        f"  size: source {_mb(source)} -> artifact {_mb(result.artifact_bytes)} on disk "
        "(a zip: compressed)"
        + (f", {source / result.artifact_bytes:.1f}x smaller" if result.artifact_bytes else ""),
        "  models (uncompressed, as loaded on the device): "
        + ", ".join(f"{e['format']} {_mb(e['bytes'])}" for e in m["models"]),
        f"  calibration: {m['quantization'].get('method')} "
        f"(activations {m['quantization'].get('activation_type')}, weights int8 per-channel)",
    ]
    if val:
        parts = [f"cosine {val.get('cosine', 0):.5f}", max_error_text(m)]
        if "top1_agreement" in val:
            parts.append(f"top-1 agreement {val['top1_agreement']:.2%}")
        if "accuracy_int8" in val:
            parts.append(f"accuracy {val['accuracy_float']:.2%} float -> {val['accuracy_int8']:.2%} int8")
        shared = val.get("in_calibration_set") or 0
        where = (f"samples ({shared} also calibrated: pass --val to hold all out)" if shared
                 else "held-out samples")
        lines.append(f"  validation on {val.get('samples')} {where}: " + ", ".join(parts))
        metric = val.get("metric")
        if isinstance(metric, dict) and "score" in metric:
            lines.append(metric_line(metric))
        lines += decision_lines(val)
        worst = val.get("worst_slice")
        if worst:
            lines.append(f"  worst slice: {worst['output']} channels {worst['channels'][0]}..{worst['channels'][1]} "
                         f"SQNR {worst['sqnr_db']:.1f} dB, {worst['decisions_changed']:.1%} decisions changed")
        if "host_speed" in val:
            from edgekit.converters.estimate.host_speed import summary_line

            lines.append(summary_line(val["host_speed"]))
        if not val.get("verified", True):
            lines.append("  accuracy UNVERIFIED: calibrated and validated on synthetic data")
    layers = m.get("layers") or []
    measured = [la for la in layers if la.get("sqnr_db") is not None]
    if measured:
        worst = min(measured, key=lambda la: la["sqnr_db"])
        counts: dict[str, int] = {}
        for la in layers:
            counts[la["precision"]] = counts.get(la["precision"], 0) + 1
        lines.append(f"  layers: {', '.join(f'{n} {p}' for p, n in counts.items())}; worst output "
                     f"SQNR {worst['sqnr_db']:.1f} dB at {worst['name']} (edgekit inspect --layers)")
    ptq = ptq_line(m["quantization"])
    if ptq:
        lines.append(ptq)
    for packed in m["quantization"].get("packed_outputs") or []:
        lines.append(f"  {packed['line']}")
    guard = m.get("accuracy_guard") or {}
    if "attempts" in guard:
        chosen = guard.get("chosen") or {}
        if chosen and "accepted_drop" not in guard:
            rung = chosen.get("rung", "float")
            outcome = ("budget met" if chosen.get("verdict") == "met" else
                       "within the budget (the evidence cannot tell yet)" if guard.get("met") else
                       "no longer a miss (the evidence cannot tell)")
            lines.append(f"  accuracy guard: {outcome} with {chosen.get('nodes')} node(s) "
                         f"{'float' if rung == 'float' else 'at ' + rung} "
                         f"(ladder {' -> '.join(guard.get('ladder', []))})")
        elif "accepted_drop" in guard:
            lines.append(f"  ACCURACY BUDGET MISSED and accepted (--accept-accuracy-drop): drop "
                         f"{guard['accepted_drop']:.2f} > {guard['budget_points']:g} points")
    speed = m.get("precision_speed") or {}
    if speed.get("int8_speedup", 1.0) < 1.0:
        from .search.speed_choice import line

        lines.append(line(speed))
    if speed.get("layers"):
        from .search.layer_speed import line as layers_line

        lines.append(layers_line(speed["layers"]))
    pruning = m.get("pruning")
    if pruning:
        lines.append(f"  pruning: {pruning['method']}, ratio {pruning['ratio']:g}"
                     + (f", params {pruning['params_before']:,} -> {pruning['params_after']:,}"
                        if "params_after" in pruning else ""))
    checks = (m.get("budgets") or {}).get("checks") or {}
    if checks:
        written = {"storage_mb": result.artifact_bytes / 1e6} if result.artifact_bytes else {}
        lines.append("  budgets met: " + ", ".join(
            f"{k} {written.get(k, c['value']):.4g}/{c['limit']:g}" for k, c in checks.items()))
    wide = {entry["name"]: entry["precision"] for entry in m.get("layers") or []}
    floats = [f for f in m["quantization"].get("float_nodes") or [] if wide.get(f["name"]) != "fp16"]
    if floats:
        ops = sorted({f["op"] for f in floats})
        lines.append(f"  {len(floats)} node(s) stay float: {', '.join(ops)}")
    counts = {p: sum(1 for v in wide.values() if v == p) for p in ("int16", "fp16")}
    if any(counts.values()):
        lines.append("  mixed precision: " + ", ".join(f"{n} layer(s) {p}" for p, n in counts.items() if n)
                     + " (manifest layers)")
    for w in result.warnings:
        lines.append(f"  warning: {w}")
    return lines
