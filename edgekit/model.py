"""``edgekit.load`` and the ``Model`` it returns: numpy in, numpy out."""

from __future__ import annotations

import os
import threading
from time import perf_counter
from typing import Any

import numpy as np

from edgekit.artifact import Artifact, read_artifact
from edgekit.backends import Backend, BackendOptions, TensorSpec, backends_for, by_name
from edgekit.errors import InputError, RuntimeUnavailableError, UserError
from edgekit.policy import TunerOptions, check_policy
from edgekit.stats import SAMPLE_BELOW_S, SAMPLE_STRIDE, Recorder

_FLOAT_KINDS = ("f",)
_F32 = np.dtype(np.float32)
_NDARRAY = np.ndarray  # a module global: one lookup fewer on predict's fast path


def choose_model(artifact: Artifact, backend: str | None = None) -> tuple[dict, type[Backend]]:
    """Pick the model entry and backend class: the one whose runtime is installed, in the
    order of the target profile's preferred formats."""
    manifest = artifact.manifest
    entries = {m["format"]: m for m in manifest["models"]}
    if backend is not None:
        cls = by_name(backend)
        if cls.format not in entries:
            raise RuntimeUnavailableError(
                f"backend {backend!r} runs {cls.format} models; the artifact holds "
                f"{', '.join(entries)}"
            )
        if not cls.available():
            raise RuntimeUnavailableError(
                f"backend {backend!r} is not installed (pip install {cls.package})"
            )
        return entries[cls.format], cls
    preferred = manifest["target"]["profile"]["runtime"]["formats"]
    order = [f for f in preferred if f in entries] + [f for f in entries if f not in preferred]
    tried = []
    for fmt in order:
        for cls in backends_for(fmt):
            if cls.available():
                return entries[fmt], cls
            tried.append(f"{cls.name} (pip install {cls.package})")
    raise RuntimeUnavailableError(
        f"no installed runtime can run this artifact (it holds {', '.join(order)}); "
        f"install one of: {', '.join(tried) or 'nothing registered'}"
    )


class Model:
    """A loaded artifact, ready to predict. Use :func:`edgekit.load` to make one."""

    def __init__(self, artifact: Artifact, backend: str | None = None, threads: int | str = 0,
                 allow_spinning: bool = True, policy: str = "balanced", power_root: str = "/",
                 tuner: TunerOptions | dict[str, Any] | None = None,
                 monitor_interval_s: float = 2.0, max_batch: int = 8,
                 max_wait_ms: float | None = None, queue_size: int = 1024,
                 power_aware: bool = True) -> None:
        self.artifact = artifact
        self.manifest: dict[str, Any] = artifact.manifest
        self.entry, self.backend_class = choose_model(artifact, backend)
        self.inputs = [TensorSpec.from_manifest(e) for e in self.manifest["inputs"]]
        self.outputs = [TensorSpec.from_manifest(e) for e in self.manifest["outputs"]]
        self._model_bytes = artifact.read(self.entry["path"])
        # runtime (tuner, power monitor, batcher): see edgekit/policy.py, tuner.py, power.py, batcher.py
        self.policy = check_policy(policy)
        self.power_root = power_root
        self.monitor_interval_s = monitor_interval_s
        self._batch_options = {"max_batch": max_batch, "max_wait_ms": max_wait_ms,
                               "queue_size": queue_size, "power_aware": power_aware}
        self._recorder = Recorder()
        self._skip = 0  # predict calls left untimed before the next timed one
        self._fixed_batch = self.inputs[0].fixed_batch if self.inputs else None
        self._fast_name = self.inputs[0].name if len(self.inputs) == 1 else None
        self._fast_shapes: set[tuple[int, ...]] = set()  # shapes that passed validation
        self._single_output = len(self.outputs) == 1
        self._monitor: Any = None
        self._batcher: Any = None
        self._tuner: Any = None
        self._closed = False
        self._lock = threading.Lock()  # lazy creation of the monitor and the batcher
        if threads == "auto":
            from edgekit.policy import tuner_options
            from edgekit.tuner import ThreadTuner

            options = tuner_options(tuner)
            self._tuner = ThreadTuner(self, self.policy, self.power_monitor(), options)
            try:
                self._set_backend(self._tuner.initial())
            except BaseException:
                self._monitor.stop()
                raise
            self._tuner.start()
        else:
            if isinstance(threads, str) or int(threads) < 0:
                raise UserError(f"threads must be 'auto' or a count >= 0 (0 = runtime "
                                f"default); got {threads!r}")
            self._set_backend(self.make_backend(BackendOptions(
                threads=int(threads),
                allow_spinning=allow_spinning and self.policy != "efficiency")))

    # -- sessions ---------------------------------------------------------------------
    def make_backend(self, options: BackendOptions) -> Backend:
        """A new session of this model (threads are fixed per session by every runtime)."""
        return self.backend_class(self._model_bytes, self.inputs, self.outputs, options,
                                  entry=self.entry)

    def swap_backend(self, backend: Backend, close: bool = True) -> Backend:
        """Replace the live session; callers already inside ``predict`` finish on the old one.
        ``close=False`` leaves closing the old one to the caller (the tuner, after a grace)."""
        old = self._backend
        self._set_backend(backend)
        if close:
            old.close()
        return old

    def _set_backend(self, backend: Backend) -> None:
        # predict's fast path reads only ``_fast``, run_feeds only ``_backend``: each is one
        # attribute store, so a concurrent caller sees either the old session or the new one.
        self._backend = backend
        self._fast = (backend.run, backend.options.threads)

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def runtime(self) -> str:
        return self.backend_class.name

    @property
    def format(self) -> str:
        return self.entry["format"]

    @property
    def threads(self) -> int:
        return self._backend.options.threads

    # -- inference --------------------------------------------------------------------
    def prepare_feeds(self, x: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Check names, shapes and dtypes against the manifest; return float32 feeds."""
        if not isinstance(x, dict):
            if len(self.inputs) != 1:
                names = ", ".join(s.name for s in self.inputs)
                raise InputError(f"this model has {len(self.inputs)} inputs ({names}): pass a dict")
            x = {self.inputs[0].name: x}
        missing = [s.name for s in self.inputs if s.name not in x]
        extra = [k for k in x if k not in {s.name for s in self.inputs}]
        if missing or extra:
            raise InputError(
                f"inputs expected {[s.name for s in self.inputs]}, got {list(x)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {extra}" if extra else "")
            )
        return {spec.name: _check_array(spec, x[spec.name]) for spec in self.inputs}

    def run_feeds(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run validated feeds; a fixed batch-1 model runs a larger batch row by row."""
        backend = self._backend  # read once: the tuner may swap sessions concurrently
        first = next(iter(feeds.values())) if feeds else None
        batch = first.shape[0] if first is not None and first.ndim else 1
        fixed = self._fixed_batch
        t0 = perf_counter()
        if fixed is None or batch == fixed:
            results = backend.run(feeds)
        else:
            rows = [backend.run({k: v[i:i + 1] for k, v in feeds.items()}) for i in range(batch)]
            results = [np.concatenate([r[j] for r in rows]) for j in range(len(self.outputs))]
        # hot-path bookkeeping for stats() and the tuner: four numbers into a ring buffer
        self._recorder.add(t0, perf_counter(), batch, backend.options.threads)
        return results

    def format_outputs(self, results: list[np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        if len(results) == 1:
            return results[0]
        return {spec.name: value for spec, value in zip(self.outputs, results, strict=True)}

    def predict(self, x: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        """Run the model. One output: an array; several: a dict by output name."""
        if type(x) is _NDARRAY and x.dtype is _F32 and x.shape in self._fast_shapes:
            # Same shape and dtype as an earlier valid call that ran as one backend call:
            # skip validation (runtimes copy a non-contiguous array themselves). On a 29 us
            # model every attribute lookup here shows, so the live session's run and thread
            # count are one tuple (swapped as one by swap_backend), and only one call in
            # SAMPLE_STRIDE is timed while calls are fast (see edgekit/stats.py).
            run, threads = self._fast
            skip = self._skip
            if skip:
                self._skip = skip - 1
                results = run({self._fast_name: x})
            else:
                t0 = perf_counter()
                results = run({self._fast_name: x})
                t1 = perf_counter()
                stride = SAMPLE_STRIDE if t1 - t0 < SAMPLE_BELOW_S else 1
                self._skip = stride - 1
                self._recorder.add(t0, t1, x.shape[0], threads, stride)
        else:
            feeds = self.prepare_feeds(x)
            shape = feeds[self._fast_name].shape if self._fast_name is not None else ()
            if (shape and len(self._fast_shapes) < 16
                    and self._fixed_batch in (None, shape[0])):
                self._fast_shapes.add(shape)
            results = self.run_feeds(feeds)
        if self._single_output:
            return results[0]
        return {spec.name: value for spec, value in zip(self.outputs, results, strict=True)}

    # -- runtime: power-aware batching, stats, images ----------------------------------
    def power_monitor(self) -> Any:
        """The (started) power monitor for this model's target thresholds."""
        with self._lock:
            if self._monitor is None:
                from edgekit.power import PowerMonitor, Thresholds

                thresholds = Thresholds.from_profile(self.manifest["target"]["profile"])
                self._monitor = PowerMonitor(self.power_root, thresholds,
                                             self.monitor_interval_s).start()
            return self._monitor

    def submit(self, x: np.ndarray | dict[str, np.ndarray]) -> Any:
        """Queue one request for the batcher; returns a ``concurrent.futures.Future``."""
        batcher = self._batcher
        if batcher is None:
            from edgekit.batcher import Batcher

            if self._closed:
                raise UserError("submit() after close(): the model is closed (expected an "
                                "open model; load it again)")
            options = dict(self._batch_options)
            monitor = self.power_monitor() if options.pop("power_aware") else None
            with self._lock:
                if self._batcher is None:
                    self._batcher = Batcher(self, monitor=monitor, **options)
                batcher = self._batcher
        return batcher.submit(x)

    def stats(self) -> dict[str, Any]:
        """Latency percentiles, throughput, batch sizes, threads, power state, energy."""
        from edgekit.stats import model_stats

        return model_stats(self)

    def predict_image(self, image: Any) -> np.ndarray | dict[str, np.ndarray]:
        """Preprocess an image (path or PIL image) as the manifest says, then predict."""
        from edgekit.preprocess import default_spec, preprocess_image

        spec = self.manifest["inputs"][0].get("preprocess") or default_spec(
            self.inputs[0].shape, self.inputs[0].layout or "NCHW")
        return self.predict(preprocess_image(image, spec))

    def close(self) -> None:
        """Drain the batcher's queue, stop the tuner and the power monitor, free the session."""
        if self._closed:
            return
        self._closed = True
        if self._batcher is not None:
            self._batcher.close()
        if self._tuner is not None:
            self._tuner.stop()
        if self._monitor is not None:
            self._monitor.stop()
        self._backend.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        ins = ", ".join(s.describe() for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return (f"<edgekit.Model {os.path.basename(self.artifact.path)} "
                f"target={self.manifest['target']['name']} runtime={self.runtime} "
                f"in=({ins}) out=({outs})>")


def _check_array(spec: TensorSpec, value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in _FLOAT_KINDS:
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
        if axis == 0 and isinstance(want, int) and want == 1:
            continue  # fixed batch 1 models accept larger batches, run row by row
        if isinstance(want, int) and want > 0 and want != got:
            raise InputError(
                f"input {spec.name!r}: expected shape {_dims(spec.shape)}"
                f"{' ' + spec.layout if spec.layout else ''}, got {_dims(array.shape)} "
                f"(axis {axis}: expected {want}, got {got})"
            )
    if array.dtype != np.float32:
        array = array.astype(np.float32)
    return np.ascontiguousarray(array)


def _dims(shape: tuple) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def load(path: str | os.PathLike[str], backend: str | None = None, threads: int | str = 0,
         **options: Any) -> Model:
    """Load and verify a ``.edgekit`` artifact.

    ``backend`` forces a runtime (``onnxruntime``, ``litert``, ``tflite-runtime``); by
    default the first installed one in the target profile's order. ``threads`` is a fixed
    count (0 = runtime default) or ``"auto"`` (measured at load, re-tuned on power, load
    and latency changes; ``policy`` = ``"balanced"`` | ``"latency"`` | ``"efficiency"``).
    Further options: ``power_root`` (sysfs root), ``tuner`` (``TunerOptions`` fields),
    ``max_batch``, ``max_wait_ms``, ``queue_size``, ``power_aware`` (for ``submit``).
    """
    artifact = read_artifact(path)
    return Model(artifact, backend=backend, threads=threads, **options)
