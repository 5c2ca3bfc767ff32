"""How optimistic is a build's accuracy figure judged on its own calibration samples?

Without ``--val``, a build that is given fewer than twice ``--calib-samples`` samples validates
on the samples it calibrated on (``converters/stages/data.py: split``). This study measures what
that costs the decision, per suite model: four builds with the guard off, on the suite's two
disjoint photo (or recording, or page) sets A = ``calib.npz`` and B = ``val.npz``:

    judged on A: calibrated on A (in-sample, the default path) | calibrated on B (held out)
    judged on B: calibrated on B (in-sample)                   | calibrated on A (held out)

Per judged set, in-sample minus held-out is the optimism of the in-sample figure (same samples
judged, only the calibration differs); a difference between the two judged sets at equal
calibration is the sets' own difficulty, not optimism. Each set is cut to its first 64 samples:
every build calibrates on 64 and is judged on 64.

    EDGEKIT_REALZOO_WORK=/work/wt/rzs5 python -m tools.studies.insample_optimism \\
        --models blazeface_front_tflite,nudenet_320n --out optimism.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tools.realzoo.materialize import model_dir, source_path
from tools.realzoo.registry import MODELS
from tools.realzoo.suite import REPO, edgekit_cli

# the build's judged line: "  agreement (detection, the .tflite on LiteRT): 9.38 points
# (95% interval 0.00..20.69, N=64, ..." (also "accuracy (...)" against labels)
JUDGED = re.compile(r"^  (\w[\w -]*) \((.*?)\): (-?[\d.]+) points \(95% interval "
                    r"(-?[\d.]+)\.\.(-?[\d.]+), N=(\d+)")
SAMPLES = 64


def judged(model: str, calib: Path, val: Path, work: Path) -> dict[str, object]:
    """The build's own figure with the guard off: calibrated on ``calib``, judged on ``val``."""
    spec = MODELS[model]
    cmd = [*edgekit_cli(), "build", "--target", "rpi4", str(source_path(spec)), "--calib", str(calib),
           "--calib-samples", str(SAMPLES), "--guard-time", "0", "--accept-accuracy-drop",
           *spec.flags, "-o", str(work / f"{model}.edgekit")]
    if val != calib:
        cmd[cmd.index("--calib-samples"):cmd.index("--calib-samples")] = ["--val", str(val)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    for line in done.stdout.splitlines() + done.stderr.splitlines():
        if (m := JUDGED.match(line)) and m.group(1) != "reference PTQ":  # onnxruntime's, not ours
            return {"figure": m.group(1), "how": m.group(2), "points": float(m.group(3)),
                    "low": float(m.group(4)), "high": float(m.group(5)), "n": int(m.group(6))}
    return {"error": f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"}


def first(path: Path, count: int, out: Path) -> Path:
    """The first ``count`` samples of every array in ``path``: both sets judged on 64."""
    with np.load(path) as data:
        np.savez(out, **{key: data[key][:count] for key in data.files})
    return out


def study(model: str) -> dict[str, object]:
    folder = model_dir(MODELS[model])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        a = first(folder / "calib.npz", SAMPLES, work / "a.npz")
        b = first(folder / "val.npz", SAMPLES, work / "b.npz")
        rows = {"A by A": judged(model, a, a, work), "A by B": judged(model, b, a, work),
                "B by B": judged(model, b, b, work), "B by A": judged(model, a, b, work)}
    return rows


def _cell(row: dict[str, object]) -> str:
    if "error" in row:
        return f"error ({row['error'][:60]})"
    return f"{row['points']:.2f} [{row['low']:.2f}, {row['high']:.2f}] n={row['n']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True, help="comma-separated suite model names")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    found = {}
    print("| model | judged on A (calib.npz): calibrated on A (in-sample) | on B (held out) "
          "| judged on B (val.npz): calibrated on B (in-sample) | on A (held out) |")
    print("| --- | --- | --- | --- | --- |")
    for model in args.models.split(","):
        rows = found[model] = study(model)
        print(f"| {model} | {_cell(rows['A by A'])} | {_cell(rows['A by B'])} | "
              f"{_cell(rows['B by B'])} | {_cell(rows['B by A'])} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
