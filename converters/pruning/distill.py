"""Distil a pruned torch model (student) towards the dense one (teacher), without labels.

The loss is the MSE on every output scaled by the teacher's variance. The data is the
user's ``--distill-data`` when given (issue 21: 32 calibration samples are too few to
teach anything and the loss went *up* on EfficientNet-Lite0), else the calibration inputs.

* **Augmentation** (image inputs: 4-D with 1 or 3 channels): random resized crops (scale
  0.5-1, aspect 3/4-4/3) and horizontal flips on ``AUGMENTED`` of each batch's samples,
  the rest as they are; the teacher labels each batch, so a flip that changes the class is
  still a correct target. The real half keeps the student matching the teacher where the
  model is used; augmenting every sample spends the student's capacity on inputs it never
  sees (a mirrored digit).
* **Held-out early stopping**: ``HELD_OUT`` of the data is kept out; its loss is measured
  every ``steps // EVALS`` steps, the best weights are kept, and training stops after
  ``PATIENCE`` evaluations without improvement.
* **Guard**: when no evaluation beats the loss before distillation, the student is left
  as it was and the report says the loss did not fall.
* **Feature targets** (``features``: module names, e.g. the refit 1x1 convs): the student's
  output of each is pulled towards the teacher's too (MSE over the teacher's variance,
  weighted ``FEATURE_WEIGHT`` in all), so that 512 crops teach every block what it must
  produce, not only the logits through twenty layers (FitNets, Romero et al. 2015).
* **Time budget** (``--distill-time``): steps stop when it is spent; the cosine learning
  rate follows whichever of steps or time runs out first.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BATCH = 32
AUGMENTED = 0.5  # share of each batch's image samples augmented; the rest stay real inputs
LEARNING_RATE = 3e-3  # with cosine decay; 1e-3 needed twice the steps on digits
HELD_OUT = 0.15
MIN_HELD_OUT = 8  # fewer samples: the held-out loss is the training data's own
EVALS = 20
PATIENCE = 4
MIN_EVAL_STEPS = 5  # with a time budget on a slow machine: steps between evaluations at least
IMPROVEMENT = 1e-3  # relative: a held-out loss must fall by this much to count
# a held-out loss this many times the best so far: the step size threw the student out of
# its minimum (MTCNN's ONet, no BatchNorm: 0.197 -> 3.4 in 5 steps at 3e-3); back to the best
# weights with a tenth of the learning rate, down to 1/1000
DIVERGED, BACKOFF, MAX_BACKOFFS = 2.0, 0.1, 3
FEATURE_WEIGHT = 1.0  # the feature terms' share against the outputs' loss


@contextlib.contextmanager
def _features(model: Any, names: list[str]) -> Iterator[dict[str, Any]]:
    """The latest output of each named module, by name, while inside."""
    found: dict[str, Any] = {}
    modules = dict(model.named_modules())

    def hook(name: str) -> Any:
        return lambda _m, _i, out: found.__setitem__(name, out)

    handles = [modules[n].register_forward_hook(hook(n)) for n in names]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


def _feature_loss(got: dict[str, Any], want: dict[str, Any], scales: dict[str, float]) -> Any:
    terms = [((got[n] - want[n]) ** 2).mean() / scales[n] for n in scales
             if n in got and n in want and got[n].shape == want[n].shape]
    return FEATURE_WEIGHT * sum(terms) / len(terms) if terms else 0.0


@dataclass
class RecoveryReport:
    distill_steps: int = 0
    distill_seconds: float = 0.0
    loss_before: float | None = None  # held-out loss
    loss_after: float | None = None
    batchnorm_layers: int = 0
    data: str = "calibration inputs, no labels"
    samples: int = 0
    held_out: int = 0
    augment: list[str] = field(default_factory=list)
    stopped: str = "step budget"  # why training ended
    backoffs: int = 0  # learning-rate cuts after a diverging evaluation
    curve: list[tuple[int, float]] = field(default_factory=list)  # step -> held-out loss

    @property
    def fell(self) -> bool:
        return (self.loss_before is not None and self.loss_after is not None
                and self.loss_after < self.loss_before * (1 - IMPROVEMENT))

    def to_dict(self) -> dict[str, Any]:
        return {"distillation": {"steps": self.distill_steps, "batch": BATCH,
                                 "learning_rate": LEARNING_RATE,
                                 "seconds": round(self.distill_seconds, 2),
                                 "loss_before": self.loss_before, "loss_after": self.loss_after,
                                 "teacher": "dense model", "data": self.data,
                                 "samples": self.samples, "held_out": self.held_out,
                                 "augment": self.augment, "stopped": self.stopped,
                                 "learning_rate_backoffs": self.backoffs,
                                 "curve": [[s, round(v, 6)] for s, v in self.curve]},
                "batchnorm_reestimated": self.batchnorm_layers}


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    import torch

    old = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _leaves(out: Any) -> list[Any]:
    from ..pytorch.inputs import flat_outputs

    return [t.float() for t in flat_outputs(out)]


def _loss(student_out: list[Any], teacher_out: list[Any], scales: list[float]) -> Any:
    total = 0.0
    for got, want, scale in zip(student_out, teacher_out, scales, strict=True):
        total = total + ((got - want) ** 2).mean() / scale
    return total


def image_axis(array: np.ndarray) -> int | None:
    """The channel axis of an image batch (NCHW -> 1, NHWC -> 3), None for other data."""
    if array.ndim != 4 or not np.issubdtype(array.dtype, np.floating):
        return None
    if array.shape[1] in (1, 3) and array.shape[2] > 3:
        return 1
    if array.shape[3] in (1, 3) and array.shape[1] > 3:
        return 3
    return None


def augment_images(batch: Any, channel_axis: int, gen: Any, share: float = 1.0) -> Any:
    """Random resized crop (scale 0.5-1, aspect 3/4-4/3) and horizontal flip on a random
    ``share`` of the samples."""
    import torch
    from torch.nn import functional as F

    x = batch if channel_axis == 1 else batch.permute(0, 3, 1, 2)
    height, width = x.shape[2], x.shape[3]
    out = []
    for sample in x:
        if float(torch.rand(1, generator=gen)) >= share:
            out.append(sample[None])
            continue
        area = height * width * float(torch.empty(1).uniform_(0.5, 1.0, generator=gen))
        aspect = math.exp(float(torch.empty(1).uniform_(math.log(3 / 4), math.log(4 / 3),
                                                        generator=gen)))
        h = max(1, min(height, round(math.sqrt(area / aspect))))
        w = max(1, min(width, round(math.sqrt(area * aspect))))
        top = int(torch.randint(0, height - h + 1, (1,), generator=gen))
        left = int(torch.randint(0, width - w + 1, (1,), generator=gen))
        crop = sample[None, :, top:top + h, left:left + w]
        crop = F.interpolate(crop, size=(height, width), mode="bilinear", align_corners=False)
        if float(torch.rand(1, generator=gen)) < 0.5:
            crop = crop.flip(-1)
        out.append(crop)
    x = torch.cat(out)
    return x if channel_axis == 1 else x.permute(0, 2, 3, 1).contiguous()


class _Bar:
    def __init__(self, total: int, enabled: bool) -> None:
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="distill", unit="step", leave=False,
                            file=sys.stderr)

    def step(self, loss: float | None = None) -> None:
        if self.bar is not None:
            self.bar.update(1)
            if loss is not None:
                self.bar.set_postfix(held_out=f"{loss:.4g}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def distill(student: Any, teacher: Any, inputs: list[np.ndarray], steps: int,
            seed: int = 0, threads: int | None = None, *, seconds: float | None = None,
            augment: bool = True, progress: bool = False,
            data: str = "calibration inputs, no labels",
            features: list[str] | None = None) -> RecoveryReport:
    """Fine-tune ``student`` in place towards ``teacher``'s outputs on ``inputs``."""
    import torch

    report = RecoveryReport(data=data)
    count = len(inputs[0])
    if steps <= 0 or count < 2:  # BatchNorm in train mode needs two samples per batch
        report.stopped = "not run: no steps or fewer than 2 samples"
        return report
    order = np.random.default_rng(seed).permutation(count)
    n_held = int(count * HELD_OUT) if count * HELD_OUT >= MIN_HELD_OUT else 0
    train_idx, held_idx = order[n_held:], order[:n_held] if n_held else order
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    train = [t[train_idx] for t in tensors]
    held = [t[held_idx] for t in tensors]
    axes = [image_axis(a) if augment else None for a in inputs]
    report.samples, report.held_out = len(train_idx), n_held
    report.augment = ["random resized crop", "horizontal flip",
                      f"on {AUGMENTED:.0%} of samples"] if any(
        a is not None for a in axes) else []
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    # train mode's dropout draws from torch's global generator: seeded here (deterministic
    # builds) inside fork_rng, so that the caller's generator state is left as it was
    with torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        teacher.eval()
        with torch.no_grad(), _features(teacher, features or []) as seen:
            held_targets = _batched(teacher, held)  # the features seen: its last chunk's
            feature_scales = {n: max(float(v.var()), 1e-8) for n, v in seen.items()}
            plain_targets = None if report.augment else _batched(teacher, train)
        scales = [max(float(t.var()), 1e-8) for t in held_targets]
        student_seen = contextlib.ExitStack()
        got_features = student_seen.enter_context(_features(student, list(feature_scales)))
        want_features = student_seen.enter_context(_features(teacher, list(feature_scales)))

        def held_loss() -> float:
            student.eval()
            with torch.no_grad():
                got = _batched(student, held)
            student.train()
            return float(_loss(got, held_targets, scales))

        best_loss = held_loss()
        report.loss_before = round(best_loss, 6)
        report.curve.append((0, best_loss))
        best_state = copy.deepcopy(student.state_dict())
        rate = LEARNING_RATE
        optimizer = torch.optim.Adam(student.parameters(), lr=rate)
        every, stale, done = max(5, steps // EVALS), 0, 0
        last_eval, last_step = time.perf_counter(), 0
        bar = _Bar(steps, progress)
        student.train()
        try:
            for step in range(steps):
                elapsed = time.perf_counter() - start
                if seconds is not None and elapsed >= seconds:
                    report.stopped = f"time budget ({seconds:g} s)"
                    if report.curve[-1][0] != done:  # the last steps count too
                        value = held_loss()
                        report.curve.append((done, value))
                        if value < best_loss * (1 - IMPROVEMENT):
                            best_loss, best_state = value, copy.deepcopy(student.state_dict())
                    break
                share = max(step / steps, elapsed / seconds if seconds else 0.0)
                for param_group in optimizer.param_groups:
                    param_group["lr"] = rate * 0.5 * (1 + math.cos(math.pi * share))
                idx = torch.randint(0, len(train_idx), (min(BATCH, len(train_idx)),),
                                    generator=gen)
                batch = [t[idx] for t in train]
                if report.augment:
                    batch = [augment_images(b, ax, gen, AUGMENTED) if ax is not None else b
                             for b, ax in zip(batch, axes, strict=True)]
                    with torch.no_grad():
                        targets = _leaves(teacher(*batch))
                elif feature_scales:
                    with torch.no_grad():
                        teacher(*batch)
                    targets = [t[idx] for t in plain_targets]
                else:
                    targets = [t[idx] for t in plain_targets]
                loss = _loss(_leaves(student(*batch)), targets, scales) + _feature_loss(
                    got_features, want_features, feature_scales)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                done = step + 1
                value = None
                due = (seconds is not None and done - last_step >= MIN_EVAL_STEPS
                       and time.perf_counter() - last_eval >= seconds / EVALS)
                if done % every == 0 or done == steps or due:
                    last_eval, last_step = time.perf_counter(), done
                    value = held_loss()
                    report.curve.append((done, value))
                    if value < best_loss * (1 - IMPROVEMENT):
                        best_loss, stale = value, 0
                        best_state = copy.deepcopy(student.state_dict())
                    elif value > DIVERGED * best_loss and report.backoffs < MAX_BACKOFFS:
                        student.load_state_dict(best_state)
                        rate *= BACKOFF
                        optimizer = torch.optim.Adam(student.parameters(), lr=rate)
                        report.backoffs += 1
                    else:
                        stale += 1
                    if stale >= PATIENCE:
                        report.stopped = "held-out loss stopped falling (early stop)"
                        break
                bar.step(value)
        finally:
            bar.close()
            student_seen.close()
        student.load_state_dict(best_state)  # the best held-out weights, or the start's
        student.eval()
    report.loss_after = round(best_loss, 6)
    report.distill_steps = done
    report.distill_seconds = time.perf_counter() - start
    if not report.fell:
        report.stopped = ("loss did not fall: the held-out loss never went below its start "
                          f"({report.loss_before:.4g}); the pruned weights are kept as they were")
    return report


def _batched(model: Any, data: list[Any]) -> list[Any]:
    import torch

    parts = [_leaves(model(*[d[i:i + 256] for d in data])) for i in range(0, len(data[0]), 256)]
    return [torch.cat([p[j] for p in parts]) for j in range(len(parts[0]))]
