"""The executor contract."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from edgekit.errors import UserError

T = TypeVar("T")
R = TypeVar("R")

KINDS = ("local", "ray")


class ExecutorError(UserError):
    """An --executor value that names no executor, or one that cannot start."""


class Executor(Protocol):
    """Runs ``fn`` on every item; results come back in the items' order. A piece that raises
    fails the whole map with that error (after the executor's own retries of lost workers)."""

    name: str

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str,
            quiet: bool = False) -> list[R]: ...

    def imap(self, fn: Callable[[T], R], items: Sequence[T], *, label: str,
             quiet: bool = False) -> Iterator[R]:
        """Results one by one in the items' order, for a caller that may stop early (the
        search stops at the first candidate that fits): closing the iterator drops the
        pieces not yet taken. ``local`` computes each piece only when it is asked for;
        ``ray`` keeps one task per worker (and one more) running ahead; on close those finish
        unwatched and no more start."""
        ...

    def close(self) -> None: ...
