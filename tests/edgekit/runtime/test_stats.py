"""The hot-path ring buffer and the summaries stats() builds from it."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.targets import load_profile

from edgekit.runtime.stats import PowerModel, Recorder, summarize, typical


def test_ring_keeps_the_latest_entries_in_order() -> None:
    ring = Recorder(size=8)
    for i in range(20):
        ring.add(0.0, float(i + 1), i, 1)
        for since in range(i + 2):
            expected = list(range(max(since, i + 1 - 8), i + 1))
            assert ring.window(since)["rows"].tolist() == expected
    assert ring.n == 20 and ring.total_rows == sum(range(20))
    with pytest.raises(ValueError, match="power of two"):
        Recorder(size=6)


def test_summary_energy_uses_the_profile_power_model() -> None:
    power = PowerModel.from_profile(load_profile("rpi4"))
    assert power.watts(1) == pytest.approx(2.7 + 3.7 / 4)
    assert power.watts(8) == pytest.approx(6.4)  # capped at the profile's 4 cores
    ring = Recorder(size=16)
    ring.add(0.0, 0.010, 1, 1)  # 10 ms, batch 1, 1 thread
    ring.add(0.010, 0.030, 4, 2)  # 20 ms, batch 4, 2 threads
    ring.add(0.030, 0.032, 1, 0)  # threads 0 = runtime default (here: 4)
    s = summarize(ring.window(), power, default_threads=4)
    joules = power.watts(1) * 0.010 + power.watts(2) * 0.020 + power.watts(4) * 0.002
    assert s["energy_j_per_sample"] == pytest.approx(joules / 6)
    assert s["batch_sizes"] == {1: 2, 4: 1} and s["threads_used"] == {1: 1, 2: 1, 4: 1}
    assert s["samples"] == 6 and s["throughput_per_s"] == pytest.approx(6 / 0.032)
    assert s["latency_ms"]["p50"] == pytest.approx(10.0)


def test_typical_is_the_mean_so_stalls_count() -> None:
    values = np.ones(100)
    values[-2:] = 40.0  # two long stalls, as a descheduled pool thread causes
    assert np.median(values) == 1.0 and typical(values) == pytest.approx(1.78)
    assert np.isnan(typical([]))


def test_sampled_entries_count_for_the_calls_they_stand_for() -> None:
    power = PowerModel.from_profile(load_profile("rpi4"))
    ring = Recorder(size=16)
    ring.add(0.0, 0.0001, 1, 1, weight=8)  # one timed call of eight fast ones
    ring.add(0.0008, 0.0010, 2, 1)  # a timed batch of 2
    s = summarize(ring.window(), power, default_threads=4)
    assert s["executions"] == 9 and s["samples"] == 10 and ring.total_rows == 10
    assert s["batch_sizes"] == {1: 8, 2: 1}
    joules = power.watts(1) * (0.0001 * 8 + 0.0002)
    assert s["energy_j_per_sample"] == pytest.approx(joules / 10)


def test_predict_on_a_fast_model_times_one_call_in_eight(tmp_path) -> None:  # noqa: ANN001
    import edgekit
    from edgekit.runtime.stats import SAMPLE_STRIDE

    from ..runtime_models import mlp_onnx, write_model_artifact

    artifact = write_model_artifact(tmp_path / "mlp.edgekit", mlp_onnx(), ["N", 16])
    with edgekit.load(artifact, threads=1) as model:
        x = np.zeros((1, 16), np.float32)
        for _ in range(1 + 8 * SAMPLE_STRIDE):  # the first call validates (not sampled)
            model.predict(x)
        stats = model.stats()
    # a ~10 us model: about one call in SAMPLE_STRIDE is timed, each standing for the calls
    # after it (exact unless a preempted call > 200 us was timed alone)
    assert abs(stats["executions"] - (1 + 8 * SAMPLE_STRIDE)) < SAMPLE_STRIDE
    assert model.session.recorder.n < (1 + 8 * SAMPLE_STRIDE) / 2
