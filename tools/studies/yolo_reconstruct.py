"""YOLOv8n (realzoo ``nudenet_320n``): activation steps learned by block reconstruction
(``tools/studies/reconstruct.py``), written back into the build's range table so the same
writer emits the all-int8 .tflite (docs/measurements/yolo-reconstruct.md).

    python -m tools.studies.yolo_reconstruct keep OUT_DIR build --target rpi4 320n.onnx --calib calib.npz \\
        --guard-time 0 --accept-accuracy-drop --format tflite -o A.edgekit
        (the plain build, its temp folder copied to OUT_DIR: prepared.onnx, int8-minmax.onnx, ranges)
    python -m tools.studies.yolo_reconstruct learn OUT_DIR --calib calib.npz [--seconds 300]
        (learns steps on OUT_DIR's QDQ model; writes OUT_DIR/ranges-learned.json)
    python -m tools.studies.yolo_reconstruct build RANGES.json OUT_DIR2 build --target rpi4 320n.onnx ...
        (the same build with the calibrate stage's min-max table replaced by RANGES.json; OUT_DIR2
        "-" keeps no folder)
"""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path


def _keep_workdir(into: Path) -> None:
    """Copy the build's temp folder to ``into`` instead of removing it."""
    from edgekit.converters import api

    def copy_then_remove(path: object, ignore_errors: bool = False) -> None:
        if Path(str(path)).is_dir() and (Path(str(path)) / "prepared.onnx").exists():
            shutil.copytree(str(path), into, dirs_exist_ok=True)
        shutil.rmtree(str(path), ignore_errors=ignore_errors)

    api.shutil = types.SimpleNamespace(rmtree=copy_then_remove)


def _replace_ranges(learned: Path) -> None:
    """After the calibrate stage, its min-max table is ``learned``'s entries over min-max's."""
    import json

    from edgekit.converters.stages import calibrate

    run = calibrate.Calibrate.run

    def run_then_replace(self: calibrate.Calibrate, ctx: object) -> None:
        run(self, ctx)
        path = ctx.ranges["minmax"]  # type: ignore[attr-defined]
        table = json.loads(Path(path).read_text())
        entries = table["data"]  # onnxruntime's TensorsData file: {tensor: {lowest, highest}}
        new = json.loads(learned.read_text())
        for name, (low, high) in new.items():
            if name in entries:
                entries[name]["lowest"]["data"] = [low]
                entries[name]["highest"]["data"] = [high]
        Path(path).write_text(json.dumps(table))
        print(f"learned ranges: {sum(n in entries for n in new)} of {len(new)} tensors replaced",
              file=sys.stderr)

    calibrate.Calibrate.run = run_then_replace


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    what = sys.argv[1]
    if what == "keep":
        _keep_workdir(Path(sys.argv[2]))
        rest = sys.argv[3:]
    elif what == "build":
        _replace_ranges(Path(sys.argv[2]))
        if sys.argv[3] != "-":  # "-": keep nothing (the disk is shared)
            _keep_workdir(Path(sys.argv[3]))
        rest = sys.argv[4:]
    elif what == "learn":
        from tools.studies.yolo_reconstruct_learn import main as learn

        sys.exit(learn(sys.argv[2:]))
    else:
        raise SystemExit(__doc__)
    from edgekit.cli import main as cli

    sys.argv = ["edgekit", *rest]
    sys.exit(cli())


if __name__ == "__main__":
    main()
