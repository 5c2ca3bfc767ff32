"""The default metric each suite model gets (``metrics.choose_default``), without building.

Runs every materialized model in float (onnxruntime, one sample at a time) on its
``calib.npz`` (what a default build validates on when no ``--val`` is given), joins the
outputs the way the build does (samples on axis 0; a ZipMap's maps as the ``[N, classes]``
tensor they hold; outputs batched on another axis left out) and prints the choice and why.
Used to show that a change to the choice moves only the models it means to.

    python -m tools.realzoo.choices --dirs /work/wt/rzfinal,/work/wt/rzcdla [--json F]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .measure import sample_axes
from .registry import MODELS, Model


def source(model: Model, folder: Path) -> Path:
    converted = folder / f"{model.name}.from_tflite.onnx"  # a .tflite source, as the build loads it
    return converted if converted.exists() else folder / model.filename


def _as_tensor(value: object) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list) and value and isinstance(value[0], dict):  # ZipMap
        keys = sorted(value[0])
        return np.array([[row[k] for k in keys] for row in value], np.float32)
    return None


def float_outputs(model: Model, folder: Path) -> list[np.ndarray]:
    import onnxruntime as ort

    from .evaluate import count, sample

    options = ort.SessionOptions()
    options.log_severity_level = 3  # a sequence-major output's shape warning, once per sample
    session = ort.InferenceSession(str(source(model, folder)), options, providers=["CPUExecutionProvider"])
    arrays = dict(np.load(folder / "calib.npz"))
    axes, ranks = sample_axes(model), {i.name: len(i.shape) for i in session.get_inputs()}
    types = {i.name: i.type for i in session.get_inputs()}
    consts = {k: np.array(v, np.int64 if "int64" in types[k] else np.int32) for k, v in model.consts.items()}
    rows: list[list[np.ndarray | None]] = []
    for i in range(count(arrays, axes)):
        rows.append([_as_tensor(v) for v in session.run(None, {**sample(arrays, axes, ranks, i), **consts})])
    outputs = []
    for j in range(len(rows[0])):
        parts = [r[j] for r in rows]
        if parts[0] is None or not parts[0].ndim:
            continue
        ones = [k for k, size in enumerate(parts[0].shape) if size == 1]
        if parts[0].shape[0] != 1 and (axes or len(ones) != 1):
            continue  # batched on another axis (a recurrent state): the build's scorer leaves it out
        # a sequence-major output [T, 1, C] joins as [N, T, C], as the build's runner joins it
        outputs.append(np.concatenate([np.moveaxis(p, ones[0], 0) for p in parts], 0))
    return outputs


def main() -> None:
    from edgekit.converters.metrics import choose_default

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dirs", default="/work/wt/rzfinal,/work/wt/rzcdla")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    found: dict[str, dict[str, str]] = {}
    for root in (Path(d) for d in args.dirs.split(",")):
        for name, model in MODELS.items():
            folder = root / name
            if name in found or not (folder / "calib.npz").exists():
                continue
            outputs = float_outputs(model, folder)
            choice = choose_default(outputs)
            shapes = ", ".join(f"{o.dtype}{list(o.shape)}" for o in outputs)
            found[name] = {"metric": choice.name, "reason": choice.reason, "outputs": shapes}
            print(f"{name}: {choice.name} ({shapes}): {choice.reason}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
