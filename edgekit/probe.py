"""Timing sessions side by side: what the thread tuner measures at load and off-traffic."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from edgekit.backends import Backend, BackendOptions
from edgekit.stats import typical

if TYPE_CHECKING:
    from edgekit.model import Model


def probe_feeds(model: Model) -> dict[str, np.ndarray]:
    """One real input row (the artifact's test vectors) or, without them, random data."""
    feeds: dict[str, np.ndarray] = {}
    vectors: dict[str, np.ndarray] = {}
    try:
        vectors = model.artifact.test_vectors() if model.manifest.get("test_vectors") else {}
    except Exception:  # a probe must not fail the load over missing vectors
        vectors = {}
    rng = np.random.default_rng(0)
    for spec in model.inputs:
        if f"in/{spec.name}" in vectors:
            feeds[spec.name] = np.ascontiguousarray(vectors[f"in/{spec.name}"][:1], np.float32)
        else:
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
            feeds[spec.name] = rng.random(shape, dtype=np.float32)
    return feeds


# An onnxruntime intra-op pool keeps spin-waiting for about 40 ms of CPU after its last run
# (measured here: 2-thread session, then a sleep: 0.04 s of CPU whatever the sleep beyond
# 50 ms). Measuring another session during that window bills the spinning to it.
SETTLE_S = 0.05


def probe(model: Model, feeds: dict[str, np.ndarray], candidates: list[int], budget_s: float,
          warmup: int, spinning: bool) -> tuple[dict[int, float], dict[int, Backend]]:
    """Timed blocks of one session per candidate, in rotating order (fair under changing
    load). Each block drops its first run and its first ``SETTLE_S``: the previous block's
    pool is still spinning then and would bill its CPU to this candidate."""
    start = time.perf_counter()
    backends = {t: model.make_backend(BackendOptions(threads=t, allow_spinning=spinning))
                for t in candidates}
    for backend in backends.values():
        for _ in range(max(1, warmup)):
            backend.run(feeds)
    rows = max(1, next(iter(feeds.values())).shape[0]) if feeds else 1
    rounds = max(2, 8 // len(candidates))
    block_s = max(0.01, (start + budget_s - time.perf_counter()) / (rounds * len(candidates)))
    samples: dict[int, list[float]] = {t: [] for t in candidates}
    hard_stop = start + 3 * budget_s
    for r in range(rounds):
        for t in candidates[r % len(candidates):] + candidates[:r % len(candidates)]:
            backend = backends[t]
            block_start = time.perf_counter()
            runs = 0
            while True:
                t0 = time.perf_counter()
                backend.run(feeds)
                t1 = time.perf_counter()
                runs += 1
                if runs > 1 and t0 - block_start >= SETTLE_S:  # slow models: from run 2
                    samples[t].append(t1 - t0)
                if t1 - block_start >= block_s and samples[t] or t1 >= hard_stop:
                    break
        if time.perf_counter() >= start + budget_s and r >= 1:
            break  # slow model: fewer rounds rather than a longer load
    return {t: typical(s) / rows for t, s in samples.items()}, backends
