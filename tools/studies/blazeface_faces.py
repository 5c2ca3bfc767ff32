"""What BlazeFace front (blazeface_front_tflite) finds on its suite sets and which of float's
faces an int8 build keeps: by float score, by face size and by photo, with 95% intervals (exact
binomial over faces, and a bootstrap that resamples whole photos: a set's crops cycle over its
photos' faces, so crops of one photo are not independent). docs/measurements/blazeface-int8.md.

    python -m tools.studies.blazeface_faces face_detection_front.tflite --data val.npz \\
        --truth truth.npz [--int8 A.edgekit ...]

``truth.npz`` holds ``photo`` (the photo index of each crop, vision_sets.blazeface_photos);
without it every crop counts as its own photo.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
from edgekit.converters.metrics.detection import Detections, match

from tools.realzoo import blazeface
from tools.realzoo.metrics import interval

SCORE_BINS = (0.5, 0.6, 0.75, 0.9, 1.01)
SIZE_BINS = (0.0, 0.15, 0.3, 0.45, 0.6, 2.0)  # face side (max of w, h) / 128
RESAMPLES = 2000


def _runner(path: str) -> Callable[[np.ndarray], list[np.ndarray]]:
    if path.endswith(".tflite"):
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=path, num_threads=1)
        interpreter.allocate_tensors()
        (inp,), outs = interpreter.get_input_details(), interpreter.get_output_details()

        def run(x: np.ndarray) -> list[np.ndarray]:
            interpreter.set_tensor(inp["index"], x)
            interpreter.invoke()
            return [interpreter.get_tensor(o["index"]).copy() for o in outs]
        return run
    import edgekit

    model = edgekit.load(path, threads=1)
    return lambda x: [np.asarray(v) for v in model.predict(x).values()]


def detect(path: str, images: np.ndarray) -> list[Detections]:
    run = _runner(path)
    return [blazeface.decode([o.reshape(1, 896, -1) for o in run(images[i:i + 1])])[0]
            for i in range(len(images))]


def _matched(ref: Detections, got: Detections) -> np.ndarray:
    """Per float face: 1 if int8 has a box of IoU >= MATCH_IOU (greedy, one box per face)."""
    hit = np.zeros(len(ref.boxes), bool)
    for i in range(len(ref.boxes)):
        one = Detections(ref.boxes[i:i + 1], ref.scores[i:i + 1], ref.classes[i:i + 1])
        hit[i] = match(one, got, blazeface.MATCH_IOU) > 0
    return hit


def _photo_bootstrap(hits: np.ndarray, photo: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95% interval of the share of faces kept, resampling whole photos."""
    rng = np.random.default_rng(seed)
    ids = np.unique(photo)
    kept = np.array([hits[photo == p].sum() for p in ids], np.float64)
    total = np.array([(photo == p).sum() for p in ids], np.float64)
    draws = rng.integers(0, len(ids), (RESAMPLES, len(ids)))
    shares = kept[draws].sum(1) / np.maximum(total[draws].sum(1), 1)
    low, high = np.quantile(shares, [0.025, 0.975])
    return float(low), float(high)


def _bins(values: np.ndarray, edges: tuple[float, ...], hits: np.ndarray | None) -> str:
    cells = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (values >= lo) & (values < hi)
        if inside.any():
            cells.append(f"[{lo:.2f},{min(hi, 1.0):.2f}): {int(inside.sum())}"
                         + ("" if hits is None else f" kept {int(hits[inside].sum())}"))
    return "; ".join(cells)


def report(ref: list[Detections], got: list[Detections] | None, photo: np.ndarray) -> str:
    scores = np.concatenate([r.scores for r in ref])
    sides = np.concatenate([np.max(r.boxes[:, 2:] - r.boxes[:, :2], axis=1) / blazeface.SIZE
                            for r in ref]) if len(scores) else np.zeros(0)
    face_photo = np.concatenate([np.full(len(r.boxes), p) for r, p in zip(ref, photo, strict=True)])
    with_face = sum(1 for r in ref if len(r.boxes))
    lines = [f"float: {len(ref)} crops of {len(np.unique(photo))} photos, {with_face} with a face, "
             f"{len(scores)} faces on {len(np.unique(face_photo))} photos",
             "  faces per photo: " + ", ".join(
                 f"{p}: {n}" for p, n in zip(*np.unique(face_photo, return_counts=True), strict=True))]
    if got is None:
        lines += [f"  by float score: {_bins(scores, SCORE_BINS, None)}",
                  f"  by face side/128: {_bins(sides, SIZE_BINS, None)}"]
        return "\n".join(lines)
    hits = np.concatenate([_matched(r, g) for r, g in zip(ref, got, strict=True)])
    per_crop = np.array([_matched(r, g).mean() for r, g in zip(ref, got, strict=True)
                         if len(r.boxes)])
    suite = interval(per_crop)
    exact = interval(hits.astype(np.float64))
    low, high = _photo_bootstrap(hits, face_photo)
    extra = sum(max(len(g.boxes) - match(r, g, blazeface.MATCH_IOU), 0)
                for r, g in zip(ref, got, strict=True))
    lines += [f"int8: suite metric (per crop with a face) {suite.text()} ({suite.method})",
              f"  faces kept {int(hits.sum())}/{len(hits)} = {exact.text()} ({exact.method}); "
              f"per-photo bootstrap [{100 * low:.1f}, {100 * high:.1f}] over "
              f"{len(np.unique(face_photo))} photos",
              f"  by float score: {_bins(scores, SCORE_BINS, hits)}",
              f"  by face side/128: {_bins(sides, SIZE_BINS, hits)}",
              "  by photo: " + "; ".join(f"{p}: {int(hits[face_photo == p].sum())}/"
                                          f"{int((face_photo == p).sum())}"
                                          for p in np.unique(face_photo)),
              f"  int8 boxes float does not have: {extra}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the float face_detection_front.tflite")
    parser.add_argument("--data", type=Path, required=True, help="val.npz (input NHWC [-1, 1])")
    parser.add_argument("--truth", type=Path, help="truth.npz with the photo of each crop")
    parser.add_argument("--int8", nargs="*", default=[], help=".edgekit artifacts to judge")
    args = parser.parse_args(argv)
    images = np.load(args.data)["input"].astype(np.float32)
    photo = (np.load(args.truth)["photo"] if args.truth and "photo" in np.load(args.truth)
             else np.arange(len(images)))
    ref = detect(args.source, images)
    print(report(ref, None, photo), flush=True)
    for path in args.int8:
        print(f"== {path}", flush=True)
        print(report(ref, detect(path, images), photo), flush=True)


if __name__ == "__main__":
    main()
