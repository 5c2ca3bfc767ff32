"""Newcomer mistakes that would build a wrong artifact with exit 0, caught before calibrating.

* **Pixel arrays for a float model.** A ``.npy``/``.npz`` of 0..255 values (whole numbers, or
  fractions as a float resize leaves them) for an image input that takes floats, with no
  preprocessing declared and no division by 255 at the model's start: the model was almost
  surely trained on 0..1 (or normalized) values, and calibrating on 0..255 sets every range
  255x too wide (issue 35: 38.1% where 99.8% was due). Tabular inputs are left alone.
  An error says to scale the arrays, or to declare ``scale = 1`` in ``--preprocess`` when the
  model really takes 0..255 floats.
* **Tiny calibration.** Fewer than ``MIN_CALIBRATION`` samples: activation ranges come from
  what was seen, so a rare large value clips; a warning gives the count and the cost.
* **Weights never loaded.** A ``module:callable`` / ``file.py:Name`` source without
  ``--weights`` builds from whatever the constructor left. Two constructions with different
  parameters mean random initialisation: an error unless ``--random-weights``. (A factory
  loading trained weights itself builds the same values twice and passes.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.context import BuildConfig, Dataset

from edgekit.errors import CalibrationError, ExportError

MIN_CALIBRATION = 32
CHECKED_VALUES = 100_000  # values per input looked at: enough to tell 0..255 integers apart


PIXEL_MAX = 255.5  # 8-bit pixels, with room for a float resize's overshoot
FRACTIONAL_PIXEL_MIN = 32.0  # fractional data peaking above this is 0..255, not normalized
IMAGE_CHANNELS = (1, 3, 4)
NORMALIZING_OPS = ("Cast", "Transpose", "Reshape", "Identity", "Unsqueeze")  # looked through


def image_shaped(shape: tuple[int, ...]) -> bool:
    """An image input: [N, C, H, W] or [N, H, W, C] with 1, 3 or 4 channels (a feature matrix
    [N, 64] of 0..16 counts is not: scaling it by 255 would break the model)."""
    if len(shape) != 4:
        return False
    return any(shape[c] in IMAGE_CHANNELS and min(hw) > 4 for c, hw in ((1, shape[2:]), (3, shape[1:3])))


def scales_pixels_itself(model: Any, name: str) -> bool:
    """Whether the model's first arithmetic on input ``name`` divides by ~255 (a Div by a
    constant of 100 or more, or a Mul by 0.01 or less): then it takes 0..255 on purpose."""
    if model is None:
        return False
    from onnx import numpy_helper

    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute:
            consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    current = {name}
    for node in model.graph.node:  # topologically sorted (the ONNX checker requires it)
        if not current.intersection(node.input):
            continue
        if node.op_type in NORMALIZING_OPS:
            current.update(node.output)
            continue
        other = [consts[i] for i in node.input if i not in current and i in consts]
        values = np.abs(np.asarray(other[0], dtype=np.float64)) if other else None
        if values is None or values.size == 0:
            return False
        if node.op_type == "Div":
            return bool(values.min() >= 100)
        if node.op_type == "Mul":
            return bool(0 < values.max() <= 0.01)
        if node.op_type != "Sub":  # mean subtraction first, then the scale
            return False
        current.update(node.output)
    return False


def check_value_range(data: Dataset, inputs: list[dict[str, Any]], config: BuildConfig,
                      model: Any = None) -> None:
    """CalibrationError when an image input taking floats gets 0..255 arrays (whole numbers,
    or fractions peaking above ``FRACTIONAL_PIXEL_MIN``, as a float resize gives) and neither
    a declared preprocessing nor the model's own first operation scales them."""
    if data.synthetic or "scale" in config.preprocess:
        return
    for spec in inputs:
        array = data.arrays.get(spec["name"])
        if array is None or not str(spec.get("dtype", "float32")).startswith("float"):
            continue
        if not image_shaped(np.shape(array)):
            continue  # tabular features of 0..16 are not pixels
        values = np.asarray(array).reshape(-1)[:CHECKED_VALUES]
        if values.size == 0:
            continue
        low, high = float(values.min()), float(values.max())
        whole = bool(np.all(values == np.round(values)))
        if low < 0 or high > PIXEL_MAX or high <= (2 if whole else FRACTIONAL_PIXEL_MIN):
            continue
        if scales_pixels_itself(model, spec["name"]):
            continue
        kind = "whole numbers" if whole else "values"
        raise CalibrationError(
            f"{data.source}: input {spec['name']!r} takes floats but the data holds {kind} "
            f"{low:g}..{high:g} (8-bit pixels?) and no preprocessing is declared; expected the values "
            "the model was trained on, usually 0..1 or normalized: divide the arrays by 255 (and "
            "normalize as in training), or, if the model really takes 0..255, declare it with a "
            "--preprocess TOML holding 'scale = 1'")


def check_calibration_size(calib: Dataset, warn: Any) -> None:
    """Warn (``warn(message)``) when there are too few calibration samples to trust the ranges."""
    if calib.synthetic or len(calib) >= MIN_CALIBRATION:
        return
    warn(f"only {len(calib)} calibration sample(s) (fewer than {MIN_CALIBRATION}): activation ranges "
         "come from what calibration saw, so values it missed clip and the int8 accuracy drops; "
         f"pass at least {MIN_CALIBRATION} (a few hundred is typical)")


def check_weights_loaded(config: BuildConfig, form: str, has_weights: bool) -> None:
    """ExportError when a constructed module source carries its initial (random) weights."""
    if has_weights or config.random_weights or form not in ("module:callable", "file.py:Name"):
        return
    from edgekit.converters.pytorch.source import resolve

    first, second = resolve(config.source).model, resolve(config.source).model
    a, b = first.state_dict(), second.state_dict()
    if all(a[k].shape == b[k].shape and bool((a[k] == b[k]).all()) for k in a):
        return  # the same values twice: the factory loads its own weights (or seeds them)
    raise ExportError(
        f"{config.source}: the model is built from its constructor and no weights were loaded "
        "(two constructions give different parameters: random initialisation); expected trained "
        "weights: pass --weights <state dict>, or --random-weights to build from random weights on purpose")


TRAINED_Z = 3.0  # one-sided z of the accuracy's lower bound (Wilson): 1 in 740 false alarms
UNIFORM_FACTOR = 2.0  # mean top probability under this many times 1/classes: near-uniform
ONE_CLASS_SHARE = 0.95  # this share of the inputs given one class: no decision made


def wilson_lower(correct: int, total: int, z: float = TRAINED_Z) -> float:
    """Lower bound of a binomial share's Wilson score interval."""
    if total == 0:
        return 0.0
    p = correct / total
    centre = p + z * z / (2 * total)
    spread = z * np.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return float((centre - spread) / (1 + z * z / total))


def check_trained(config: BuildConfig, scores: np.ndarray, labels: np.ndarray | None,
                  source: str, warn: Any) -> None:
    """``--weights`` that look untrained (issue 35: a fresh state dict built at 12.68% on 10
    classes with exit 0). With labels: ExportError when the float model's top-1 accuracy is
    not above chance (the largest class's share) at ``TRAINED_Z``, unless ``--random-weights``.
    Without: a warning when the class scores are near-uniform or one class wins everywhere.
    Outputs that are not class scores ([N, classes], 2 or more) are not judged."""
    if config.random_weights or scores.ndim != 2 or scores.shape[1] < 2 or len(scores) < 8:
        return
    classes = scores.shape[1]
    predicted = scores.argmax(axis=1)
    if labels is not None and labels.ndim == 1 and len(labels) == len(scores) \
            and np.issubdtype(labels.dtype, np.integer) and 0 <= labels.min() and labels.max() < classes:
        correct, total = int((predicted == labels).sum()), len(labels)
        chance = max(1.0 / classes, float(np.bincount(labels).max()) / total)
        if wilson_lower(correct, total) <= chance:
            raise ExportError(
                f"--weights {config.weights}: the float model scores {correct / total:.2%} top-1 on "
                f"{total} labelled samples of {source}, chance level for {classes} classes "
                f"({chance:.2%}): these weights look untrained (a fresh state dict, or one of "
                "another model); expected trained weights (or labels that match the outputs): "
                "pass them, or --random-weights to build from them on purpose")
        return
    top = probabilities(scores).max(axis=1).mean()
    winner_share = float(np.bincount(predicted, minlength=classes).max()) / len(predicted)
    if top < UNIFORM_FACTOR / classes or winner_share >= ONE_CLASS_SHARE:
        what = (f"near-uniform class scores (mean top probability {top:.3f}, uniform "
                f"{1 / classes:.3f})" if top < UNIFORM_FACTOR / classes
                else f"one class for {winner_share:.0%} of the inputs")
        warn(f"--weights {config.weights}: the float model gives {what} on {len(scores)} samples "
             f"of {source}, as an untrained net does; check the weights (no labels to be sure: "
             "add 'y' to the .npz, or label folders, to have it checked)")


def probabilities(scores: np.ndarray) -> np.ndarray:
    """Scores as class probabilities: kept when they already are (0..1, rows summing to 1),
    else a softmax of logits."""
    scores = scores.astype(np.float64)
    if scores.min() >= 0 and np.allclose(scores.sum(axis=1), 1.0, atol=1e-3):
        return scores
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
