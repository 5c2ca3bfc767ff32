"""A queued request of the batcher, and the checks on joining and splitting a batch."""

from __future__ import annotations

import time
from concurrent.futures import Future

import numpy as np

from edgekit.errors import InferenceError
from edgekit.runtime.session import describe_array


class Request:
    """One ``submit``: its feeds, its future, when it came, its rows and what it may join."""

    __slots__ = ("feeds", "future", "t", "rows", "key")

    def __init__(self, feeds: dict[str, np.ndarray], future: Future,
                 axes: dict[str, int] | None = None) -> None:
        self.feeds = feeds
        self.future = future
        self.t = time.perf_counter()
        axes = axes or {}
        name, first = next(iter(feeds.items()))
        self.rows = int(first.shape[axes.get(name, 0)]) if first.ndim else 1
        # requests batch together only when every non-batch dimension agrees
        self.key = tuple((n, a.shape[:axes.get(n, 0)] + a.shape[axes.get(n, 0) + 1:])
                         for n, a in feeds.items())


def mark_running(future: Future) -> bool:
    """Mark a future running; False when it was cancelled or already failed (close)."""
    try:
        return not future.done() and future.set_running_or_notify_cancel()
    except RuntimeError:  # failed by close(timeout=...) between the two calls
        return False


def check_rows(outputs: list[np.ndarray], rows: int, runtime: str,
               axes: list[int] | None = None) -> None:
    """Splitting by rows is only right when every output has one row per input row."""
    for i, output in enumerate(outputs):
        axis = axes[i] if axes and i < len(axes) else 0
        if output.ndim <= axis or output.shape[axis] != rows:
            raise InferenceError(f"{runtime}: output {i} of a {rows}-row batch has shape "
                                 f"{list(output.shape)}; expected {rows} rows to split")


def describe_feeds(feeds: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{name} {describe_array(a)}" for name, a in feeds.items())
