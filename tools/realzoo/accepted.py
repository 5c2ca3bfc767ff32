"""The user's next step after a budget refusal, as the error message suggests it: the same
build with ``--accept-accuracy-drop`` (and ``--guard-time 0``: the guard already failed once).
Its artifact shows what the default path would ship (format, float ops, parity, emulation)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from .registry import Model
from .suite import _run, artifact_facts, build_command, classify, edgekit_cli

ACCEPT_FLAGS = ("--accept-accuracy-drop", "--guard-time", "0")


def run_accepted(model: Model, runs: Path, timeout: float) -> dict[str, object]:
    folder = runs / model.name
    artifact = folder / f"{model.name}.accepted.edgekit"
    artifact.unlink(missing_ok=True)
    cmd = [*build_command(model, artifact)[:-2], *ACCEPT_FLAGS, "-o", str(artifact)]
    out: dict[str, object] = {"command": shlex.join(["edgekit", *cmd[len(edgekit_cli()):]])}
    build = _run(cmd, timeout, folder / "build.accepted.log")
    text = Path(str(build["log"])).read_text(errors="replace")
    kind, line, stage = classify(build["exit"], text)  # type: ignore[arg-type]
    out.update(build=build, kind=kind, error=line, stage=stage)
    if build["exit"] != 0 or not artifact.is_file():
        return out
    out["artifact"] = artifact_facts(artifact)
    result = folder / "measure.accepted.json"
    result.unlink(missing_ok=True)
    out["measure_run"] = _run([sys.executable, "-m", "tools.realzoo.measure", model.name,
                               str(artifact), str(result)], timeout,
                              folder / "measure.accepted.log")
    if result.is_file():
        out["metrics"] = json.loads(result.read_text())
    emulate = _run([*edgekit_cli(), "emulate", "--target", "rpi4", str(artifact)], timeout,
                   folder / "emulate.accepted.log")
    emulate["pass"] = emulate["exit"] == 0
    out["emulate"] = emulate
    return out
