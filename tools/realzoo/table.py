"""The suite's table (docs/realzoo.md) and its printed summary, from the rows of one run."""

from __future__ import annotations

import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

Row = dict[str, object]


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def commit(repo: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True).stdout.strip()
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--", "converters",
                                                    "edgekit") else ""
    return f"{git('rev-parse', '--short', 'HEAD')} on {git('rev-parse', '--abbrev-ref', 'HEAD')}{dirty}"


def ships_int8_tflite(row: Row) -> bool:
    facts = row.get("artifact") or {}
    return "tflite" in facts.get("formats", []) and not facts.get("tflite_float_ops")


def summary(rows: list[Row]) -> dict[str, object]:
    count = len(rows)
    shipped = [r for r in rows if r.get("kind") == "ok"]
    emulated = [r for r in shipped if (r.get("emulate") or {}).get("pass")]
    clean = [r for r in rows if ships_int8_tflite(r)]
    # issue 30 names recurrent cells as the exceptions of its no-float bar: the bar's share
    # is over the other models (a recurrent model that ships clean still counts)
    recurrent = [r for r in rows if r.get("recurrent") and not ships_int8_tflite(r)]
    judged = count - len(recurrent)
    return {"models": count,
            "internal_errors": sum(r.get("kind") == "internal error" for r in rows),
            "estimator_refusals": sum(r.get("kind") == "estimator refusal" for r in rows),
            "budget_refusals": sum(r.get("kind") == "budget refusal" for r in rows),
            "user_errors": sum(r.get("kind") == "user error" for r in rows),
            "timeouts": sum(r.get("kind") == "timeout" for r in rows),
            "crashes": sum(str(r.get("kind", "")).startswith("crash") for r in rows),
            "shipped": len(shipped),
            "int8_tflite_no_float_op": len(clean),
            "int8_tflite_no_float_op_pct": round(100 * len(clean) / max(1, count), 1),
            "recurrent_exceptions": {str(r["model"]): "/".join(r["recurrent"]) for r in recurrent},
            "int8_tflite_no_float_op_of_judged": f"{len(clean)}/{judged}",
            "int8_tflite_no_float_op_judged_pct": round(100 * len(clean) / max(1, judged), 1),
            "emulate_pass": len(emulated)}


def summary_text(s: dict[str, object]) -> str:
    return (f"{s['models']} models: {s['shipped']} shipped, {s['internal_errors']} internal "
            f"errors, {s['estimator_refusals']} estimator refusals, {s['budget_refusals']} "
            f"budget refusals, {s['user_errors']} user errors, {s['crashes']} crashes, "
            f"{s['timeouts']} timeouts; "
            f"{s['int8_tflite_no_float_op']}/{s['models']} ({s['int8_tflite_no_float_op_pct']}%) "
            f"ship an int8 .tflite with no float compute op"
            + (f" ({s['int8_tflite_no_float_op_of_judged']} = "
               f"{s['int8_tflite_no_float_op_judged_pct']}% without the recurrent exceptions: "
               + ", ".join(f"{k} {v}" for k, v in dict(s["recurrent_exceptions"]).items()) + ")"
               if s.get("recurrent_exceptions") else "")
            + "; emulate --target rpi4 passes "
            f"{s['emulate_pass']}/{s['shipped']} shipped")


def _metric(row: Row, key: str) -> str:
    m = (row.get("metrics") or {})
    if key in m:
        return m[key]["text"]
    error = m.get(f"{key}_error")
    return f"error: {error[:80]}" if error else "-"


def _float_ops(row: Row) -> str:
    facts = row.get("artifact") or {}
    if "tflite_float_ops" not in facts:
        return "-" if not facts else "(no .tflite)"
    ops = facts["tflite_float_ops"]
    return ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())) or "none"


def _parity(row: Row) -> str:
    facts = row.get("artifact") or {}
    share = facts.get("tflite_parity_within_1_step")
    return "-" if share is None else f"{100 * share:.1f}% (n={facts.get('tflite_parity_samples')})"


def _emulate(row: Row) -> str:
    e = row.get("emulate")
    if not e:
        return "-"
    if e["exit"] is None:
        return f"TIMEOUT {e['seconds']} s"
    return ("PASS" if e["pass"] else f"FAIL (exit {e['exit']})") + f" {e['seconds']} s"


def markdown(rows: list[Row], command: str, repo: Path, title: str) -> str:
    s = summary(rows)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"# {title}", "",
           f"Command: `{command}`  ", f"Machine: {machine()}  ", f"Date: {when}  ",
           f"Code: {commit(repo)}", "",
           f"**Summary:** {summary_text(s)}.", "",
           "Each model is built the default way, `edgekit build --target rpi4 MODEL --calib "
           "calib.npz` (64 calibration samples; extra flags only where the model cannot be "
           "built without them, listed below), in a subprocess with a timeout. Metrics are on "
           "the held-out set (disjoint from calibration), each with N and a 95% interval "
           "(exact binomial, Clopper-Pearson, for 0/1 scores; 2000-resample percentile "
           "bootstrap otherwise). `int8` is the shipped artifact run through `edgekit.load` "
           "(the runtime a user gets on this host); `ORT U8S8` is onnxruntime's "
           "`quantize_static` (QDQ, per-channel int8 weights, uint8 activations, MinMax) on "
           "the same calibration samples, run unfused (ORT_ENABLE_BASIC: exact int8). Float "
           "ops are read from the shipped .tflite flatbuffer (an op with a non-constant float "
           "input or output, QUANTIZE/DEQUANTIZE aside); parity is the builder's own check "
           "(manifest `validation.tflite`: the worst output's share within one int8 step of "
           "the ONNX int8 model).", "",
           "| model | exit | result (stage) | format | float ops in .tflite | .tflite~ONNX "
           "parity | metric | float | int8 (edgekit) | ORT U8S8 | build s | emulate rpi4 |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        build = row.get("build") or {}
        facts = row.get("artifact") or {}
        metric = (row.get("metrics") or {}).get("metric", "")
        out.append(
            f"| {row['model']} | {build.get('exit', '-')} | {row.get('kind', '-')} "
            f"({row.get('stage', '')}) | {'+'.join(facts.get('formats', [])) or '-'} | "
            f"{_float_ops(row)} | {_parity(row)} | {metric} | {_metric(row, 'float')} | "
            f"{_metric(row, 'int8')} | {_metric(row, 'peer')} | {build.get('seconds', '-')} | "
            f"{_emulate(row)} |")
    accepted = [r for r in rows if r.get("accepted")]
    if accepted:
        out += ["", "## Budget-refused models, built again as the error suggests",
                "", "`--accept-accuracy-drop --guard-time 0` added (the guard had already "
                "failed): what the default path would otherwise ship. Not counted in the "
                "summary above.", "",
                "| model | exit | result (stage) | format | float ops in .tflite | .tflite~ONNX "
                "parity | float | int8 (edgekit, accepted) | ORT U8S8 | build s | emulate rpi4 |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for row in accepted:
            sub = row["accepted"]
            build = sub.get("build") or {}
            facts = sub.get("artifact") or {}
            out.append(
                f"| {row['model']} | {build.get('exit', '-')} | {sub.get('kind', '-')} "
                f"({sub.get('stage', '')}) | {'+'.join(facts.get('formats', [])) or '-'} | "
                f"{_float_ops(sub)} | {_parity(sub)} | {_metric(sub, 'float')} | "
                f"{_metric(sub, 'int8')} | {_metric(sub, 'peer')} | "
                f"{build.get('seconds', '-')} | {_emulate(sub)} |")
    out += ["", "## Per model: command, error, notes", ""]
    for row in rows:
        out.append(f"### {row['model']}: {row.get('kind', '-')}")
        out.append(f"- task: {row.get('task')}; from {', '.join(row.get('wheels', []))}")
        out.append(f"- repro: `{row.get('command', '-')}`")
        if row.get("flags"):
            out.append(f"- extra flags: `{' '.join(row['flags'])}` ({row.get('why_flags')})")
        if row.get("error"):
            out.append(f"- error (stage `{row.get('stage')}`): `{row['error'][:400]}`")
        facts = row.get("artifact") or {}
        if facts.get("onnx_float_nodes"):
            out.append(f"- ONNX nodes kept float by the quantizer: {facts['onnx_float_nodes']}")
        for w in facts.get("warnings", [])[:3]:
            out.append(f"- build warning: {str(w)[:300]}")
        sub = row.get("accepted") or {}
        if sub:
            out.append(f"- accepted build: `{sub.get('command')}` -> {sub.get('kind')}"
                       + (f": `{sub['error'][:300]}`" if sub.get("error") else ""))
            kept = (sub.get("artifact") or {}).get("onnx_float_nodes")
            if kept:
                out.append(f"- accepted build kept ONNX nodes float: {kept}")
        for what, figures in ((row.get("metrics") or {}).get("extras") or {}).items():
            parts = [f"{label} {figures[key]['text']}" for key, label in
                     (("float", "float"), ("int8", "int8 (edgekit)"), ("int8_onnx", "int8 (edgekit, its ONNX)"),
                      ("peer", "ORT U8S8"),
                      ("int8_minus_float", "int8 - float (paired)")) if key in figures]
            out.append(f"- {what}: " + "; ".join(parts))
        for key in ("float_error", "int8_error", "int8_metric_error", "peer_error", "extras_error"):
            err = (row.get("metrics") or {}).get(key)
            if err:
                out.append(f"- {key.replace('_', ' ')}: `{err[:300]}`")
        out.append("")
    return "\n".join(out) + "\n"
