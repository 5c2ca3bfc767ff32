"""Whether a model's outputs are per-row: the batcher may only concatenate requests and split
the outputs by rows when output row i depends on input row i alone.

A legal model can break that: a mean over the batch (output ``[1, 3]``), a scalar, or a
normalisation across the batch (output ``[N, 3]`` whose rows mix inputs). The manifest's
shapes rule out the first two; the batcher's own probe rules out the third before it ever
joins two requests, and again at intervals: two different random rows ``a`` and ``b`` run
alone, as ``a ++ b`` and as ``b ++ a``; every joined row must be the row run alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from edgekit.backends import TensorSpec
from edgekit.errors import RunTimeoutError

Run = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


def per_row_from_shapes(inputs: list[TensorSpec], outputs: list[TensorSpec]) -> bool | None:
    """False when the manifest's shapes show an output that cannot follow the batch (a
    scalar, or a fixed leading dimension other than the input's); None when undecided."""
    if not inputs or not inputs[0].shape:
        return False  # no batch axis to split along
    batch = inputs[0].shape[0]
    for spec in outputs:
        if not spec.shape:
            return False
        lead = spec.shape[0]
        if isinstance(lead, int) and lead > 0 and lead != batch:
            return False
    return None


RECHECK_BATCHES = 1000  # joined batches between proofs (4 runs each: < 0.5% of the runs)
RECHECK_S = 60.0  # ... or this long, whichever comes first
MAX_INCONCLUSIVE = 3  # probes that timed out before batching is given up


class PerRowProof:
    """The batcher's standing belief: ``verdict`` (None: not proven yet), ``reason`` (for
    ``stats()``), the probes run; proven before the first batch, again when :meth:`due`."""

    def __init__(self, inputs: list[TensorSpec], outputs: list[TensorSpec]) -> None:
        self.verdict: bool | None = per_row_from_shapes(inputs, outputs)
        self.reason = ("the manifest's output shapes do not follow the batch"
                       if self.verdict is False else "not proven yet")
        self.probes = 0
        self._at = (0, time.perf_counter())  # (joined batches, time) of the last proof

    def due(self, joined: int) -> bool:
        batches, when = self._at
        return self.verdict is None or bool(self.verdict) and (
            joined - batches >= RECHECK_BATCHES or time.perf_counter() - when >= RECHECK_S)

    def prove(self, run: Run, template: dict[str, np.ndarray], axes: dict[str, int],
              joined: int) -> None:
        self.probes += 1
        verdict, why = probe_per_row(run, template, axes, seed=self.probes)
        if verdict is None and self.probes >= MAX_INCONCLUSIVE:
            verdict, why = False, f"{why} {self.probes} times: batching given up"
        self.verdict, self.reason = verdict, why
        self._at = (joined, time.perf_counter())


def probe_rows(template: dict[str, np.ndarray], axes: dict[str, int], seed: int
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Two different one-row requests shaped like ``template`` (a real request): float
    inputs drawn at random (never the caller's data: an all-zeros warm-up request makes
    a batch-mixing model look per-row), integer ones (ids, masks, rates) the request's
    first row and a shuffle of it (random ids may fall outside the model's vocabulary)."""
    rng = np.random.default_rng(seed)
    a: dict[str, np.ndarray] = {}
    b: dict[str, np.ndarray] = {}
    for name, value in template.items():
        axis = axes.get(name, 0)
        row = np.take(value, [0], axis=axis) if value.ndim else value
        if row.dtype.kind == "f":
            a[name] = rng.uniform(-1.0, 1.0, row.shape).astype(row.dtype)
            b[name] = rng.uniform(-1.0, 1.0, row.shape).astype(row.dtype)
        else:
            a[name] = np.ascontiguousarray(row)
            b[name] = rng.permutation(row.reshape(-1)).reshape(row.shape)
    return a, b


def probe_per_row(run: Run, template: dict[str, np.ndarray], axes: dict[str, int] | None = None,
                  seed: int = 0) -> tuple[bool | None, str]:
    """(verdict, why). The batcher's own proof: two different random rows ``a`` and ``b``
    (:func:`probe_rows`) run alone and joined in both orders; True only when every output
    row of ``a ++ b`` and ``b ++ a`` is the row its input gave alone. False when not (or the
    model fails on the probe: then nothing is known, and unproven means unbatched); None when
    a probe run timed out (ask again later)."""
    axes = axes or {}
    first = next(iter(template.values()))
    if first.ndim == 0:
        return False, "the input has no batch axis"
    a, b = probe_rows(template, axes, seed)
    try:
        return _rows_follow(run, a, b, axes)
    except RunTimeoutError:
        return None, "the per-row probe timed out"
    except Exception as exc:  # noqa: BLE001 - the probe only learns; requests report errors
        return False, f"the per-row probe failed ({type(exc).__name__}: {str(exc)[:120]})"


def _close(x: np.ndarray, y: np.ndarray, scale: float) -> bool:
    return x.shape == y.shape and bool(np.allclose(x, y, rtol=1e-3, atol=1e-6 + scale,
                                                   equal_nan=True))


def _rows_follow(run: Run, a: dict[str, np.ndarray], b: dict[str, np.ndarray],
                 axes: dict[str, int]) -> tuple[bool, str]:
    out_a, out_b = run(a), run(b)
    for order, (first, second, y1, y2) in (("a++b", (a, b, out_a, out_b)),
                                           ("b++a", (b, a, out_b, out_a))):
        joined = run({k: np.concatenate([first[k], second[k]], axis=axes.get(k, 0))
                      for k in first})
        for j, (ya, yb, yab) in enumerate(zip(y1, y2, joined, strict=True)):
            if ya.ndim == 0 or yb.ndim == 0 or yab.ndim == 0 or yab.shape[0] != 2 \
                    or ya.shape[0] != 1 or yb.shape[0] != 1:
                return False, f"output {j} does not keep one row per input row"
            scale = 1e-3 * float(max(np.abs(ya).max(initial=0.0), np.abs(yb).max(initial=0.0)))
            if not (_close(yab[:1], ya, scale) and _close(yab[1:], yb, scale)):
                return False, (f"output {j}: rows of the joined run {order} differ from the "
                               "rows run alone (the model mixes rows across the batch)")
    return True, "proven on two random rows in both orders"
