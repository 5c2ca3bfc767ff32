"""Every calibration sample calibrates; validation is held out when the data allows, and
otherwise drawn from them, not cut out."""

from __future__ import annotations

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.stages.data import split


def test_split_keeps_every_sample_for_calibration() -> None:
    data = Dataset({"x": np.arange(10, dtype=np.float32)[:, None]})
    calib, val, shared = split(data, calib_samples=256, seed=0)
    assert len(calib) == 10 and len(val) == 10 and shared == 10  # nothing to hold out: all validate
    assert set(val.arrays["x"][:, 0]) <= set(calib.arrays["x"][:, 0])


def test_split_caps_calibration_at_calib_samples() -> None:
    data = Dataset({"x": np.arange(10, dtype=np.float32)[:, None]})
    calib, val, shared = split(data, calib_samples=4, seed=0)
    assert len(calib) == 4
    # enough left over: validation is held out, not drawn from the calibration samples
    assert len(val) == 6 and shared == 0
    assert not set(val.arrays["x"][:, 0]) & set(calib.arrays["x"][:, 0])


def test_split_validates_on_every_sample_when_too_few_are_left_over() -> None:
    data = Dataset({"x": np.arange(10, dtype=np.float32)[:, None]})
    calib, val, shared = split(data, calib_samples=7, seed=0)
    assert len(calib) == 7 and len(val) == 10 and shared == 7  # the 3 left over validate too
    assert len(set(val.arrays["x"][:, 0]) & set(calib.arrays["x"][:, 0])) == 7


def test_split_of_every_sample_validates_on_the_calibration_copy() -> None:
    """All samples calibrate and validate in one order: one copy of them, not two (a 38 MB
    copy of 64 photos, and one hash of them for every kept pass), the same samples as before."""
    data = Dataset({"x": np.arange(10, dtype=np.float32)[:, None]}, labels=np.arange(10) % 3)
    calib, val, shared = split(data, calib_samples=10, seed=0)
    order = np.random.default_rng(0).permutation(10)
    assert np.shares_memory(calib.arrays["x"], val.arrays["x"]) and shared == 10
    assert np.array_equal(val.arrays["x"], data.arrays["x"][order])
    assert np.array_equal(val.labels, data.labels[order])
