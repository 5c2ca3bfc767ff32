"""The task metric on the target's emulated CPU next to the host's (``edgekit emulate --val``).

Both sides run the same artifact on the same held-out inputs one sample at a time, as a
device serves them: the host on its installed runtimes (onnxruntime unfused where its int8
kernels saturate, as ``verify`` does), the guest under QEMU with the profile's CPU. The
metric is passed in (``converters/metrics``), called as ``metric(host, host, labels)`` for
the host's score and ``metric(host, emulated, labels)`` for the target's, so any metric
with the ``(reference, candidate, labels)`` contract works, labels or not.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from edgekit.converters.emulation.builder import Progress
from edgekit.converters.emulation.session import _quiet, emulated_outputs

from edgekit.errors import UserError

LABEL_KEYS = ("y", "labels")


@dataclass(frozen=True)
class TargetScore:
    format: str
    runtime: str
    metric: str
    unit: str
    host: float
    emulated: float
    samples: int
    labelled: bool = True  # without labels the host's score is its agreement with itself: 1

    @property
    def drop_points(self) -> float | None:
        """Host minus target, in points, for shares (accuracy, agreement); else None."""
        return (self.host - self.emulated) * 100.0 if self.unit in ("accuracy", "agreement",
                                                                     "share") else None

    def line(self, cpu: str) -> str:
        drop = self.drop_points
        shown = (lambda v: f"{v:.2%}") if drop is not None else (lambda v: f"{v:.4g}")
        tail = f", {drop:+.2f} points lost on the target" if drop is not None else ""
        if not self.labelled:
            return (f"{self.format} on {self.runtime}: {self.metric} ({self.unit}) of the "
                    f"emulated {cpu} against the host's outputs (no labels in --val): "
                    f"{shown(self.emulated)} over {self.samples} samples{tail}")
        return (f"{self.format} on {self.runtime}: {self.metric} ({self.unit}) host "
                f"{shown(self.host)}, emulated {cpu} {shown(self.emulated)} over "
                f"{self.samples} samples{tail}")


def load_val(path: str | os.PathLike[str], input_names: list[str], limit: int
             ) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Inputs (arrays named by input, or ``x`` for a one-input model) and labels (``y``)."""
    try:
        data = np.load(path)
    except (OSError, ValueError) as exc:
        raise UserError(f"--val {path}: expected a .npz of arrays named by input (or x) with "
                        f"labels as y, could not read it: {exc}") from exc
    with data:
        feeds = {}
        for name in input_names:
            key = name if name in data.files else ("x" if len(input_names) == 1 else None)
            if key is None or key not in data.files:
                raise UserError(f"--val {path}: no array for input {name!r}; it holds "
                                f"{', '.join(data.files)}")
            feeds[name] = np.asarray(data[key][:limit], np.float32)
        labels = next((np.asarray(data[k][:limit]) for k in LABEL_KEYS if k in data.files), None)
    return feeds, labels


def host_outputs(path: str | os.PathLike[str], feeds: dict[str, np.ndarray]
                 ) -> dict[str, tuple[str, list[np.ndarray]]]:
    """``{format: (runtime, outputs in manifest order)}`` on this host's runtimes."""
    from edgekit.artifact.archive import read_artifact
    from edgekit.backends import backends_for
    from edgekit.model import Model

    artifact = read_artifact(path)
    # as the guest runs them (guest.outputs): each input's rows on its batch axis, each
    # output joined on its own
    axes = {i.name: i.data.get("batch_axis", 0) for i in artifact.spec.inputs}
    out_axes = [o.data.get("batch_axis", 0) for o in artifact.spec.outputs]
    first = next(iter(feeds))
    count = feeds[first].shape[axes.get(first, 0)]
    found = {}
    for entry in artifact.spec.models:
        usable = [c for c in backends_for(entry.format) if c.available()]
        if not usable:
            continue
        model = Model(artifact, backend=usable[0].name)
        rows = [model.run_feeds(model.prepare_feeds(
            {k: np.take(v, [i], axis=axes.get(k, 0)) for k, v in feeds.items()}))
            for i in range(count)]
        model.close()
        found[entry.format] = (usable[0].name, [np.concatenate([r[j] for r in rows], axis=a)
                                                for j, a in enumerate(out_axes)])
    return found


Metric = Callable[..., Any]  # (reference, candidate, labels) -> MetricResult


def scores_on_target(path: str | os.PathLike[str], profile: Any, feeds: dict[str, np.ndarray],
                     labels: np.ndarray | None, metric: Metric, metric_name: str,
                     progress: Progress = _quiet, timeout: float = 3600.0
                     ) -> tuple[list[TargetScore], dict[str, Any]]:
    """The metric per format, host and emulated target side by side; and the guest's report."""
    from edgekit.artifact.archive import read_artifact

    spec = read_artifact(path).spec
    names = [o.name for o in spec.outputs]
    out_axes = [o.data.get("batch_axis", 0) for o in spec.outputs]
    host = host_outputs(path, feeds)
    emulated, guest = emulated_outputs(path, profile, feeds, progress=progress, timeout=timeout)
    scores = []
    count = len(next(iter(feeds.values())))
    for fmt, (runtime, ref) in host.items():
        if fmt not in emulated:
            continue
        # the metric reads samples first
        ref = [np.moveaxis(r, a, 0) for r, a in zip(ref, out_axes, strict=True)]
        got = [np.moveaxis(emulated[fmt][n], a, 0) for n, a in zip(names, out_axes, strict=True)]
        on_host, on_target = metric(ref, ref, labels), metric(ref, got, labels)
        scores.append(TargetScore(fmt, runtime, metric_name, on_target.unit,
                                  float(on_host.score), float(on_target.score), count,
                                  labelled=labels is not None))
    return scores, guest
