"""Pieces run one after another in this process: the default, and the reference every other
executor's result must equal byte for byte."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor:
    name = "local"

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str,
            quiet: bool = False) -> list[R]:
        from tqdm import tqdm

        # disable=None: a bar on a terminal only, so piped logs stay clean
        bar = tqdm(total=len(items), desc=label, unit="task", leave=False, file=sys.stderr,
                   disable=True if quiet else None)
        results = []
        for item in items:
            results.append(fn(item))
            bar.update(1)
        bar.close()
        return results

    def imap(self, fn: Callable[[T], R], items: Sequence[T], *, label: str,
             quiet: bool = False) -> Iterator[R]:
        # lazy: a piece the caller does not ask for is never computed, as before executors
        for item in items:
            yield fn(item)

    def close(self) -> None:
        pass
