"""Timing sessions side by side: what the thread tuner measures at load and off-traffic."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from edgekit.backends import Backend, TensorSpec
from edgekit.errors import UserError
from edgekit.runtime.stats import typical

# Elements of one synthetic probe input at most (16 MiB of float32): the manifest's shape is
# untrusted (1x1x46341x46341 asked for 8 GiB), a real board's input is far smaller.
MAX_PROBE_ELEMENTS = 1 << 22


def probe_feeds(inputs: list[TensorSpec], vectors: dict[str, np.ndarray]
                ) -> dict[str, np.ndarray]:
    """One real input row (the artifact's test vectors, ``in/<name>``) or, without them,
    random data of the manifest's shape, at most ``MAX_PROBE_ELEMENTS`` per input (a
    ``UserError`` naming the input beyond)."""
    feeds: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    for spec in inputs:
        dtype = np.float32 if spec.dtype.startswith("float") else np.dtype(spec.dtype)
        if f"in/{spec.name}" in vectors:  # one row, on the input's own batch axis
            row = np.take(vectors[f"in/{spec.name}"], [0], axis=spec.batch_axis)
            feeds[spec.name] = np.ascontiguousarray(row, dtype)
        else:
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
            if math.prod(shape) > MAX_PROBE_ELEMENTS:
                raise UserError(
                    f"input {spec.name!r}: the thread tuner would probe with {shape} "
                    f"({math.prod(shape)} elements), expected at most {MAX_PROBE_ELEMENTS} "
                    "without test vectors; load with a fixed thread count instead of 'auto'")
            feeds[spec.name] = rng.random(shape, dtype=np.float32).astype(dtype)
    return feeds


# An onnxruntime intra-op pool keeps spin-waiting for about 40 ms of CPU after its last run
# (measured here: 2-thread session, then a sleep: 0.04 s of CPU whatever the sleep beyond
# 50 ms). Measuring another session during that window bills the spinning to it.
SETTLE_S = 0.05
# Blocks per candidate at most (fewer for slow models): with the budget split into more,
# shorter blocks, a burst of other work spoils a smaller share of one candidate's blocks.
BLOCKS = 12


def probe(make_backend: Callable[[int], Backend], feeds: dict[str, np.ndarray],
          candidates: list[int], budget_s: float, warmup: int
          ) -> tuple[dict[int, float], dict[int, Backend]]:
    """Timed blocks of one session per candidate, in rotating order (fair under changing
    load); each candidate's estimate is the median of its block means (``block_estimate``). A block
    after a spinning multi-thread session drops its first ``SETTLE_S``: that pool is still
    spinning then and would bill its CPU to this candidate. Every block drops its first run
    (the pool wakes up, caches refill). ``make_backend(threads)`` opens a session (the
    tuner's: its options from ``edgekit.runtime.options.backend_options``)."""
    start = time.perf_counter()
    backends = {t: make_backend(t) for t in candidates}
    for backend in backends.values():
        for _ in range(max(1, warmup)):
            backend.run(feeds)
    rows = max(1, next(iter(feeds.values())).shape[0]) if feeds else 1
    rounds = max(2, BLOCKS // len(candidates))
    settle = {t: SETTLE_S if backends[t].options.allow_spinning and t > 1 else 0.0
              for t in candidates}
    blocks_s = start + budget_s - time.perf_counter() - SETTLE_S * sum(
        1 for t in candidates if settle[t]) * rounds
    block_s = max(0.01, blocks_s / (rounds * len(candidates)))
    blocks: dict[int, list[float]] = {t: [] for t in candidates}
    hard_stop = start + 3 * budget_s
    previous = candidates[-1]
    for r in range(rounds):
        for t in candidates[r % len(candidates):] + candidates[:r % len(candidates)]:
            backend = backends[t]
            skip_s = settle[previous] if previous != t else 0.0
            previous = t
            block_start = time.perf_counter()
            measure_from = block_start + skip_s
            runs = 0
            times: list[float] = []
            while True:
                t0 = time.perf_counter()
                backend.run(feeds)
                t1 = time.perf_counter()
                runs += 1
                if runs > 1 and t0 >= measure_from:  # slow models: from run 2
                    times.append(t1 - t0)
                if t1 - measure_from >= block_s and times or t1 >= hard_stop:
                    break
            if times:
                blocks[t].append(typical(times))
        if time.perf_counter() >= start + budget_s and r >= 1:
            break  # slow model: fewer rounds rather than a longer load
    return {t: block_estimate(b) / rows for t, b in blocks.items()}, backends


def block_estimate(block_means: list[float]) -> float:
    """A candidate's time from the means of its blocks: their median. A burst of other
    work (a test run starting, a cron job) spoils whole blocks of whichever candidate runs
    then; the median ignores a few spoiled blocks, where the mean of all runs would carry
    them. Not the best block: an extra thread under steady load varies the most from block
    to block, and its luckiest block would win. Within a block the mean keeps the stalls
    an extra thread suffers on a busy CPU (see ``typical``)."""
    return float(np.median(block_means)) if block_means else float("nan")
