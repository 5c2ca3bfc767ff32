"""The executor contract and the ``--executor`` spelling."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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

    def close(self) -> None: ...


def parse_executor(spec: str) -> Executor:
    """``local`` | ``ray`` | ``ray:ADDRESS`` (e.g. ``ray:127.0.0.1:6379`` or ``ray:auto``)."""
    kind, _, address = spec.partition(":")
    if kind == "local" and not address:
        from .local import LocalExecutor
        return LocalExecutor()
    if kind == "ray":
        from .ray_executor import RayExecutor  # the [ray] extra; imported only when asked for
        return RayExecutor(address or None)
    raise ExecutorError(f"--executor must be one of local, ray, ray:ADDRESS; got {spec!r}")
