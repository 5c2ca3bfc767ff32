"""Run an ONNX model over a whole ``Dataset`` with onnxruntime (host-side helper).

A build runs the same model over the same samples several times (the float reference for
the packed-output check, bias correction, validation and the accuracy decision; the chosen
int8 model for bias correction's error, validation and the decision): ``run_dataset`` keeps
the outputs of a model file or bytes by content (model bytes, samples, ``exact_int8``), so
each pair runs once per process (EfficientNet-Lite0, 64 images: five float passes became
one, ``tools/benchmarks/bench_build.py``).
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.core.interrupt import interruptible

from edgekit.device.cpu import (
    ORT_DISABLED_OPTIMIZERS,
    UNFUSED_FOLD_WEIGHTS,
    exact_int8_needs_unfused,
)

BATCH = 32
# onnxruntime's worker threads spin after each parallel section, waiting for the next: on a
# shared 2-core host they take the core our own thread (or another process) needs, and a
# descheduled spinner stalls the next section. Off: the same partitioning, so the same
# outputs bit for bit; EfficientNet-Lite0's 64-image float pass at load 9: 3.2 -> 1.9 s
# (tools/benchmarks/bench_build.py, docs/measurements/build.md).
NO_SPINNING = ("session.intra_op.allow_spinning", "0")
# outputs kept across calls at most; an entry over half of it is not kept. A CTC recognizer's
# logits over 64 samples are ~134 MB (64 x 64 steps x 8210 classes), a classifier's 0.3 MB.
CACHE_BYTES = 512 * 2**20
_outputs: OrderedDict[tuple[str, str, bool], list[np.ndarray]] = OrderedDict()
_outputs_lock = threading.Lock()  # a caller's threads may share it


def session(model: str | Path | bytes, threads: int = 0, exact_int8: bool = False,
            quiet: bool = False) -> Any:
    """An onnxruntime session. ``exact_int8``: compute a QDQ model's int8 math exactly on this
    CPU, unfused where its fused kernels saturate (``edgekit.device.cpu``): what validation and test
    vectors need, since the board's kernels do not saturate. ``quiet``: a trial whose failure
    is expected and handled logs nothing (onnxruntime prints a failed run's error itself)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    unfused = exact_int8 and exact_int8_needs_unfused(False)
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC if unfused
                                   else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    if unfused:
        so.add_session_config_entry(*UNFUSED_FOLD_WEIGHTS)
    so.intra_op_num_threads = threads
    so.add_session_config_entry(*NO_SPINNING)
    so.log_severity_level = 4 if quiet else 3
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, sess_options=so, providers=["CPUExecutionProvider"],
                                disabled_optimizers=ORT_DISABLED_OPTIMIZERS)


def run_dataset(model: str | Path | bytes | Any, data: Dataset,
                exact_int8: bool = False) -> list[np.ndarray]:
    """Outputs for every sample in graph output order, samples first: each output's runs
    joined on its own batch axis (``data.out_axes``: a recurrent state ``[L, N, H]`` on 1, a
    CTC model's ``[T, N, C]`` logits on 1) and that axis moved to the front.

    A model given as a path or bytes is run once per content: the next call with the same
    model bytes, samples and ``exact_int8`` gets copies of the same outputs."""
    if hasattr(model, "run"):
        return _run(model, data)
    key = (_model_digest(model), data_digest(data), exact_int8)
    with _outputs_lock:
        kept = _outputs.get(key)
        if kept is not None:
            _outputs.move_to_end(key)
            return [v.copy() for v in kept]
    values = _run(session(model, exact_int8=exact_int8), data)
    if sum(v.nbytes for v in values) <= CACHE_BYTES // 2:
        with _outputs_lock:
            _outputs[key] = [v.copy() for v in values]
            while sum(a.nbytes for vs in _outputs.values() for a in vs) > CACHE_BYTES:
                _outputs.popitem(last=False)
    return values


def _model_digest(model: str | Path | bytes) -> str:
    return hashlib.sha256(model if isinstance(model, bytes) else Path(model).read_bytes()).hexdigest()


def data_digest(data: Dataset) -> str:
    """The samples' identity by content: names, dtypes, shapes, bytes and batch axes.

    Kept per memory layout (``_layout``): a build hashes the same 64 images (38 MB for
    EfficientNet-Lite0) for every pass it keeps or looks up, eight times, through datasets that
    are views of one another (``take(slice(0, 64))``). Samples are never written in place once
    loaded (a stage that changes them makes new arrays), so the same memory still holds the
    same bytes while the array owning it is alive; a weak reference to that owner ends the
    entry with it, before its memory can hold other samples."""
    layout = _layout(data)
    if layout is not None:
        with _outputs_lock:
            kept = _digests.get(layout[0])
            if kept is not None and all(ref() is not None for ref in kept[0]):
                _digests.move_to_end(layout[0])
                return kept[1]
    digest = hashlib.sha256(repr((sorted(data.axes.items()),
                                  sorted(data.out_axes.items()))).encode())
    for name in sorted(data.arrays):
        array = np.ascontiguousarray(data.arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}".encode())
        digest.update(repr(array.tolist()).encode() if array.dtype.hasobject
                      else memoryview(array).cast("B"))
    found = digest.hexdigest()
    if layout is not None:
        with _outputs_lock:
            _digests[layout[0]] = (layout[1], found)
            while len(_digests) > KEPT_DIGESTS:
                _digests.popitem(last=False)
    return found


KEPT_DIGESTS = 8
_digests: OrderedDict[tuple[Any, ...], tuple[list[weakref.ref[np.ndarray]], str]] = OrderedDict()


def _layout(data: Dataset) -> tuple[tuple[Any, ...], list[weakref.ref[np.ndarray]]] | None:
    """Where and how the samples lie in memory (address, shape, strides, dtype of each array,
    the batch axes) and weak references to the arrays owning that memory; None when an
    array does not own its memory through numpy (a buffer of another kind) or holds objects."""
    key: list[Any] = [tuple(sorted(data.axes.items())), tuple(sorted(data.out_axes.items()))]
    owners = []
    for name in sorted(data.arrays):
        array = data.arrays[name]
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            return None
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if owner.base is not None:  # memory of a bytes object, an mmap, ...: not tracked
            return None
        key.append((name, array.__array_interface__["data"][0], array.shape, array.strides,
                    array.dtype.str))
        owners.append(weakref.ref(owner))
    return tuple(key), owners


def _run(sess: Any, data: Dataset) -> list[np.ndarray]:
    fixed = [i.shape[data.axes.get(i.name, 0)] for i in sess.get_inputs() if i.shape]
    batch = 1 if any(isinstance(d, int) for d in fixed) else BATCH
    chunks: list[list[np.ndarray]] = []
    for start in range(0, len(data), batch):
        chunks.append(interruptible(sess.run, None, data.feeds(start, start + batch)))
    axes = [data.out_axes.get(o.name, 0) for o in sess.get_outputs()]
    return samples_first(chunks, axes)


def joined(runs: list[list[np.ndarray]], axes: list[int]) -> list[np.ndarray]:
    """The outputs of several runs (each a list in output order) as one run would give them:
    output ``j`` joined on its batch axis ``axes[j]``, in the model's own layout (what test
    vectors store and the device's ``run_feeds`` returns)."""
    return [np.concatenate([r[j] for r in runs], axis=axes[j]) if len(runs) > 1 else runs[0][j]
            for j in range(len(runs[0]))]


def samples_first(runs: list[list[np.ndarray]], axes: list[int]) -> list[np.ndarray]:
    """``joined``, then each output's batch axis moved to the front: one row per sample,
    as the build's metrics read them."""
    return [np.ascontiguousarray(np.moveaxis(v, a, 0)) if a else v
            for v, a in zip(joined(runs, axes), axes, strict=True)]


def one_by_one(feeds: dict[str, np.ndarray], axes: dict[str, int] | None = None
               ) -> list[dict[str, np.ndarray]]:
    """``feeds`` as single-sample feeds, each input cut on its batch axis (``axes``; 0 when
    not named: a recurrent state ``[L, N, H]`` is cut on 1): a model may fix its batch at 1."""
    axes = axes or {}
    first = next(iter(feeds))
    count = feeds[first].shape[axes.get(first, 0)]
    if count == 1:
        return [feeds]
    return [{k: np.take(v, [i], axis=axes.get(k, 0)) for k, v in feeds.items()}
            for i in range(count)]


def is_classifier(output: np.ndarray) -> bool:
    """Logits or probabilities: [N, classes] with more than one class."""
    return output.ndim == 2 and output.shape[1] > 1


def compare(reference: np.ndarray, candidate: np.ndarray,
            labels: np.ndarray | None = None) -> dict[str, float]:
    """Agreement of a candidate output with the float reference (and labels when known)."""
    ref = reference.reshape(len(reference), -1).astype(np.float64)
    got = candidate.reshape(len(candidate), -1).astype(np.float64)
    norms = np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1)
    cosine = np.where(norms > 0, (ref * got).sum(axis=1) / np.maximum(norms, 1e-30), 1.0)
    metrics = {
        "cosine": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "max_abs_error": float(np.abs(ref - got).max()),
        "mean_abs_error": float(np.abs(ref - got).mean()),
    }
    if is_classifier(reference):
        metrics["top1_agreement"] = float((ref.argmax(1) == got.argmax(1)).mean())
        if labels is not None:
            metrics["accuracy_float"] = float((ref.argmax(1) == labels).mean())
            metrics["accuracy_int8"] = float((got.argmax(1) == labels).mean())
    return metrics
