"""Newcomer mistakes that would build a wrong artifact with exit 0, caught before calibrating.

* **Pixel arrays for a float model.** A ``.npy``/``.npz`` of integer values 0..255 for an input
  that takes floats, with no preprocessing declared: the model was almost surely trained on
  0..1 (or normalized) values, and calibrating on 0..255 sets every range 255x too wide.
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

from edgekit.errors import CalibrationError, ExportError

from .context import BuildConfig, Dataset

MIN_CALIBRATION = 32
CHECKED_VALUES = 100_000  # values per input looked at: enough to tell 0..255 integers apart


def check_value_range(data: Dataset, inputs: list[dict[str, Any]], config: BuildConfig) -> None:
    """CalibrationError when a float input gets integer-valued 0..255 arrays and no preprocessing."""
    if data.synthetic or "scale" in config.preprocess:
        return
    for spec in inputs:
        array = data.arrays.get(spec["name"])
        if array is None or not str(spec.get("dtype", "float32")).startswith("float"):
            continue
        values = np.asarray(array).reshape(-1)[:CHECKED_VALUES]
        if values.size == 0:
            continue
        low, high = float(values.min()), float(values.max())
        if low >= 0 and 2 < high <= 255 and bool(np.all(values == np.round(values))):
            raise CalibrationError(
                f"{data.source}: input {spec['name']!r} takes floats but the data holds whole numbers "
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
    from .pytorch.source import resolve

    first, second = resolve(config.source).model, resolve(config.source).model
    a, b = first.state_dict(), second.state_dict()
    if all(a[k].shape == b[k].shape and bool((a[k] == b[k]).all()) for k in a):
        return  # the same values twice: the factory loads its own weights (or seeds them)
    raise ExportError(
        f"{config.source}: the model is built from its constructor and no weights were loaded "
        "(two constructions give different parameters: random initialisation); expected trained "
        "weights: pass --weights <state dict>, or --random-weights to build from random weights on purpose")
