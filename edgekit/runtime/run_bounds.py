"""How long one run may take, by default, and a backend whose every run is bounded.

A stuck run (a wedged runtime, an ONNX ``Loop`` whose trip count comes from the input) must
fail typed instead of holding its callers forever. The default bound is derived from what
the manifest says a run costs on the target: the build's latency estimate (the slowest of
its thread counts, ``estimate.variants.<int8|float32>.latency_ms``) x RUN_TIMEOUT_FACTOR per
row, never below RUN_TIMEOUT_FLOOR_S (a loaded board, a cold cache, a first run).

The batcher bounds each of its runs with it (``edgekit/batching/batcher.py``); ``predict`` is bounded
only for models that can loop without end (``Artifact.dynamic_loops``), since a bound costs a
thread hop per call (:func:`bound_runs`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from edgekit.backends import Backend
from edgekit.errors import RunTimeoutError

RUN_TIMEOUT_FACTOR = 100.0
RUN_TIMEOUT_FLOOR_S = 10.0
STOP_GRACE_S = 2.0  # how long a terminated onnxruntime run gets to reach its next node


def expected_latency_s(manifest: dict[str, Any]) -> float | None:
    """The manifest's estimated seconds per run (the slowest thread count), None if absent
    or malformed (the estimate is a host report: read defensively)."""
    estimate = manifest.get("estimate")
    variants = estimate.get("variants") if isinstance(estimate, dict) else None
    if not isinstance(variants, dict):
        return None
    values: list[float] = []
    for name in ("int8", "float32"):
        variant = variants.get(name)
        latency = variant.get("latency_ms") if isinstance(variant, dict) else None
        if isinstance(latency, dict):
            values += [float(v) for v in latency.values()
                       if isinstance(v, int | float) and not isinstance(v, bool)
                       and math.isfinite(v) and v > 0]
    return max(values) / 1000.0 if values else None


def default_run_timeout_s(manifest: dict[str, Any], rows: int = 1) -> float:
    """RUN_TIMEOUT_FACTOR x the estimated latency of ``rows`` rows, at least the floor."""
    latency = expected_latency_s(manifest)
    if latency is None:
        return RUN_TIMEOUT_FLOOR_S
    return max(RUN_TIMEOUT_FLOOR_S, RUN_TIMEOUT_FACTOR * latency * max(1, rows))


def _run_into(run: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
              feeds: dict[str, np.ndarray], future: Future) -> None:
    try:
        future.set_result(run(feeds))
    except BaseException as exc:  # noqa: BLE001 - handed back to the caller
        future.set_exception(exc)


def bound_runs(backend: Backend, timeout_s: float) -> Backend:
    """Make every ``backend.run`` return within ``timeout_s`` or raise ``RunTimeoutError``.
    The run goes to a helper thread; on a timeout the runtime is told to stop
    (``Backend.terminate``) and, once the run has stopped, to accept runs again
    (``Backend.resume``). The direct C call of predict's fast path is switched off."""
    run = backend.run
    lock = threading.Lock()  # one run at a time, so that a stop flag hits the stuck one

    def bounded(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with lock:
            future: Future = Future()
            threading.Thread(target=_run_into, args=(run, feeds, future), daemon=True,
                             name="edgekit-bounded-run").start()
            try:
                return future.result(timeout_s)
            except TimeoutError:
                if future.done():
                    raise
            stopped = backend.terminate()
            if stopped:
                try:
                    future.exception(STOP_GRACE_S)
                    backend.resume()
                except TimeoutError:
                    stopped = False
            raise RunTimeoutError(
                f"{backend.name} ran longer than {timeout_s:g} s (the model can loop without "
                "end; pass run_timeout_s to edgekit.load for another bound)"
                + ("" if stopped else "; the runtime could not stop the run: it goes on"))

    backend.run = bounded  # type: ignore[method-assign]
    backend.native_call = None
    return backend
