"""Whether a model's outputs are per-row: the batcher may only concatenate requests and split
the outputs by rows when output row i depends on input row i alone.

A legal model can break that: a mean over the batch (output ``[1, 3]``), a scalar, or a
normalisation across the batch (output ``[N, 3]`` whose rows mix inputs). The manifest's
shapes rule out the first two; one probe at the first request rules out the third: run
``a``, ``b`` and ``a ++ b`` and check that the joint run's rows are the separate runs' rows.
"""

from __future__ import annotations

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


def probe_per_row(run: Run, feeds: dict[str, np.ndarray]) -> bool | None:
    """Run ``feeds`` (one valid request), a variant of it and both joined; True when every
    output row follows its input row, False when not, None when every probe failed or one
    timed out (a bad request: ask again with the next one)."""
    first = next(iter(feeds.values()))
    if first.ndim == 0:
        return False
    flipped = {k: np.ascontiguousarray(np.flip(v, axis=tuple(range(1, v.ndim))) if v.ndim > 1
                                       else v[::-1]) for k, v in feeds.items()}
    for other in (flipped, feeds):  # the variant may be out of the model's domain
        try:
            return _rows_follow(run, feeds, other)
        except RunTimeoutError:
            return None  # another try would wait as long again
        except Exception:  # noqa: BLE001 - the probe only learns; the requests report errors
            continue
    return None


def _rows_follow(run: Run, a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    rows_a = next(iter(a.values())).shape[0]
    rows_b = next(iter(b.values())).shape[0]
    out_a = run(a)
    out_b = run(b)
    joined = run({k: np.concatenate([a[k], b[k]]) for k in a})
    for ya, yb, yab in zip(out_a, out_b, joined, strict=True):
        if (ya.ndim == 0 or yb.ndim == 0 or yab.ndim == 0 or ya.shape[0] != rows_a
                or yb.shape[0] != rows_b or yab.shape[0] != rows_a + rows_b):
            return False
        scale = 1e-3 * float(max(np.abs(ya).max(initial=0.0), np.abs(yb).max(initial=0.0)))
        if not (np.allclose(yab[:rows_a], ya, rtol=1e-3, atol=1e-6 + scale, equal_nan=True)
                and np.allclose(yab[rows_a:], yb, rtol=1e-3, atol=1e-6 + scale,
                                equal_nan=True)):
            return False
    return True
