"""Run the suite: per model, each step in a subprocess with a timeout (a crash or a hang costs
one row): the default rpi4 build, the metrics (``tools.realzoo.measure``), ``edgekit emulate``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from .materialize import materialize, model_dir, source_path
from .registry import Model
from .tflite_ops import float_compute_ops

REPO = Path(__file__).resolve().parents[2]
STAGE = re.compile(r"^\[(\w+)\]")


def edgekit_cli() -> list[str]:
    """The edgekit of this interpreter's environment (the worktree's venv)."""
    exe = Path(sys.executable).with_name("edgekit")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "edgekit"]


def build_command(model: Model, out: Path) -> list[str]:
    folder = model_dir(model)
    return [*edgekit_cli(), "build", "--target", "rpi4", str(source_path(model)),
            "--calib", str(folder / "calib.npz"), *model.flags, "-o", str(out)]


def _run(cmd: list[str], timeout: float, log: Path) -> dict[str, object]:
    """Run with a timeout; stdout+stderr to ``log``; the exit (None on timeout) and seconds."""
    started = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with log.open("w") as handle:
        handle.write("$ " + shlex.join(cmd) + "\n")
        handle.flush()
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the build's own children (pool workers) too
            proc.wait()
            code = None
    return {"exit": code, "seconds": round(time.perf_counter() - started, 1),
            "log": str(log)}


def classify(code: int | None, text: str) -> tuple[str, str, str]:
    """(kind, the error line, the last stage entered) from a build's exit and output."""
    lines = text.splitlines()
    stages = [m.group(1) for line in lines if (m := STAGE.match(line))]
    stage = stages[-1] if stages else ""
    errors = [ln for ln in lines if re.match(r"^(internal error|error|Error)\b", ln)]
    if code is None:
        return "timeout", "", stage
    line = errors[-1] if errors else (lines[-1] if code and lines else "")
    if code == 0:
        return "ok", "", stage
    if code == 1:
        return "internal error", line, stage
    if code == 2:
        estimator = stage == "estimate" or "estimator" in line
        return ("estimator refusal" if estimator else "user error"), line, stage
    if code == 3:
        return "budget refusal", line, stage
    if code < 0:  # killed by a signal: a native library crashed (no Python error to show)
        return f"crash (signal {-code})", line, stage
    return f"exit {code}", line, stage


def artifact_facts(path: Path) -> dict[str, object]:
    """Formats shipped, float compute ops read from the .tflite flatbuffer, the builder's own
    .tflite-vs-ONNX parity (manifest ``validation.tflite``) and what stayed float by its count."""
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        facts: dict[str, object] = {"formats": [m["format"] for m in manifest["models"]]}
        for entry in manifest["models"]:
            if entry["format"] == "tflite":
                floats, every = float_compute_ops(archive.read(entry["path"]))
                facts["tflite_float_ops"] = dict(floats)
                facts["tflite_ops"] = dict(every)
                facts["manifest_float_ops"] = entry.get("float_ops", [])
    validation = manifest.get("validation", {})
    parity = validation.get("tflite") or {}
    within = [v["within_1_step"] for v in parity.values() if isinstance(v, dict)
              and "within_1_step" in v]
    if within:
        facts["tflite_parity_within_1_step"] = min(within)
        facts["tflite_parity_samples"] = parity.get("samples")
    facts["onnx_float_nodes"] = [n.get("op") for n in
                                 manifest.get("quantization", {}).get("float_nodes", [])]
    facts["warnings"] = manifest.get("warnings", [])[:6]
    facts["validation_metric"] = (validation.get("metric") or {}).get("name")
    return facts


RECURRENT = {"LSTM", "GRU", "RNN"}


def recurrent_ops(source: Path) -> list[str]:
    """The recurrent cells of an ONNX source (issue 30 names them as the exceptions to the
    no-float bar: the writer keeps LSTM/GRU cells float), sorted; [] for other formats."""
    if source.suffix != ".onnx" or not source.is_file():
        return []
    import onnx

    found: set[str] = set()
    graphs = [onnx.load(str(source), load_external_data=False).graph]
    while graphs:  # silero-vad keeps its LSTM inside an If branch
        for node in graphs.pop().node:
            if node.op_type in RECURRENT:
                found.add(node.op_type)
            graphs.extend(a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH)
    return sorted(found)


def remeasure(row: dict[str, object], model: Model, runs: Path, timeout: float) -> None:
    """The metrics step alone (the artifact of the row's build, if it shipped)."""
    folder = runs / model.name
    artifact = folder / f"{model.name}.edgekit"
    shipped = row.get("kind") == "ok" and artifact.is_file()
    measure = [sys.executable, "-m", "tools.realzoo.measure", model.name,
               str(artifact) if shipped else "-", str(folder / "measure.json")]
    (folder / "measure.json").unlink(missing_ok=True)
    row["measure_run"] = _run(measure, timeout, folder / "measure.log")
    if (folder / "measure.json").is_file():
        row["metrics"] = json.loads((folder / "measure.json").read_text())


def run_model(model: Model, runs: Path, timeout: float) -> dict[str, object]:
    """One row: build, then (if it shipped) facts, metrics and emulation."""
    folder = runs / model.name
    folder.mkdir(parents=True, exist_ok=True)
    row: dict[str, object] = {"model": model.name, "task": model.task,
                              "wheels": [w.spec for w in model.wheels],
                              "flags": list(model.flags), "why_flags": model.why_flags}
    try:
        materialize(model)
    except Exception as exc:
        row["kind"] = "source/data failed"
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    row["recurrent"] = recurrent_ops(source_path(model))
    artifact = folder / f"{model.name}.edgekit"
    artifact.unlink(missing_ok=True)
    cmd = build_command(model, artifact)
    row["command"] = shlex.join(["edgekit", *cmd[len(edgekit_cli()):]])
    build = _run(cmd, timeout, folder / "build.log")
    text = Path(str(build["log"])).read_text(errors="replace")
    kind, line, stage = classify(build["exit"], text)  # type: ignore[arg-type]
    row.update(build=build, kind=kind, error=line, stage=stage)
    shipped = build["exit"] == 0 and artifact.is_file()
    if shipped:
        row["artifact"] = artifact_facts(artifact)
    remeasure(row, model, runs, timeout)
    if shipped:
        emulate = _run([*edgekit_cli(), "emulate", "--target", "rpi4", str(artifact)], timeout,
                       folder / "emulate.log")
        emulate["pass"] = emulate["exit"] == 0
        row["emulate"] = emulate
    return row
