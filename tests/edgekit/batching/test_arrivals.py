"""The batcher's wait decision: it waits for companions only when the observed arrivals
make one likely within the wait, and still fills batches when requests come fast."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from edgekit.artifact.manifest import ModelEntry
from edgekit.backends import BackendOptions, TensorSpec
from edgekit.backends.onnxruntime import OnnxRuntimeBackend
from edgekit.batching.arrivals import MIN_GAPS, ArrivalTracker
from edgekit.batching.batcher import Batcher
from edgekit.runtime.session import Session

from ..runtime_models import mlp_onnx


def test_no_evidence_waits_as_the_policy_says() -> None:
    tracker = ArrivalTracker()
    for t in range(MIN_GAPS):  # MIN_GAPS arrivals: one gap short of evidence
        tracker.observe(t * 0.001)
    assert tracker.step_s(0.002) is None
    assert tracker.step_s(0.0) == 0.0


def test_steady_stream_slower_than_the_wait_never_waits() -> None:
    tracker = ArrivalTracker()
    for k in range(40):
        tracker.observe(k * 0.0025)  # 400 requests/s against a 2 ms wait
    assert tracker.step_s(0.002) == 0.0
    assert tracker.step_s(0.025) == pytest.approx(0.0025 * 1.25)  # on battery: waits


def test_one_long_pause_does_not_stop_batching_a_fast_stream() -> None:
    tracker = ArrivalTracker()
    times = list(np.arange(20) * 0.0002) + [1.0 + k * 0.0002 for k in range(12)]
    for t in times:
        tracker.observe(float(t))
    tracker.observe(0.5)  # out of order: ignored
    assert 0 < tracker.step_s(0.002) <= 0.0002 * 1.25 + 1e-9


@pytest.fixture()
def session(tmp_path: Path) -> Session:
    spec = [TensorSpec("x", ("N", 16))]
    out = [TensorSpec("probs", ("N", 10))]
    entry = ModelEntry(format="onnx", path="model.onnx", runtime="onnxruntime", bytes=None, data={})
    s = Session(mlp_onnx(), entry, OnnxRuntimeBackend, spec, out)
    s.start(s.make_backend(BackendOptions(threads=1)))
    return s


def test_slow_steady_requests_do_not_wait_and_fast_ones_batch(session: Session) -> None:
    x = np.random.default_rng(0).normal(0, 1, (1, 16)).astype(np.float32)
    batcher = Batcher(session, policy="balanced", budget_ms=1000.0, max_batch=8,
                      max_wait_ms=30.0)
    try:
        latencies = []
        for _ in range(12):  # one request every 60 ms against a 30 ms wait
            t0 = time.perf_counter()
            batcher.submit(x).result(timeout=10)
            latencies.append(time.perf_counter() - t0)
            time.sleep(0.06)
        # the first ones wait 30 ms (no evidence yet); once the gaps are known, none does
        assert np.median(latencies[-5:]) < 0.015, latencies
        before = batcher.batches
        for _ in range(6):  # bursts of 8 every 5 ms: fast arrivals still batch
            futures = [batcher.submit(x) for _ in range(8)]
            for f in futures:
                f.result(timeout=10)
            time.sleep(0.005)
        assert batcher.batches - before < 48
    finally:
        batcher.close()
        session.close()
