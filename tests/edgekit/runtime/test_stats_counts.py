"""``stats()`` after ``submit``s: as many samples as requests (the batcher's per-row probe is
no request), and plain floats (issue 35: 54 samples for 50 submits, np.float64(...) printed)."""

from __future__ import annotations

import numpy as np

import edgekit


def test_submits_count_once_and_print_as_plain_numbers(digits_onnx_artifact):
    with edgekit.load(digits_onnx_artifact) as model:
        futures = [model.submit(np.zeros((1, 1, 8, 8), np.float32)) for _ in range(50)]
        for future in futures:
            future.result()
        stats = model.stats()
    assert stats["samples"] == stats["total_samples"] == 50
    assert stats["executions"] == stats["batcher"]["batches"]  # the probe's 3 runs left out
    assert stats["timed_executions"] == stats["executions"]
    assert sum(stats["batch_sizes"].values()) == stats["executions"]
    for figures in (stats["latency_ms"], stats["batcher"]["request_latency_ms"]):
        assert all(type(v) is float for v in figures.values()), figures
    assert "np.float64" not in repr(stats)


def test_predict_counts_unchanged(digits_onnx_artifact):
    with edgekit.load(digits_onnx_artifact) as model:
        for _ in range(5):
            model.predict(np.zeros((1, 1, 8, 8), np.float32))
        stats = model.stats()
    assert (stats["executions"], stats["samples"], stats["total_executions"]) == (5, 5, 5)
