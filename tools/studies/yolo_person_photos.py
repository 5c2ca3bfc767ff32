"""What nudenet_320n (YOLOv8n, body parts and faces) detects on its suite sets, and which of
float's detections an int8 build keeps: by class, by float confidence and by photo, with 95%
intervals that resample whole photos (a set's crops cycle over its photos, so crops of one
photo are not independent). docs/measurements/yolo-int8.md section 7.

    python -m tools.studies.yolo_person_photos profile 320n.onnx --data val.npz --set new-val
    python -m tools.studies.yolo_person_photos kept 320n.onnx A.edgekit --data val.npz --set new-val

``--set`` names the photo list the .npz was made from (``letterboxed`` cycles it: crop i is of
photo ``names[i % len(names)]``): old-calib/old-val are the sets before section 7, new-* after.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np
from edgekit.converters.metrics.detection import decode_packed

from tools.realzoo import photos
from tools.realzoo.metrics import detections_kept

LABELS = ("FEMALE_GENITALIA_COVERED", "FACE_FEMALE", "BUTTOCKS_EXPOSED", "FEMALE_BREAST_EXPOSED",
          "FEMALE_GENITALIA_EXPOSED", "MALE_BREAST_EXPOSED", "ANUS_EXPOSED", "FEET_EXPOSED",
          "BELLY_COVERED", "FEET_COVERED", "ARMPITS_COVERED", "ARMPITS_EXPOSED", "FACE_MALE",
          "BELLY_EXPOSED", "MALE_GENITALIA_EXPOSED", "ANUS_COVERED", "FEMALE_BREAST_COVERED",
          "BUTTOCKS_COVERED")  # nudenet 3.4.2's nudenet.py, in output order
SETS: dict[str, tuple[str, ...]] = {
    "old-calib": photos.PEOPLE_CALIB + photos.CALIB_PHOTOS,
    "old-val": photos.PEOPLE_VAL + photos.VAL_PHOTOS,
    "new-calib": photos.YOLO_CALIB,
    "new-val": photos.YOLO_VAL,
}
BINS = (0.25, 0.35, 0.45, 0.6, 0.8, 1.01)
RESAMPLES = 2000


def _runner(path: str) -> Callable[[np.ndarray], np.ndarray]:
    if path.endswith(".onnx"):
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        return lambda x: session.run(None, {name: x})[0]
    import edgekit

    model = edgekit.load(path)
    return lambda x: np.asarray(model.predict(x))


def _outputs(path: str, images: np.ndarray) -> np.ndarray:
    run = _runner(path)
    return np.concatenate([np.asarray(run(images[i:i + 1])).reshape(1, 22, -1)
                           for i in range(len(images))])


def _photo_of(set_name: str, count: int) -> np.ndarray:
    names = SETS[set_name]
    return np.array([names[i % len(names)] for i in range(count)])


def _cluster_interval(hits: np.ndarray, totals: np.ndarray) -> tuple[float, float]:
    """95% bootstrap interval of sum(hits)/sum(totals), resampling photos (rows); a draw of
    only photos without a float detection has no ratio and is left out."""
    rng = np.random.default_rng(0)
    draws = rng.integers(0, len(hits), (RESAMPLES, len(hits)))
    total = totals[draws].sum(1)
    ratio = hits[draws].sum(1)[total > 0] / total[total > 0]
    low, high = np.percentile(ratio, [2.5, 97.5])
    return 100 * float(low), 100 * float(high)


def profile(float_path: str, images: np.ndarray, set_name: str) -> None:
    found = decode_packed(_outputs(float_path, images))
    source = _photo_of(set_name, len(images))
    scores = np.concatenate([d.scores for d in found])
    classes = np.concatenate([d.classes for d in found])
    print(f"{set_name}: {len(images)} crops of {len(set(source))} photos; float detections "
          f"(conf 0.25) {len(scores)}, on {sum(len(d.boxes) > 0 for d in found)} crops")
    counts = np.histogram(scores, BINS)[0]
    print("  by confidence: " + ", ".join(f"[{a:.2f}, {min(b, 1):.2f}) {c}"
                                          for a, b, c in zip(BINS, BINS[1:], counts, strict=False)))
    per_photo = {n: sum(len(d.boxes) for d, s in zip(found, source, strict=True) if s == n) for n in SETS[set_name]}
    print("  by photo: " + ", ".join(f"{n} {c}" for n, c in per_photo.items()))
    top = np.bincount(classes, minlength=len(LABELS))
    print("  by class: " + ", ".join(f"{LABELS[c]} {top[c]}" for c in np.argsort(-top) if top[c]))


def kept(float_path: str, paths: list[str], images: np.ndarray, set_name: str) -> None:
    reference = _outputs(float_path, images)
    want = decode_packed(reference)
    source = _photo_of(set_name, len(images))
    names = sorted(set(source))
    same_rule = detections_kept("output0")  # the suite's own matching, one flag per float detection
    for path in paths:
        got = _outputs(path, images)
        have = decode_packed(got)
        hit = same_rule({"output0": got}, {"output0": reference}, {}).astype(bool)
        score = np.concatenate([w.scores for w in want])
        cls = np.concatenate([w.classes for w in want])
        photo = np.concatenate([[s] * len(w.boxes) for w, s in zip(want, source, strict=True)])
        n_int8 = sum(len(h.boxes) for h in have)
        per = np.array([[hit[photo == n].sum(), (photo == n).sum(),
                         sum(len(h.boxes) for h, s in zip(have, source, strict=True) if s == n)]
                        for n in names], np.float64)
        low, high = _cluster_interval(per[:, 0], per[:, 1])
        f1_low, f1_high = _cluster_interval(2 * per[:, 0], per[:, 1] + per[:, 2])
        print(f"{path} on {set_name} ({len(images)} crops, {len(names)} photos): float detections "
              f"kept {int(hit.sum())}/{len(hit)} = {100 * hit.mean():.1f}% [{low:.1f}, {high:.1f}] "
              f"(photo bootstrap); detection F1 {100 * 2 * hit.sum() / (len(hit) + n_int8):.1f}% "
              f"[{f1_low:.1f}, {f1_high:.1f}] ({n_int8} int8 detections)")
        bins = np.digitize(score, BINS) - 1
        print("  kept by float confidence: " + ", ".join(
            f"[{BINS[b]:.2f}, {min(BINS[b + 1], 1):.2f}) {int(hit[bins == b].sum())}/{int((bins == b).sum())}"
            for b in range(len(BINS) - 1) if (bins == b).any()))
        print("  kept by class: " + ", ".join(
            f"{LABELS[c]} {int(hit[cls == c].sum())}/{int((cls == c).sum())}"
            for c in sorted(set(cls.tolist()), key=lambda c: -(cls == c).sum())))
        print("  kept by photo: " + ", ".join(f"{n} {int(p[0])}/{int(p[1])}" for n, p in zip(names, per, strict=True)))
        missed = np.argsort(-score)[~hit[np.argsort(-score)]]
        print("  misses (class, float score, photo): " + "; ".join(
            f"{LABELS[cls[i]]} {score[i]:.3f} {photo[i]}" for i in missed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["profile", "kept"])
    parser.add_argument("float_model")
    parser.add_argument("others", nargs="*", help="kept: artifacts or .onnx to compare")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--set", choices=sorted(SETS), required=True)
    args = parser.parse_args()
    with np.load(args.data) as data:
        images = data[data.files[0]].astype(np.float32)
    if args.what == "profile":
        profile(args.float_model, images, args.set)
    else:
        kept(args.float_model, args.others, images, args.set)


if __name__ == "__main__":
    main()
