"""``edgekit run``: preprocess images as the manifest says, predict, print top-k."""

from __future__ import annotations

import json
import os
import stat
import time
from typing import Any

import click
import numpy as np

from edgekit.commands.params import FAST_INT8, THREAD_COUNT


def is_classifier(model: Any) -> bool:
    """One output of shape [batch, classes] (or marked ``kind = classifier``)."""
    if len(model.outputs) != 1:
        return False
    entry = model.manifest["outputs"][0]
    return entry.get("kind") == "classifier" or (len(model.outputs[0].shape) == 2
                                                 and entry.get("kind") in (None, "classifier"))


def top_k(scores: np.ndarray, k: int, labels: list[str] | None) -> list[dict[str, Any]]:
    """Top-k classes of one row; ``probability`` is softmax unless the row already sums to 1."""
    row = np.asarray(scores, dtype=np.float64).reshape(-1)
    already = bool(np.all(row >= 0) and abs(row.sum() - 1.0) < 1e-3)
    probs = row if already else np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    order = np.argsort(-row, kind="stable")[:k]
    return [{"class": int(i), "label": labels[i] if labels and i < len(labels) else str(int(i)),
             "score": round(float(row[i]), 6), "probability": round(float(probs[i]), 6)}
            for i in order]


@click.command(name="run")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("images", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--top-k", "k", default=5, show_default=True, type=click.IntRange(1),
              help="Classes to print for a classifier.")
@click.option("--threads", default="0", show_default=True, type=THREAD_COUNT,
              help="Thread count (at most this machine's CPUs), 'auto', or 0 for the "
                   "runtime default.")
@click.option("--backend", help="Force a runtime (onnxruntime, litert, tflite-runtime).")
@click.option("--resize", type=click.Choice(["none", "stretch", "center-crop"]),
              help="How images of another size reach the model's (default: the manifest's).")
@click.option("--color", type=click.Choice(["gray", "rgb", "bgr"]),
              help="Colour images are converted to (default: the manifest's).")
@FAST_INT8
@click.option("--json", "as_json", is_flag=True, help="Results as JSON.")
@click.option("--drift-threshold", type=click.FloatRange(0.0, 1.0), default=0.01,
              show_default=True,
              help="Warn when an input channel has this share more of its values outside the "
              "calibrated range (int8 clips them) than at build, or an output at the int8 "
              "limits.")
def command(artifact: str, images: tuple[str, ...], k: int, threads: int | str,
            backend: str | None, resize: str | None, color: str | None, fast_int8: bool,
            as_json: bool, drift_threshold: float = 0.01) -> None:
    """Run ARTIFACT on IMAGES (files, or folders of them), preprocessed as the manifest's
    input spec says (what the model was calibrated on); print the top-k classes of a
    classifier. Warns on stderr when the images drift outside the calibrated range."""
    import edgekit
    from edgekit.errors import UserError
    from edgekit.ops.inspect import artifact_labels
    from edgekit.runtime.preprocess import list_images

    for image in images:  # a FIFO or a device would hang the image reader: refuse up front
        if not os.path.isdir(image) and not stat.S_ISREG(os.stat(image).st_mode):
            raise UserError(f"{image}: expected an image file or a folder of them, got a "
                            "special file (FIFO, device or socket)")
    results = []
    with edgekit.load(artifact, backend=backend, exact_int8=not fast_int8,
                      threads=threads, drift_threshold=drift_threshold) as model:
        classifier = is_classifier(model)
        labels = artifact_labels(model.manifest)
        files = [path for image in images
                 for path in ([p for p, _ in list_images(image)] if os.path.isdir(image) else [image])]
        if not files:
            raise UserError(f"no images in {', '.join(images)} (looked for .png, .jpg, ... files, "
                            "directly or one subfolder per class)")
        for image in files:
            t0 = time.perf_counter()
            out = model.predict_image(image, resize=resize, color=color)
            ms = (time.perf_counter() - t0) * 1e3
            entry: dict[str, Any] = {"image": image, "ms": round(ms, 3)}
            if classifier:
                entry["top"] = top_k(out[0], k, labels)
            else:
                outs = out if isinstance(out, dict) else {model.outputs[0].name: out}
                entry["outputs"] = {n: {"shape": list(v.shape), "min": float(v.min()),
                                        "max": float(v.max())} for n, v in outs.items()}
            results.append(entry)
        drift = model.drift_warnings()
    for line in drift:  # inputs the model was not calibrated for: accuracy falls silently
        click.echo(f"warning: drift: {line}", err=True)
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for entry in results:
        click.echo(f"{entry['image']}  ({entry['ms']:.2f} ms incl. preprocessing)")
        for rank, item in enumerate(entry.get("top", []), 1):
            click.echo(f"  {rank}. {item['label']:<16} p={item['probability']:.4f}  "
                       f"score={item['score']:.4f}")
        for name, info in entry.get("outputs", {}).items():
            click.echo(f"  {name}: shape {info['shape']} min {info['min']:.4g} "
                       f"max {info['max']:.4g}")
