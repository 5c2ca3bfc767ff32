"""Where independent pieces of a build run: in this process (``local``, the default) or as Ray
tasks (``ray`` / ``ray:ADDRESS``, the ``[ray]`` extra).

An executor only maps a picklable function over picklable items and returns the results in the
items' order; what the pieces are (search candidates, validation shards, matrix cells) is the
caller's business, so a build's result cannot depend on which executor ran it.
"""

from __future__ import annotations

from .base import Executor, ExecutorError, parse_executor

__all__ = ["Executor", "ExecutorError", "parse_executor"]
