"""Train a small YOLO-style digit detector on scikit-learn digit scenes (CPU, one thread, minutes).

The model is anchor-free on a 16x16 grid (stride 8 on a 128x128 canvas) and exports the
output the way YOLOv8 does: one packed tensor ``[N, 4 + 10, 256]`` = box centre and size in
pixels (0..128) concatenated with sigmoid class probabilities (0..1). That Concat of two
ranges is what one int8 scale cannot hold (issue 14).

    python tools/train_detector.py              # trains, writes tools/trained/detector.{pt,onnx}
    python tools/train_detector.py --eval-only  # reloads the weights, prints held-out figures

Held-out figures: scenes composed only of digits the model never saw in training, matched
against the true boxes at IoU >= 0.5 with the same class (recall, precision).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import digit_scenes  # noqa: E402
from training import fit, train_or_load  # noqa: E402

CLASSES, STRIDE, MAX_WH = 10, 8, 40.0
GRID = digit_scenes.CANVAS // STRIDE
OUT = HERE / "trained"


def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class Detector(nn.Module):
    """A few convs to a stride-8 grid; per cell a box (decoded in the graph) and class scores."""

    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        self.body = nn.Sequential(block(1, 16, 2), block(16, 32, 2), block(32, 48, 2),
                                  block(48, 64), block(64, 64))
        self.box = nn.Conv2d(64, 4, 1)
        self.cls = nn.Conv2d(64, classes, 1)
        ys, xs = torch.meshgrid(torch.arange(GRID), torch.arange(GRID), indexing="ij")
        centres = torch.stack([xs.flatten(), ys.flatten()]).float().add(0.5).mul(STRIDE)
        self.register_buffer("centres", centres[None])  # [1, 2, anchors]

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Decoded boxes [N, 4, A] in pixels and class logits [N, classes, A]."""
        f = self.body(x)
        raw = self.box(f).flatten(2)
        xy = self.centres + (torch.sigmoid(raw[:, :2]) * 2 - 1) * (1.5 * STRIDE)
        wh = torch.sigmoid(raw[:, 2:]) * MAX_WH
        return torch.cat([xy, wh], 1), self.cls(f).flatten(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        boxes, logits = self.heads(x)
        return torch.cat([boxes, torch.sigmoid(logits)], 1)  # packed, as YOLOv8 exports


def targets(scenes: digit_scenes.Scenes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per scene and anchor: one-hot class target, box target, positive mask.

    A cell is positive for a digit when its centre lies in the digit's central region
    (at least the cell holding the centre): centre sampling, as anchor-free YOLOs do."""
    n = len(scenes.images)
    cls = np.zeros((n, CLASSES, GRID * GRID), np.float32)
    box = np.zeros((n, 4, GRID * GRID), np.float32)
    pos = np.zeros((n, GRID * GRID), bool)
    centres = (np.stack(np.meshgrid(np.arange(GRID), np.arange(GRID), indexing="xy")).reshape(2, -1) + 0.5) * STRIDE
    for i, (boxes, classes) in enumerate(zip(scenes.boxes, scenes.classes, strict=True)):
        best = np.full(GRID * GRID, np.inf)
        for (cx, cy, w, h), c in zip(boxes, classes, strict=True):
            dist = np.maximum(np.abs(centres[0] - cx) / max(w / 4, STRIDE / 2),
                              np.abs(centres[1] - cy) / max(h / 4, STRIDE / 2))
            mine = (dist <= 1) & (dist < best)
            best[mine] = dist[mine]
            cls[i, :, mine] = 0
            cls[i, c, mine] = 1
            box[i, :, mine] = (cx, cy, w, h)
            pos[i, mine] = True
    return cls, box, pos


def train(steps: int, seed: int) -> Detector:
    torch.manual_seed(seed)
    data = digit_scenes.scenes(8000, "train", seed)
    cls_t, box_t, pos_t = (torch.from_numpy(a) for a in targets(data))
    images = torch.from_numpy(data.images)
    model = Detector()
    bce = nn.BCEWithLogitsLoss(reduction="sum")

    def batch_loss(idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        boxes, logits = model.heads(images[idx])
        pos = pos_t[idx]
        npos = max(int(pos.sum()), 1)
        cls_loss = bce(logits, cls_t[idx]) / npos
        err = (boxes - box_t[idx]).abs().sum(1) / STRIDE
        box_loss = (err * pos).sum() / npos
        return cls_loss + box_loss, {"cls": cls_loss, "box": box_loss}

    return fit(model, len(images), steps, batch_loss)


def evaluate(model: Detector, count: int = 300) -> dict[str, float]:
    from edgekit.converters.metrics import detection

    held = digit_scenes.scenes(count, "heldout", seed=1234)
    with torch.no_grad():
        packed = model(torch.from_numpy(held.images)).numpy()
    result = detection.against_labels(packed, held.boxes, held.classes)
    return {"recall": result.recall, "precision": result.precision, "truths": result.reference_count}


def export(model: Detector, path: Path) -> None:
    example = torch.zeros(1, 1, digit_scenes.CANVAS, digit_scenes.CANVAS)
    torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=17,
                      input_names=["image"], output_names=["detections"])


def main() -> None:
    model = train_or_load(__doc__, 1500, Detector, train, export, OUT, "detector")
    figures = evaluate(model)
    print(f"held-out scenes: recall {figures['recall']:.3f} precision {figures['precision']:.3f} "
          f"({figures['truths']} true digits, IoU >= 0.5, same class)")


if __name__ == "__main__":
    main()
