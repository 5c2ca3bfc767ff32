"""The power-aware batcher behind Model.submit, on real onnxruntime sessions."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.backends import BackendOptions
from edgekit.backends.onnxruntime import OnnxRuntimeBackend
from edgekit.batching.batch_policy import may_join
from edgekit.batching.batcher import batch_policy
from edgekit.device.power import HOT, LOW_BATTERY, NORMAL, ON_BATTERY, THROTTLED, UNKNOWN
from edgekit.errors import InferenceError, InternalError, QueueFullError, UserError

from ..fake_sysfs import laptop_tree, put
from ..runtime_models import conv_onnx, mlp_onnx, write_model_artifact


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mlp") / "mlp.edgekit"
    return write_model_artifact(out, mlp_onnx(poison_gather=True), ["N", 16])


@pytest.fixture(scope="module")
def conv_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv") / "conv.edgekit"
    return write_model_artifact(out, conv_onnx(size=48, channels=32), ["N", 1, 48, 48])


def rows(n: int, seed: int = 0) -> np.ndarray:
    """Valid inputs for the poisoned MLP: feature 0 is an index in 0..9."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, 16)).astype(np.float32)
    x[:, 0] = rng.integers(0, 10, n)
    return x


def test_10000_submissions_from_8_threads_all_correct(mlp_artifact: Path,
                                                      tmp_path: Path) -> None:
    x = rows(10_000)
    with edgekit.load(mlp_artifact, threads=1, max_batch=16, max_wait_ms=2,
                      power_root=str(tmp_path)) as model:
        expected = model.predict(x)  # one big batch: the reference for every row
        futures: list[list[Future]] = [[] for _ in range(8)]
        refused = [0] * 8

        def producer(k: int) -> None:
            for i in range(k, len(x), 8):
                while True:
                    try:
                        futures[k].append(model.submit(x[i:i + 1]))
                        break
                    except QueueFullError:  # backpressure: wait for the worker, resubmit
                        refused[k] += 1
                        time.sleep(0.001)

        threads = [threading.Thread(target=producer, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(len(f) for f in futures) == 10_000
        for k in range(8):
            got = np.concatenate([f.result(timeout=60) for f in futures[k]])
            np.testing.assert_allclose(got, expected[k::8], rtol=1e-5, atol=1e-6)
        stats = model.stats()
    assert stats["batcher"]["completed"] == 10_000 and stats["batcher"]["failed"] == 0
    assert stats["batcher"]["batches"] < 10_000  # requests were really grouped
    assert max(stats["batch_sizes"]) > 1


def test_a_poison_request_fails_alone(mlp_artifact: Path, tmp_path: Path) -> None:
    x = rows(24, seed=1)
    poison = x.copy()
    poison[9, 0] = 1000.0  # Gather index out of bounds: onnxruntime raises for this row only
    with edgekit.load(mlp_artifact, threads=1, max_batch=8, max_wait_ms=300,
                      power_root=str(tmp_path)) as model:
        with pytest.raises(InferenceError, match="onnxruntime failed running input x "
                                                 r"float32\[1, 16\].*(?i:out of (data )?bounds)"):
            model.predict(poison[9:10])  # the same input fails a direct call: a real error
        expected = model.predict(x)
        futures = [model.submit(poison[i:i + 1]) for i in range(24)]
        for f in futures:
            f.exception(timeout=60)
        failed = [i for i, f in enumerate(futures) if f.exception() is not None]
        assert failed == [9]  # its batch was retried request by request
        bad = futures[9].batch_id
        assert sum(f.batch_id == bad for f in futures) > 1  # it shared a batch with others
        error = futures[9].exception()
        assert isinstance(error, InferenceError) and "onnxruntime" in str(error)
        assert error.__cause__ is not None and "Gather" in str(error.__cause__)
        for i, f in enumerate(futures):
            if i != 9:
                np.testing.assert_allclose(f.result(), expected[i:i + 1], rtol=1e-5, atol=1e-6)
        assert model.stats()["batcher"]["retried_batches"] == 1
        # the worker went on: a later request is served
        np.testing.assert_allclose(model.submit(x[:1]).result(timeout=60), expected[:1],
                                   rtol=1e-5, atol=1e-6)


def test_broken_session_fails_its_batches_then_recovers(mlp_artifact: Path,
                                                        tmp_path: Path) -> None:
    x = rows(8, seed=2)
    with edgekit.load(mlp_artifact, threads=1, max_wait_ms=50,
                      power_root=str(tmp_path)) as model:
        expected = model.predict(x)
        # a real session of a different model (its input is [N, 8]): every run raises
        broken = OnnxRuntimeBackend(mlp_onnx(features=8), model.inputs, model.outputs,
                                    BackendOptions(threads=1))
        good = model.swap_backend(broken, close=False)
        failing = [model.submit(x[i:i + 1]) for i in range(4)]
        assert all(isinstance(f.exception(timeout=60), InternalError) for f in failing)
        model.swap_backend(good)
        ok = [model.submit(x[i:i + 1]) for i in range(8)]
        np.testing.assert_allclose(np.concatenate([f.result(timeout=60) for f in ok]),
                                   expected, rtol=1e-5, atol=1e-6)
        assert model.stats()["batcher"]["failed"] == 4


def test_close_drains_the_queue(conv_artifact: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(3).random((300, 1, 48, 48), dtype=np.float32)
    model = edgekit.load(conv_artifact, threads=1, max_batch=4, max_wait_ms=20,
                         power_root=str(tmp_path))
    expected = model.predict(x)
    futures = [model.submit(x[i:i + 1]) for i in range(300)]
    model.close()  # returns once every queued request has run
    assert all(f.done() and f.exception() is None for f in futures)
    np.testing.assert_allclose(np.concatenate([f.result() for f in futures]), expected,
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(UserError, match="after close"):
        model.submit(x[:1])


def test_queue_full_raises_and_accepted_requests_complete(conv_artifact: Path,
                                                          tmp_path: Path) -> None:
    x = np.random.default_rng(4).random((1, 1, 48, 48), dtype=np.float32)
    with edgekit.load(conv_artifact, threads=1, max_batch=1, queue_size=2,
                      power_root=str(tmp_path)) as model:
        accepted, refused = [], []
        for _ in range(50):  # submitting takes microseconds, each run a millisecond or more
            try:
                accepted.append(model.submit(x, block=False))
            except QueueFullError as exc:
                refused.append(str(exc))
        assert refused and "2 waiting" in refused[0]
        assert all(f.result(timeout=60).shape == (1, 10) for f in accepted)


def test_fixed_batch_one_model_runs_batches_row_by_row(tmp_path: Path) -> None:
    artifact = write_model_artifact(tmp_path / "fixed.edgekit", mlp_onnx(batch=1), [1, 16])
    x = rows(64, seed=5)
    with edgekit.load(artifact, threads=1, max_batch=8, max_wait_ms=50,
                      power_root=str(tmp_path)) as model:
        expected = np.concatenate([model.predict(x[i:i + 1]) for i in range(64)])
        futures = [model.submit(x[i:i + 1]) for i in range(64)]
        got = np.concatenate([f.result(timeout=60) for f in futures])
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert max(model.stats()["batch_sizes"]) > 1


def test_bad_input_fails_in_the_caller(mlp_artifact: Path, tmp_path: Path) -> None:
    with edgekit.load(mlp_artifact, threads=1, power_root=str(tmp_path)) as model:
        with pytest.raises(edgekit.InputError, match="expected shape"):
            model.submit(np.zeros((1, 7), np.float32))


def test_batch_policy_follows_power_state() -> None:
    budget = 0.1  # rpi4 latency budget
    normal = batch_policy(NORMAL, "latency", 8, None, budget)
    assert (normal.max_batch, normal.max_wait_s, normal.gap) == (8, 0.0, 0.0)
    assert batch_policy(UNKNOWN, "efficiency", 8, None, budget).max_wait_s == pytest.approx(0.01)
    for state in (ON_BATTERY, HOT):
        saving = batch_policy(state, "latency", 8, None, budget)
        assert saving.max_batch == 16 and saving.max_wait_s == pytest.approx(0.025)
        assert saving.gap > 0
    for state in (THROTTLED, LOW_BATTERY):
        strict = batch_policy(state, "balanced", 8, None, budget)
        assert strict.max_batch == 32 and strict.gap > saving.gap
        assert strict.max_wait_s <= strict.max_delay_s <= budget / 2  # p95 inside the budget


def test_on_mains_only_efficiency_waits_for_companions() -> None:
    budget = 0.1
    for state in (NORMAL, UNKNOWN):  # a wait costs latency batch-1 never charges
        assert batch_policy(state, "balanced", 8, None, budget).max_wait_s == 0.0
        assert batch_policy(state, "efficiency", 8, None, budget).max_wait_s > 0.0
    assert batch_policy(NORMAL, "balanced", 8, 2.0, budget).max_wait_s == pytest.approx(0.002)


def test_on_mains_only_a_backlog_joins_a_batch() -> None:
    budget, run = 0.1, 0.0003  # a 0.3 ms row
    for policy in ("balanced", "latency"):  # a burst of a few is served one by one ...
        mains = batch_policy(NORMAL, policy, 8, None, budget)
        assert not may_join(mains, waited_s=0.0001, per_row_s=run)
        assert may_join(mains, waited_s=0.0003, per_row_s=run)  # ... a backlog batches
        assert may_join(mains, waited_s=0.0, per_row_s=None)  # no run timed yet
    for saving in (batch_policy(NORMAL, "efficiency", 8, None, budget),
                   batch_policy(NORMAL, "balanced", 8, 2.0, budget),  # the caller's wait
                   batch_policy(ON_BATTERY, "balanced", 8, None, budget),
                   batch_policy(THROTTLED, "balanced", 8, None, budget)):
        assert may_join(saving, waited_s=0.0, per_row_s=run)


def test_batcher_switches_policy_when_power_source_changes(mlp_artifact: Path,
                                                           tmp_path: Path) -> None:
    root = laptop_tree(tmp_path)
    x = rows(4, seed=6)
    with edgekit.load(mlp_artifact, threads=1, policy="latency", power_root=str(root),
                      monitor_interval_s=3600) as model:
        model.submit(x[:1]).result(timeout=60)
        assert model.stats()["batcher"]["state"] == NORMAL
        put(root, "sys/class/power_supply/AC/online", "0")
        put(root, "sys/class/power_supply/BAT0/status", "Discharging")
        model.power_monitor().poll()
        model.submit(x[1:2]).result(timeout=60)
        info = model.stats()["batcher"]
        assert info["state"] == ON_BATTERY and info["max_batch"] == 16
        assert info["max_wait_ms"] == pytest.approx(25.0) and info["policy_changes"] == 2


def test_batcher_runs_on_a_bare_session_without_a_model(mlp_artifact: Path) -> None:
    """The batcher needs only the session contract (``SessionLike``), not ``Model``."""
    from edgekit.artifact.archive import read_artifact
    from edgekit.backends import TensorSpec
    from edgekit.batching.batcher import Batcher
    from edgekit.runtime.session import Session

    artifact = read_artifact(mlp_artifact)
    entry = artifact.spec.models[0]
    inputs = [TensorSpec.from_manifest(e.data) for e in artifact.spec.inputs]
    outputs = [TensorSpec.from_manifest(e.data) for e in artifact.spec.outputs]
    session = Session(artifact.read(entry.path), entry, OnnxRuntimeBackend, inputs, outputs)
    session.start(session.make_backend(BackendOptions(threads=1)))
    batcher = Batcher(session, policy="latency", budget_ms=50.0, max_batch=4)
    try:
        x = rows(12)
        got = np.concatenate([f.result(timeout=30) for f in
                              [batcher.submit(x[i:i + 1]) for i in range(12)]])
        np.testing.assert_allclose(got, session.run_feeds({"x": x})[0], rtol=1e-5, atol=1e-6)
        assert batcher.info()["completed"] == 12 and session.recorder.n >= 2
    finally:
        batcher.close()
        session.close()
