"""The session under a ``Model``: one live backend, swapped atomically, and the recorder of
its executions. The tuner and the batcher depend on it through ``SessionLike`` (never on
``Model``), so ``edgekit.model`` sits above them and no import cycle is needed.

The options of ``edgekit.load`` are ``edgekit.runtime.options.RuntimeOptions``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from time import perf_counter
from typing import Any, Protocol

import numpy as np

from edgekit.artifact.manifest import ModelEntry
from edgekit.backends import Backend, BackendOptions, TensorSpec
from edgekit.backends.base import MEMORY_ALLOWANCE
from edgekit.errors import EdgekitError, InferenceError, InputError, UserError
from edgekit.numerics.drift import DriftWatch
from edgekit.numerics.finite import all_finite, nonfinite_error
from edgekit.runtime.run_bounds import bound_runs
from edgekit.runtime.stats import Recorder

_FLOAT_KINDS = ("f",)


class SessionLike(Protocol):
    """What the tuner and the batcher need from the layer that runs the model."""

    @property
    def backend(self) -> Backend: ...

    @property
    def recorder(self) -> Recorder: ...

    @property
    def runtime(self) -> str: ...

    @property
    def inputs(self) -> list[TensorSpec]: ...

    @property
    def outputs(self) -> list[TensorSpec]: ...

    def make_backend(self, options: BackendOptions) -> Backend: ...

    def swap(self, backend: Backend, close: bool = True) -> Backend: ...

    def prepare_feeds(self, x: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def run_feeds(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...

    def probing(self) -> contextlib.AbstractContextManager[None]: ...

    def format_outputs(self, results: list[np.ndarray]
                       ) -> np.ndarray | dict[str, np.ndarray]: ...


class Session:
    """One model's live backend session, its I/O contract and its execution recorder."""

    def __init__(self, model_bytes: bytes, entry: ModelEntry, backend_class: type[Backend],
                 inputs: list[TensorSpec], outputs: list[TensorSpec],
                 allow_nonfinite: bool = False, exact_int8: bool = True) -> None:
        self.entry = entry
        self.allow_nonfinite = allow_nonfinite
        self.exact_int8 = exact_int8
        self.backend_class = backend_class
        self.inputs = inputs
        self.outputs = outputs
        self.recorder = Recorder()
        self.fixed_batch = inputs[0].fixed_batch if inputs else None
        self._model_bytes = model_bytes
        self._names = {s.name for s in inputs}
        self._backend: Backend | None = None
        self._listeners: list[Callable[[Backend], None]] = []
        self.drift: DriftWatch | None = None  # counts each run's inputs/outputs (Model sets it)
        # bytes one declared tensor may take (edgekit/artifact/memory_budget.py; None: unchecked)
        self.memory_allowance: int | None = None
        # seconds every run of this model may take (None: unbounded; edgekit/runtime/run_bounds.py)
        self.run_bound_s: float | None = None

    @property
    def runtime(self) -> str:
        return self.backend_class.name

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            raise UserError("the session has no backend yet (expected start() first)")
        return self._backend

    def make_backend(self, options: BackendOptions) -> Backend:
        """A new backend for this model (threads are fixed per backend by every runtime)."""
        extra = dict(options.extra)
        if not self.exact_int8:  # every backend of the session, the tuner's too
            extra["exact_int8"] = False
        if self.memory_allowance is not None and MEMORY_ALLOWANCE not in extra:
            extra[MEMORY_ALLOWANCE] = self.memory_allowance
        if extra != options.extra:
            options = replace(options, extra=extra)
        backend = self.backend_class(self._model_bytes, self.inputs, self.outputs, options,
                                     entry=self.entry.data)
        if self.run_bound_s is not None:  # a model that can loop without end
            bound_runs(backend, self.run_bound_s)
        return backend

    def start(self, backend: Backend) -> None:
        self._set(backend)

    def on_swap(self, listener: Callable[[Backend], None]) -> None:
        """Call ``listener(new_backend)`` on every swap (and now, if a backend is live)."""
        self._listeners.append(listener)
        if self._backend is not None:
            listener(self._backend)

    def swap(self, backend: Backend, close: bool = True) -> Backend:
        """Replace the live backend; callers already inside a run finish on the old one.
        ``close=False`` leaves closing the old one to the caller (the tuner, after a grace)."""
        old = self.backend
        self._set(backend)
        if close:
            old.close()
        return old

    def _set(self, backend: Backend) -> None:
        # run_feeds reads only ``_backend`` (one attribute store), and each listener keeps
        # its own single-store view: a concurrent caller sees the old backend or the new one.
        self._backend = backend
        for listener in self._listeners:
            listener(backend)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()

    # -- inference --------------------------------------------------------------------
    def prepare_feeds(self, x: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Check names, shapes and dtypes against the manifest; return float32 feeds."""
        if not isinstance(x, dict):
            if len(self.inputs) != 1:
                names = ", ".join(s.name for s in self.inputs)
                raise InputError(f"this model has {len(self.inputs)} inputs ({names}): pass a dict")
            x = {self.inputs[0].name: x}
        missing = [s.name for s in self.inputs if s.name not in x]
        extra = [k for k in x if k not in self._names]
        if missing or extra:
            raise InputError(
                f"inputs expected {[s.name for s in self.inputs]}, got {list(x)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {extra}" if extra else "")
            )
        finite = not self.allow_nonfinite
        return {spec.name: self._checked(spec, x[spec.name], finite) for spec in self.inputs}

    def _checked(self, spec: TensorSpec, value: Any, finite: bool) -> np.ndarray:
        """``check_array``, and an image in NHWC for an NCHW input: checked as its NCHW
        view; handed on as NHWC to a backend that takes it so (a .tflite laid out NHWC: no
        transpose at all), else made NCHW (one copy, as the runtime needs it)."""
        array = np.asarray(value)
        if not _is_nhwc_of(array, spec):
            return check_array(spec, array, finite)
        checked = check_array(spec, array.transpose(0, 3, 1, 2), finite)
        backend = self._backend
        if backend is not None and spec.name in backend.nhwc_inputs:
            return checked.transpose(0, 2, 3, 1)
        return np.ascontiguousarray(checked)

    def run_feeds(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run validated feeds; a fixed batch-1 model runs a larger batch row by row."""
        backend = self._backend  # read once: the tuner may swap backends concurrently
        assert backend is not None, "run_feeds() before start()"
        axes = {s.name: s.batch_axis for s in self.inputs}
        first = next(iter(feeds.items()), None)
        batch = (first[1].shape[axes.get(first[0], 0)] if first is not None and first[1].ndim
                 else 1)
        fixed = self.fixed_batch
        t0 = perf_counter()
        try:
            if fixed is None or batch == fixed:
                results = backend.run(feeds)
            else:  # each row on its input's batch axis (one shared row, e.g. a sample rate,
                # goes to every row); outputs joined on their batch axes
                rows = [backend.run({k: np.take(v, [i if v.shape[axes.get(k, 0)] > 1 else 0],
                                                axis=axes.get(k, 0))
                                     for k, v in feeds.items()}) for i in range(batch)]
                results = [np.concatenate([r[j] for r in rows], axis=spec.batch_axis)
                           for j, spec in enumerate(self.outputs)]
        except EdgekitError:
            raise
        except Exception as exc:  # the runtime's own exception types: one typed error
            raise inference_error(backend.name, feeds, exc) from exc
        # hot-path bookkeeping for stats() and the tuner: four numbers into a ring buffer
        self.recorder.add(t0, perf_counter(), batch, backend.options.threads)
        drift = self.drift
        if drift is not None:
            drift.observe(feeds, results)
        return results

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """Runs inside are the runtime's own probes, not the device's requests: the recorder
        keeps them out of the samples and the drift watch out of its counts."""
        with self.recorder.uncounted(), (self.drift.paused() if self.drift is not None
                                         else contextlib.nullcontext()):
            yield

    def format_outputs(self, results: list[np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        if len(results) == 1:
            return results[0]
        return {spec.name: value for spec, value in zip(self.outputs, results, strict=True)}


def _is_nhwc_of(array: np.ndarray, spec: TensorSpec) -> bool:
    """A 4-D array whose shape is the NHWC form of an NCHW image input's (and not also its
    NCHW shape: then it is read as NCHW, the manifest's layout)."""
    if array.ndim != 4 or spec.layout != "NCHW" or len(spec.shape) != 4:
        return False
    _, c, h, w = spec.shape
    nhwc = all(not isinstance(want, int) or want <= 0 or want == got
               for want, got in zip((h, w, c), array.shape[1:], strict=True))
    nchw = all(not isinstance(want, int) or want <= 0 or want == got
               for want, got in zip((c, h, w), array.shape[1:], strict=True))
    return nhwc and not nchw


def inference_error(runtime: str, feeds: dict[str, np.ndarray], exc: BaseException
                    ) -> InferenceError:
    """The typed error for a runtime failure, naming the runtime and the input it ran."""
    described = ", ".join(f"{name} {describe_array(a)}" for name, a in feeds.items())
    return InferenceError(f"{runtime} failed running input {described}: "
                          f"{type(exc).__name__}: {exc}")


def describe_array(a: np.ndarray) -> str:
    return f"{a.dtype}{_dims(a.shape)}"


def check_array(spec: TensorSpec, value: Any, finite: bool = True) -> np.ndarray:
    """The input as a float32 contiguous array, or ``InputError``: wrong dtype or shape,
    no element, or (when ``finite``) a NaN or infinite element."""
    array = np.asarray(value)
    passed = not spec.dtype.startswith("float")  # ids, masks, sample rates: fed as they are
    if passed and array.dtype.kind not in "iub":
        raise InputError(f"input {spec.name!r}: expected dtype {spec.dtype} (integers), got "
                         f"{array.dtype}")
    if not passed and array.dtype.kind not in _FLOAT_KINDS:
        raise InputError(
            f"input {spec.name!r}: expected dtype {spec.dtype} (any float accepted), "
            f"got {array.dtype}"
        )
    if array.ndim != len(spec.shape):
        raise InputError(
            f"input {spec.name!r}: expected shape {_dims(spec.shape)} "
            f"({len(spec.shape)} dims, layout {spec.layout or 'as exported'}), got "
            f"{_dims(array.shape)} ({array.ndim} dims)"
        )
    for axis, (want, got) in enumerate(zip(spec.shape, array.shape, strict=True)):
        if axis == spec.batch_axis and isinstance(want, int) and want == 1:
            continue  # fixed batch 1 models accept larger batches, run row by row
        if isinstance(want, int) and want > 0 and want != got:
            raise InputError(
                f"input {spec.name!r}: expected shape {_dims(spec.shape)}"
                f"{' ' + spec.layout if spec.layout else ''}, got {_dims(array.shape)} "
                f"(axis {axis}: expected {want}, got {got})"
            )
    if array.size == 0:  # every runtime treats this differently: refuse it alike
        raise InputError(f"input {spec.name!r}: expected at least one element, got shape "
                         f"{_dims(array.shape)}")
    want = np.dtype(spec.dtype) if passed else np.float32
    if array.dtype != want:
        array = array.astype(want)
    if finite and not passed and not all_finite(array):
        raise nonfinite_error(spec.name, array)
    return np.ascontiguousarray(array)


def _dims(shape: tuple) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
