"""Train a small conv-only CTC recognizer on lines of scikit-learn digits (CPU, one thread, minutes).

Conv stack down to one row of 40 time steps, then a temporal 1x3 conv and a 1x1 classifier
to 11 symbols (blank = index 0, digit d = index d + 1). Conv-only (no GRU) so every layer
has an int8 kernel in both formats. Output: logits ``[N, 40, 11]``.

    python tools/train_ctc.py               # trains, writes tools/trained/ctc.{pt,onnx}
    python tools/train_ctc.py --eval-only   # reloads the weights, prints held-out figures

Held-out figures: lines composed only of digits the model never saw in training, greedy
decoded, against the true strings: exact-match rate and character error rate.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import digit_scenes  # noqa: E402
from training import fit, train_or_load  # noqa: E402

BLANK, SYMBOLS = 0, 11
OUT = HERE / "trained"


def block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class Recognizer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # 16 x 160 -> 8 x 80 -> 4 x 40 -> 1 x 40; 4-D throughout (1 x k convs along time),
        # so the .tflite writer, which writes 2-D convolutions, covers every layer
        self.body = nn.Sequential(block(1, 32), nn.MaxPool2d(2), block(32, 64), nn.MaxPool2d(2),
                                  block(64, 64), nn.MaxPool2d((4, 1)))
        self.temporal = nn.Sequential(nn.Conv2d(64, 96, (1, 3), 1, (0, 1), bias=False), nn.BatchNorm2d(96),
                                      nn.ReLU())
        self.classify = nn.Conv2d(96, SYMBOLS, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.temporal(self.body(x))                       # [N, 96, 1, T]
        return self.classify(f).squeeze(2).transpose(1, 2)   # [N, T, 11] logits


def train(steps: int, seed: int) -> Recognizer:
    torch.manual_seed(seed)
    data = digit_scenes.lines(8000, "train", seed)
    images = torch.from_numpy(data.images)
    targets = [torch.tensor([d + 1 for d in t]) for t in data.texts]
    model = Recognizer()
    ctc = nn.CTCLoss(blank=BLANK, zero_infinity=True)

    def batch_loss(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logp = model(images[idx]).log_softmax(-1).transpose(0, 1)  # [T, N, C]
        batch = [targets[i] for i in idx.tolist()]
        loss = ctc(logp, torch.cat(batch), torch.full((len(idx),), logp.shape[0]),
                   torch.tensor([len(t) for t in batch]))
        return loss, {"ctc": loss}

    return fit(model, len(images), steps, batch_loss)


def heldout(count: int = 500) -> digit_scenes.Lines:
    return digit_scenes.lines(count, "heldout", seed=4321)


def evaluate(model: Recognizer) -> dict[str, float]:
    from edgekit.converters.metrics import ctc

    held = heldout()
    with torch.no_grad():
        logits = model(torch.from_numpy(held.images)).numpy()
    truths = [[d + 1 for d in t] for t in held.texts]
    result = ctc.against_labels(logits, truths, blank=BLANK)
    return {"exact": result.exact_match, "cer": result.cer}


def export(model: Recognizer, path: Path) -> None:
    example = torch.zeros(1, 1, digit_scenes.LINE_HEIGHT, digit_scenes.LINE_WIDTH)
    torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=17,
                      input_names=["line"], output_names=["logits"])


def main() -> None:
    model = train_or_load(__doc__, 900, Recognizer, train, export, OUT, "ctc")
    figures = evaluate(model)
    print(f"held-out lines: exact match {figures['exact']:.3f}  CER {figures['cer']:.2%}")


if __name__ == "__main__":
    main()

