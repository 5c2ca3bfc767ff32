"""Where independent pieces of a build run: in this process (``local``, the default) or as Ray
tasks (``ray`` / ``ray:ADDRESS``, the ``[ray]`` extra).

An executor only maps a picklable function over picklable items and returns the results in the
items' order; what the pieces are (search candidates, validation shards, matrix cells) is the
caller's business, so a build's result cannot depend on which executor ran it.
"""

from __future__ import annotations

from .base import Executor, ExecutorError

__all__ = ["Executor", "ExecutorError", "parse_executor"]


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
