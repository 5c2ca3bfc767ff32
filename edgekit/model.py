"""``edgekit.load`` and the ``Model`` it returns: numpy in, numpy out.

A ``Model`` composes a ``Session`` (the live backend, its swap and the recorder) with an
optional thread tuner, batcher and power monitor; those depend on the session, never on
the model, so this module is the top of the runtime's import graph.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.adapt.tuner import ThreadTuner
from edgekit.artifact.archive import Artifact, read_artifact
from edgekit.artifact.manifest import Manifest
from edgekit.artifact.memory_budget import allowance
from edgekit.backends import Backend, BackendOptions, TensorSpec, choose_model
from edgekit.batching.batcher import Batcher
from edgekit.device.cpu import UNFUSED_NOTE
from edgekit.device.energy import MeasuredPower, PowerMeter
from edgekit.device.power import PowerMonitor, Thresholds
from edgekit.device.power_sensors import find_sensors
from edgekit.errors import EdgekitError, InputError, ModelClosedError, UserError
from edgekit.numerics.drift import DriftWatch
from edgekit.runtime.options import RuntimeOptions, backend_options
from edgekit.runtime.run_bounds import default_run_timeout_s
from edgekit.runtime.session import Session, check_array, inference_error
from edgekit.runtime.stats import SAMPLE_BELOW_S, SAMPLE_STRIDE, Recorder, StatsParts, model_stats

if TYPE_CHECKING:
    from edgekit.trust.keys import KeySpec
    from edgekit.trust.release import Pin

_F32 = np.dtype(np.float32)
_NDARRAY = np.ndarray  # a module global: one lookup fewer on predict's fast path
_isfinite = math.isfinite
_sum = sum
# Inputs up to this many elements are checked for NaN/inf as Python floats (``tolist`` and
# ``sum``) rather than by a BLAS dot product: the BLAS code is cold after the runtime ran, so
# for a few floats the sum is cheaper; at 192 floats the dot was (docs/measurements/runtime.md).
# The float64 sum of at most this many float32 values cannot overflow, so it is finite
# exactly when every value is.
SUM_CHECK_MAX = 128


# predict's fast-path state: (validated shapes -> small, check NaN/inf, input name, run,
# output names or None, run options, threads); see Model._on_swap
_FastPath = tuple[dict[tuple[int, ...], bool], bool, "str | None", Callable[..., list[np.ndarray]],
                  "list[str] | None", Any, int]


def thresholds_for(spec: Manifest) -> Thresholds:
    thermal = spec.target.profile.thermal
    return Thresholds(soft_limit_c=thermal.soft_limit_c, hard_limit_c=thermal.hard_limit_c,
                      supply_w=spec.target.profile.power.supply_w)


class Model:
    """A loaded artifact, ready to predict. Use :func:`edgekit.load` to make one."""

    def __init__(self, artifact: Artifact, backend: str | None = None,
                 options: RuntimeOptions | None = None) -> None:
        self.artifact = artifact
        self.spec: Manifest = artifact.spec
        self.manifest: dict[str, Any] = artifact.manifest  # as stored, for display
        self.options = options = options or RuntimeOptions()
        entry, backend_class = choose_model(artifact, backend)
        self.entry = entry.data
        self.backend_class = backend_class
        self.inputs = [TensorSpec.from_manifest(e.data) for e in self.spec.inputs]
        self.outputs = [TensorSpec.from_manifest(e.data) for e in self.spec.outputs]
        self.session = Session(artifact.read(entry.path), entry, backend_class,
                               self.inputs, self.outputs, options.allow_nonfinite,
                               options.exact_int8)
        self.session.memory_allowance = allowance(self.spec.target.profile)
        # runs bounded in time: the batcher's always, predict's where a Loop may never end
        self.run_timeout_s = (options.batch.run_timeout_s
                              if options.batch.run_timeout_s is not None
                              else default_run_timeout_s(self.manifest, options.batch.max_batch))
        if artifact.dynamic_loops.get(entry.path):
            self.session.run_bound_s = self.run_timeout_s
        self._checks_finite = not options.allow_nonfinite
        self.policy = options.policy
        self._recorder: Recorder = self.session.recorder  # predict's fast path: one lookup
        self._skip = 0  # predict calls left untimed before the next timed one
        self._pixels: dict[str, Any] | None = None  # checked preprocess spec for uint8 frames
        self._default_spec_note = True  # said once: images fed by a default the build never saw
        self._fixed_batch = self.session.fixed_batch
        self._fast_name = self.inputs[0].name if len(self.inputs) == 1 else None
        # shapes that passed validation -> True when small enough for the sum check
        self._fast_shapes: dict[tuple[int, ...], bool] = {}
        self._single_output = len(self.outputs) == 1
        self._monitor: PowerMonitor | None = None
        self._batcher: Batcher | None = None
        self._tuner: ThreadTuner | None = None
        self._closed = False
        self._lock = threading.Lock()  # lazy creation of the monitor and the batcher
        # predict's fast path reads one attribute: the validated shapes, the NaN check
        # switch, the input name, the live backend's run, its arguments and thread count
        self._fast: _FastPath | None = None
        # the drift watch (inputs clipped, outputs at the int8 limits) and measured power
        self._drift = DriftWatch.for_model(self.spec, entry, options.drift_threshold)
        self.session.drift = self._drift
        sensors = find_sensors(options.power.power_root, options.power.power_sensor)
        self._meter = PowerMeter(sensors[0]).start() if sensors else None
        self.session.on_swap(self._on_swap)
        if options.auto:
            profile = self.spec.target.profile
            self._tuner = ThreadTuner(self.session, options.policy, self.power_monitor(),
                                      profile, options.tuner,
                                      power_root=options.power.power_root,
                                      vectors=self._vectors(), runtime=options)
            if self._meter is not None:  # the efficiency policy reads measured watts
                self._tuner.power = MeasuredPower(self._tuner.power, self._meter,
                                                  self.session.recorder.window)
            try:
                self.session.start(self._tuner.initial())
            except BaseException:
                self.power_monitor().stop()
                if self._meter is not None:
                    self._meter.stop()
                raise
            self._tuner.start()
        else:
            self.session.start(self.session.make_backend(
                backend_options(options, self.policy, int(options.threads))))
        # said once, at the first predict: why this int8 model runs slowly here, and the way out
        self._unfused_note = bool(getattr(self.session.backend, "unfused", False))

    def _on_swap(self, backend: Backend) -> None:
        # one store: a concurrent predict sees the old tuple or the new one, never a mix
        native = backend.native_call
        call, names, options = native if native is not None else (backend.run, None, None)
        # a backend whose input write finds NaN/inf anyway (LiteRT's int8 inputs) refuses
        # them there: predict's own check would read the input once more
        check = self._checks_finite and not backend.refuse_nonfinite(self._checks_finite)
        if self._drift is not None:  # a LiteRT int8 input's write counts what it clips
            self._drift.attach(backend.watch_inputs(self._drift.inputs))
        self._fast = (self._fast_shapes, check, self._fast_name, call, names,
                      options, backend.options.threads)

    @property
    def _check_finite(self) -> bool:
        """Whether predict refuses NaN/inf (``tools/benchmarks/bench_batcher.py`` switches it to
        measure the check's cost on one model)."""
        return self._checks_finite

    @_check_finite.setter
    def _check_finite(self, value: bool) -> None:
        self._checks_finite = bool(value)
        self._on_swap(self.session.backend)

    def _run_checked(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The backend's own ``run`` with its errors typed (predict's fallback)."""
        try:
            return self.session.backend.run(feeds)
        except EdgekitError:
            raise
        except Exception as exc:
            raise inference_error(self.runtime, feeds, exc) from exc

    def _vectors(self) -> dict[str, np.ndarray]:
        try:
            return self.artifact.test_vectors() if self.spec.test_vectors else {}
        except Exception:  # a probe must not fail the load over missing vectors
            return {}

    # -- sessions ---------------------------------------------------------------------
    def make_backend(self, options: BackendOptions) -> Backend:
        """A new backend for this model (threads are fixed per backend by every runtime)."""
        return self.session.make_backend(options)

    def swap_backend(self, backend: Backend, close: bool = True) -> Backend:
        """Replace the live backend (see ``Session.swap``)."""
        return self.session.swap(backend, close)

    @property
    def backend(self) -> Backend:
        return self.session.backend

    @property
    def runtime(self) -> str:
        return self.backend_class.name

    @property
    def format(self) -> str:
        return self.session.entry.format

    @property
    def threads(self) -> int:
        return self.session.backend.options.threads

    @property
    def tuner(self) -> ThreadTuner | None:
        """The thread tuner (``threads="auto"``), else None."""
        return self._tuner

    @property
    def batcher(self) -> Batcher | None:
        """The batcher behind ``submit`` once the first request came, else None."""
        return self._batcher

    @property
    def monitor(self) -> PowerMonitor | None:
        """The power monitor if one runs (tuner, power-aware batcher), else None."""
        return self._monitor

    # -- inference --------------------------------------------------------------------
    def prepare_feeds(self, x: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Check names, shapes and dtypes against the manifest; return float32 feeds."""
        return self.session.prepare_feeds(x)

    def run_feeds(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run validated feeds; a fixed batch-1 model runs a larger batch row by row."""
        return self.session.run_feeds(feeds)

    def format_outputs(self, results: list[np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        return self.session.format_outputs(results)

    def predict(self, x: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        """Run the model. One output: an array; several: a dict by output name."""
        fast = self._fast
        if type(x) is _NDARRAY and x.dtype is _F32 and (
                small := fast[0].get(x.shape)) is not None:  # type: ignore[index]
            # Same shape and dtype as an earlier valid call that ran as one backend call:
            # skip validation (runtimes copy a non-contiguous array themselves). On a digits-size
            # model every object touched here shows (the runtime's call leaves the caches
            # cold for it; tools/benchmarks/bench_runtime.py --only overhead), so what the fast
            # path reads is one tuple, stored as one on every Session.swap; onnxruntime's C
            # run is called directly; only one call in SAMPLE_STRIDE is timed while calls
            # are fast (edgekit/runtime/stats.py).
            # NaN/inf would be quantized silently: a small input is summed as Python floats
            # (see SUM_CHECK_MAX), a larger one by one BLAS dot product (inf or NaN sums to
            # non-finite; a finite overflow, |x| above ~1e19, is re-checked element by
            # element, after numpy warns of the overflow). LiteRT's int8 inputs: the write's
            # own min/max finds them (``check`` is off, see _on_swap).
            _, check, name, call, names, options, threads = fast  # type: ignore[misc]
            if check and not (_isfinite(_sum(x.ravel().tolist())) if small
                              else _isfinite((flat := x.ravel()).dot(flat))):
                check_array(self.inputs[0], x)  # raises the InputError naming the input
            feeds = {name: x}
            skip = self._skip
            try:  # free in CPython 3.11 while nothing raises
                if skip:
                    self._skip = skip - 1
                    results = call(feeds) if names is None else call(names, feeds, options)
                else:
                    t0 = perf_counter()
                    results = call(feeds) if names is None else call(names, feeds, options)
                    t1 = perf_counter()
                    stride = SAMPLE_STRIDE if t1 - t0 < SAMPLE_BELOW_S else 1
                    self._skip = stride - 1
                    self._recorder.add(t0, t1, x.shape[0], threads, stride)
                    if self._drift is not None:  # timed runs only: outputs, sampled inputs
                        self._drift.observe(feeds, results)
            except EdgekitError:
                raise
            except TypeError as exc:
                if names is None:
                    raise inference_error(self.runtime, feeds, exc) from exc
                # the direct C call refused its arguments (an onnxruntime release changed
                # it): the backend's run answers, through the public API when it must
                results = self._run_checked(feeds)
            except Exception as exc:  # the runtime's own types: one typed error
                raise inference_error(self.runtime, feeds, exc) from exc
        else:
            if type(x) is _NDARRAY and x.dtype == np.uint8 and len(self.inputs) == 1:
                return self.predict_pixels(x)
            if self._unfused_note:
                self._unfused_note = False
                logging.getLogger("edgekit").warning(UNFUSED_NOTE)
            feeds = self.session.prepare_feeds(x)
            shape = feeds[self._fast_name].shape if self._fast_name is not None else ()
            if (shape and len(self._fast_shapes) < 16
                    and self._fixed_batch in (None, shape[0])):
                self._fast_shapes[shape] = math.prod(shape) <= SUM_CHECK_MAX
            results = self.session.run_feeds(feeds)
        if self._single_output:
            return results[0]
        return {spec.name: value for spec, value in zip(self.outputs, results, strict=True)}

    # -- runtime: power-aware batching, stats, images ----------------------------------
    def power_monitor(self) -> PowerMonitor:
        """The (started) power monitor for this model's target thresholds."""
        with self._lock:
            if self._monitor is None:
                meter = self._meter  # measured watts: the power_limit state
                self._monitor = PowerMonitor(
                    self.options.power.power_root, thresholds_for(self.spec),
                    self.options.power.monitor_interval_s,
                    watts=meter.watts_now if meter is not None else None).start()
            return self._monitor

    def submit(self, x: np.ndarray | dict[str, np.ndarray], block: bool = True,
               timeout: float | None = None) -> Any:
        """Queue one request for the batcher; returns a ``concurrent.futures.Future``.
        A full queue makes the caller wait (``block``, up to ``timeout`` seconds) or, with
        ``block=False``, raises ``QueueFullError`` at once. A uint8 camera frame (as for
        ``predict_pixels``) is preprocessed on the caller's thread, straight into the
        model's layout (NHWC for a .tflite: no transpose)."""
        if type(x) is _NDARRAY and x.dtype == np.uint8 and len(self.inputs) == 1 \
                and self.inputs[0].dtype.startswith("float"):
            x = self._frame_feed(x)
        batcher = self._batcher
        if batcher is None:
            if self._closed:
                raise ModelClosedError("submit() after close(): the model is closed (expected "
                                       "an open model; load it again)")
            o = self.options.batch
            monitor = self.power_monitor() if o.power_aware else None
            with self._lock:
                if self._batcher is None:
                    self._batcher = Batcher(
                        self.session, policy=self.policy,
                        budget_ms=self.spec.target.profile.budgets.latency_ms,
                        max_batch=o.max_batch, max_wait_ms=o.max_wait_ms,
                        queue_size=o.queue_size, monitor=monitor,
                        run_timeout_s=self.run_timeout_s)
                batcher = self._batcher
        return batcher.submit(x, block, timeout)

    def stats(self) -> dict[str, Any]:
        """Latency percentiles, throughput, batch sizes, threads, power state, energy.

        Counters (``edgekit.runtime.stats.COUNTERS``): ``executions``/``samples`` in the recent
        window the percentiles describe, ``total_executions``/``total_samples`` since load,
        ``timed_executions`` the runs whose latency was measured. ``energy_source``: the
        power sensor that measured ``energy_j_per_sample`` (``power_sensor`` its details), or
        "modelled". ``drift``: per input and channel the share of values outside the
        calibrated range, per output the share at the int8 limits, and the warnings."""
        return model_stats(StatsParts(
            runtime=self.runtime, policy=self.policy, threads=self.threads,
            recorder=self.session.recorder, profile=self.spec.target.profile,
            power_root=self.options.power.power_root, thresholds=thresholds_for(self.spec),
            monitor=self._monitor, batcher=self._batcher, tuner=self._tuner,
            pending=self._skip, drift=self._drift, meter=self._meter))

    def drift_warnings(self) -> list[str]:
        """The drift watch's warnings now: each input channel whose share of values outside
        the calibrated range (int8 clips them), or output whose share at the int8 limits,
        exceeds the build's by more than ``drift_threshold`` (``edgekit/numerics/drift.py``)."""
        return self._drift.warnings() if self._drift is not None else []

    @property
    def meter(self) -> PowerMeter | None:
        """The power sensor's meter when the board has one (measured energy), else None."""
        return self._meter

    def predict_image(self, image: Any, *, resize: str | None = None,
                      color: str | None = None) -> np.ndarray | dict[str, np.ndarray]:
        """Preprocess an image (path or PIL image) as the manifest says, then predict.

        ``resize`` ("none", "stretch", "center-crop") and ``color`` ("gray", "rgb", "bgr":
        what the image is converted to) override the manifest's preprocessing, e.g.
        ``resize="center-crop"`` for photos of another size than the model's input."""
        from edgekit.runtime.preprocess import check_channels, preprocess_image

        spec = self._image_spec()
        for key, value in (("resize", resize), ("color", color)):
            if value is not None:
                spec[key] = value
        check_channels(spec, self.inputs[0].shape)
        return self.predict(preprocess_image(image, spec))

    def predict_pixels(self, frame: np.ndarray) -> np.ndarray | dict[str, np.ndarray]:
        """A uint8 camera frame ([1, H, W, C], [H, W, C] or [H, W] for gray) preprocessed as
        the manifest says. An int8 NHWC .tflite takes it through one table lookup into its
        input buffer (no float round trip, the same codes); other models normalize it."""
        spec = self._pixel_spec()
        backend = self.session.backend
        pixels = getattr(backend, "run_pixels", None)
        if pixels is not None and (frame.ndim == 3 or frame.ndim == 4 and frame.shape[0] == 1) \
                and backend.pixel_input(spec):
            t0 = perf_counter()
            results = pixels(frame, spec)
            self._recorder.add(t0, perf_counter(), 1, backend.options.threads)
            if self._drift is not None:  # the frame's pixels the table clips, the outputs
                self._drift.observe_pixels(self.inputs[0].name, frame,
                                           getattr(backend, "pixel_clips", lambda: None)(),
                                           results)
            return self.session.format_outputs(results)
        return self.predict(self._frame_feed(frame))

    def _pixel_spec(self) -> dict[str, Any]:
        from edgekit.runtime.preprocess import check_spec

        spec = self._pixels
        if spec is None:
            spec = self._pixels = check_spec(self._image_spec())
        return spec

    def _image_spec(self) -> dict[str, Any]:
        """The manifest's image preprocessing, else the default for the input's shape (pixels
        to [0, 1]); said once when the build's calibration range shows the default cannot
        be what the model was calibrated on (an artifact built from normalized arrays)."""
        from edgekit.runtime.preprocess import default_spec, default_spec_mismatch

        entry = self.spec.inputs[0]
        if entry.preprocess:
            return dict(entry.preprocess)
        spec = default_spec(self.inputs[0].shape, self.inputs[0].layout or "NCHW")
        if self._default_spec_note and entry.calibration is not None:
            self._default_spec_note = False
            grid = entry.data.get("quantization") or {}
            symmetric = grid.get("dtype") == "int8" and grid.get("zero_point", 0) == 0
            note = default_spec_mismatch(entry.name, spec, entry.calibration.low,
                                         entry.calibration.high, symmetric)
            if note:
                logging.getLogger("edgekit").warning(note)
        return spec

    def _frame_feed(self, frame: np.ndarray) -> np.ndarray:
        """A uint8 frame as the float input: normalized as the manifest says, in NHWC when
        the backend takes NHWC (no transpose), else in the manifest's layout."""
        from edgekit.runtime.preprocess import normalize

        frame = frame[0] if frame.ndim == 4 and frame.shape[0] == 1 else frame
        if frame.ndim not in (2, 3):
            raise InputError(f"input {self.inputs[0].name!r}: a uint8 frame must be [H, W], "
                             f"[H, W, C] or [1, H, W, C]; got {list(frame.shape)}")
        spec = self._pixel_spec()
        if spec["layout"] == "NCHW" and self.inputs[0].name in self.session.backend.nhwc_inputs:
            spec = {**spec, "layout": "NHWC"}
        return normalize(frame, spec)

    def close(self) -> None:
        """Drain the batcher's queue, stop the tuner and the power monitor, free the session."""
        if self._closed:
            return
        self._closed = True
        # emptied in place: predict's fast tuple holds this dict, so it takes the checked
        # path, which raises once closed
        self._fast_shapes.clear()
        if self._batcher is not None:
            self._batcher.close()
        if self._tuner is not None:
            self._tuner.stop()
        if self._monitor is not None:
            self._monitor.stop()
        if self._meter is not None:
            self._meter.stop()
        self.session.close()
        self._on_swap(self.session.backend)  # predict's fast path: the closed run, which raises

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        ins = ", ".join(s.describe() for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return (f"<edgekit.Model {os.path.basename(self.artifact.path)} "
                f"target={self.spec.target.name} runtime={self.runtime} "
                f"in=({ins}) out=({outs})>")


def load(path: str | os.PathLike[str], options: RuntimeOptions | None = None, *,
         backend: str | None = None, trusted_keys: Iterable[KeySpec] | KeySpec | None = None,
         pin: Pin | None = None, **overrides: Any) -> Model:
    """Load and verify a ``.edgekit`` artifact; the options are ``options``
    (``edgekit.RuntimeOptions``) with the keyword ``overrides`` (its flat keywords, shown in
    this function's signature) replaced.

    ``backend`` forces a runtime (``onnxruntime``, ``litert``, ``tflite-runtime``); by
    default the first installed one in the target profile's order. ``threads`` is a fixed
    count (0 = runtime default) or ``"auto"`` (measured at load, re-tuned on power, load
    and latency changes; ``policy`` = ``"balanced"`` | ``"latency"`` | ``"efficiency"``;
    ``tuner``: ``TunerOptions`` or a dict of its fields). ``allow_spinning``: onnxruntime
    spin-waits between ops (off for ``efficiency``; ``False`` holds for every session the
    tuner opens too). ``power_root``: where sysfs and proc are. For ``submit``:
    ``max_batch``, ``max_wait_ms``, ``queue_size``, ``power_aware``, ``run_timeout_s``
    (bounds each backend run of the batcher, not the queue wait nor ``predict``: a longer
    run fails its requests and replaces the session).
    ``allow_nonfinite``: run NaN / inf inputs instead of raising ``InputError``.
    ``drift_threshold``: the drift watch warns when an input channel's share of clipped
    values (an output's at the int8 limits) exceeds the build's by more than this share.
    ``power_sensor``: "auto" (an INA2xx hwmon chip, else a Pi 5's ``vcgencmd
    pmic_read_adc`` under the real root), "none", "vcgencmd" or "hwmon:NAME"; with one,
    ``stats()`` reports measured energy and names the sensor.
    ``exact_int8=False``: on an x86 CPU without VNNI, run an int8 ONNX model on onnxruntime's
    fused kernels (fast; they saturate 8-bit weights, so outputs may sit a few steps from
    the board's) instead of unfused (exact, about 4x slower; said once at the first predict).
    ``trusted_keys``: public key files, folders of ``*.pub`` files or ``PublicKey``
    objects; with those of ``$EDGEKIT_TRUSTED_KEYS`` and the device's trusted-key folders
    (``edgekit.trust.keys``) they are the keys trusted to sign artifacts. When any key is
    configured, an unsigned artifact or one signed by another key is refused
    (``UntrustedArtifactError``); a signature that does not match is a ``SignatureError``.
    ``pin``: the releases this device accepts (``edgekit.trust.release.Pin``: target, oldest
    version, oldest build time), merged over ``$EDGEKIT_PIN_TARGET``/``MIN_RELEASE``/``NOT_BEFORE``.
    """
    if options is not None and not isinstance(options, RuntimeOptions):
        raise UserError(f"options must be an edgekit.RuntimeOptions (the keyword options go "
                        f"by name: load(path, threads=2)); got {type(options).__name__}")
    options = (options or RuntimeOptions()).with_keywords(**overrides)
    from edgekit.trust.keys import discover_trusted_keys
    from edgekit.trust.release import pin_from

    return Model(read_artifact(path, discover_trusted_keys(trusted_keys), pin_from(pin)),
                 backend=backend, options=options)


def _shown_signature() -> inspect.Signature:
    """``load``'s signature as ``inspect`` and ``help`` show it: every flat keyword of
    ``RuntimeOptions`` with its default, written once (in the dataclasses), not again here."""
    shown = inspect.signature(load)
    params = [p for p in shown.parameters.values()
              if p.kind is not inspect.Parameter.VAR_KEYWORD]
    keyword_at = next(i for i, p in enumerate(params) if p.name == "trusted_keys")
    flat = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
            for name, default in RuntimeOptions.keywords().items()]
    return shown.replace(parameters=params[:keyword_at] + flat + params[keyword_at:])


load.__signature__ = _shown_signature()  # type: ignore[attr-defined]
