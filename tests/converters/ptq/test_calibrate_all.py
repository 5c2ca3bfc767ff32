"""Every calibration sample calibrates; the validation half is drawn from them, not cut out."""

from __future__ import annotations

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.stages.data import split


def test_split_keeps_every_sample_for_calibration() -> None:
    data = Dataset({"x": np.arange(10, dtype=np.float32)[:, None]})
    calib, val = split(data, calib_samples=256, seed=0)
    assert len(calib) == 10 and len(val) == 5
    assert set(val.arrays["x"][:, 0]) <= set(calib.arrays["x"][:, 0])


def test_split_caps_calibration_at_calib_samples() -> None:
    data = Dataset({"x": np.arange(10, dtype=np.float32)[:, None]})
    calib, _ = split(data, calib_samples=4, seed=0)
    assert len(calib) == 4
