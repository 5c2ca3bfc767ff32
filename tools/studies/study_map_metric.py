"""A probability-map model's int8 judged two ways on held-out pages: ``regions`` (what a DB
post-processing keeps, the default for sparse maps) and ``map_iou`` (the per-page pixel gate).

For a realzoo model folder (source ONNX, ``val.npz``, ``peer_ort_u8s8.onnx``) and optionally a
built artifact: float (onnxruntime), the artifact as a user runs it (``edgekit.load``), and
onnxruntime's quantize_static peer, each int8 scored against float with its N and 95% interval.

    python -m tools.studies.study_map_metric --model ppocr_det --dir rzwork/ppocr_det \\
        --artifact rzwork/runs/ppocr_det/ppocr_det.edgekit [--split val]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def _maps(model_name: str, folder: Path, split: str, artifact: Path | None) -> dict[str, np.ndarray]:
    from tools.realzoo.evaluate import input_ranks, run_artifact, run_onnx
    from tools.realzoo.measure import sample_axes
    from tools.realzoo.registry import MODELS

    model = MODELS[model_name]
    arrays = dict(np.load(folder / f"{split}.npz"))
    axes = sample_axes(model)
    source = folder / model.filename
    found = {"float": run_onnx(source, arrays, axes, model.consts),
             "ORT quantize_static": run_onnx(folder / "peer_ort_u8s8.onnx", arrays, axes, model.consts)}
    if artifact is not None:
        found["edgekit artifact"] = run_artifact(artifact, arrays, axes, input_ranks(source))
    # one sample at a time, stacked: [N, 1, 1, H, W] for a [1, 1, H, W] output
    firsts = {name: np.asarray(next(iter(outputs.values()))) for name, outputs in found.items()}
    return {name: x[:, 0] if x.ndim == 5 else x for name, x in firsts.items()}


def main() -> None:
    from edgekit.converters.metrics import get_metric
    from edgekit.converters.metrics.evidence import Evidence

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ppocr_det")
    parser.add_argument("--dir", type=Path, required=True, help="the model's realzoo folder")
    parser.add_argument("--artifact", type=Path)
    parser.add_argument("--split", default="val")
    args = parser.parse_args()
    maps = _maps(args.model, args.dir, args.split, args.artifact)
    reference = maps.pop("float")
    for name, got in maps.items():
        for metric in ("regions", "map_iou"):
            result = get_metric(metric)([reference], [got])
            details = ", ".join(f"{k} {v:g}" for k, v in result.details.items())
            print(f"{name} vs float, {metric}: {Evidence.of(result.per_sample).text()}; {details}", flush=True)


if __name__ == "__main__":
    main()
