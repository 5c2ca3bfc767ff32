"""Train the default example model: a small CNN on scikit-learn's real 8x8 handwritten digits.

Writes, next to this script (all committed, all small):
  digits_cnn.onnx   fp32 ONNX, weights inside the file; input ``image`` float32 [batch,1,8,8]
                    in [0,1], output ``logits`` [batch,10]
  digits.npz        held-out split: ``x`` float32 [N,1,8,8] in [0,1], ``y`` int64 labels
                    (the build uses it as calibration + validation data)
  samples/          20 held-out digits as 8-bit grayscale 8x8 PNGs named <label>_<index>.png,
                    where <index> is the row in digits.npz

Run:  python examples/raspberrypi/train_digits.py   (about a minute on 2 CPU cores)
Needs torch (pinned: torch==2.13.0), onnx, onnxscript, onnxruntime, scikit-learn, pillow.
"""

from __future__ import annotations

import argparse
import random
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

HERE = Path(__file__).resolve().parent
SEED = 0
OPSET = 18  # the dynamo exporter's native opset: no version conversion pass needed
N_SAMPLES = 20


def seed_everything(seed: int) -> None:
    """Fix every RNG and force deterministic kernels so reruns give the same weights."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)


class DigitsCNN(nn.Module):
    """~122k params: three 3x3 convs (one 2x2 pool to 4x4), then a 1024->64->10 head.

    No BatchNorm: the model is small enough to train well without it, and that keeps the
    exported graph to plain Conv/Relu/MaxPool/Gemm ops every quantizer handles.
    """

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(64, 64, 3, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 64),
            nn.ReLU(),
            nn.Dropout(0.25),
            nn.Linear(64, 10),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(image))


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Real digits scaled to [0,1], stratified 70/30 split with a fixed seed."""
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]  # NCHW
    y = digits.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=0.3, stratify=y, random_state=SEED
    )
    return x_tr, x_te, y_tr, y_te


def shift_augment(xb: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random +-1 pixel translation per image: handwriting is rarely centred exactly,
    and on 1,257 training images this is worth about a point of held-out accuracy."""
    padded = nn.functional.pad(xb, (1, 1, 1, 1))
    offs = torch.randint(0, 3, (xb.shape[0], 2), generator=gen)
    out = torch.empty_like(xb)
    for i, (dy, dx) in enumerate(offs.tolist()):
        out[i] = padded[i, :, dy : dy + 8, dx : dx + 8]
    return out


def train(model: nn.Module, x: np.ndarray, y: np.ndarray, epochs: int) -> None:
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    steps_per_epoch = (len(xt) + 63) // 64
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=3e-3, total_steps=epochs * steps_per_epoch
    )
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for start in range(0, len(xt), 64):
            idx = perm[start : start + 64]
            xb = shift_augment(xt[idx], gen)
            loss = loss_fn(model(xb), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"epoch {epoch + 1:3d}/{epochs}  train loss {total / len(xt):.4f}")
    model.eval()


def export(model: nn.Module, path: Path) -> None:
    """Export with the dynamo exporter (weights embedded); fall back to TorchScript if it fails."""
    example = (torch.zeros(2, 1, 8, 8),)  # batch 2: torch.export specialises a batch of 1
    try:
        torch.onnx.export(
            model, example, str(path), dynamo=True, external_data=False,
            input_names=["image"], output_names=["logits"], opset_version=OPSET,
            dynamic_shapes=({0: torch.export.Dim("batch")},), verbose=False,
        )
    except Exception as exc:  # any dynamo failure -> legacy exporter
        warnings.warn(f"dynamo ONNX export failed ({exc!r}); using the TorchScript exporter",
                      stacklevel=2)
        torch.onnx.export(
            model, example, str(path), dynamo=False, input_names=["image"],
            output_names=["logits"], opset_version=17,
            dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
        )
    side = path.with_name(path.name + ".data")
    if side.exists():
        raise RuntimeError(f"expected weights inside {path.name}, got a side file {side.name}")


def verify(model: nn.Module, path: Path, x: np.ndarray, y: np.ndarray) -> float:
    """Check the ONNX graph, run it in onnxruntime and compare with torch; return accuracy."""
    onnx.checker.check_model(str(path), full_check=True)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = ([i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()])
    if names != (["image"], ["logits"]):
        raise RuntimeError(f"expected io names (['image'], ['logits']), got {names}")
    got = sess.run(["logits"], {"image": x})[0]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    diff = float(np.abs(got - want).max())
    print(f"onnxruntime vs torch: max abs logit diff {diff:.2e}")
    if diff > 1e-4:
        raise RuntimeError(f"expected onnxruntime logits within 1e-4 of torch, got {diff:.2e}")
    return float((got.argmax(1) == y).mean())


def write_samples(folder: Path, x: np.ndarray, y: np.ndarray) -> None:
    """Two held-out digits per class as native 8x8 grayscale PNGs (pixel = round(x*255))."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()  # stale samples from an earlier split would mislabel the folder
    per_class = N_SAMPLES // 10
    picks = [int(i) for c in range(10) for i in np.flatnonzero(y == c)[:per_class]]
    for i in picks:
        pixels = np.round(x[i, 0] * 255.0).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{y[i]}_{i:04d}.png")  # 2-D uint8 -> mode "L"
    (folder / "README.md").write_text(
        f"{len(picks)} held-out scikit-learn digits (load_digits, 8x8, pixel = round(v/16*255)) "
        "written by ../train_digits.py; the file name is <label>_<row in ../digits.npz>.png.\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--epochs", type=int, default=60)
    args = ap.parse_args()
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.perf_counter()
    seed_everything(SEED)
    x_tr, x_te, y_tr, y_te = load_split()
    print(f"digits: {len(x_tr)} train / {len(x_te)} held out")
    model = DigitsCNN()
    n_params = sum(p.numel() for p in model.parameters())
    train(model, x_tr, y_tr, args.epochs)
    t_train = time.perf_counter() - t0

    onnx_path = out / "digits_cnn.onnx"
    export(model, onnx_path)
    acc = verify(model, onnx_path, x_te, y_te)
    print(f"float held-out accuracy (onnxruntime): {acc:.4f}")
    np.savez_compressed(out / "digits.npz", x=x_te, y=y_te)
    write_samples(out / "samples", x_te, y_te)

    print(
        f"SUMMARY params={n_params} held_out_acc={acc:.4f} "
        f"onnx_bytes={onnx_path.stat().st_size} train_s={t_train:.1f} "
        f"total_s={time.perf_counter() - t0:.1f}"
    )


if __name__ == "__main__":
    main()
