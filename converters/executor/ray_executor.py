"""Pieces as Ray tasks: a local Ray cluster started here (``ray``) or an existing one
(``ray:ADDRESS``, e.g. ``ray:10.0.0.5:6379`` after ``ray start --head`` there, or ``ray:auto``).

Ray does the scheduling, the object transfer and the retries; this module only maps a function
over items with it. A task whose worker dies (killed, out of memory, node lost) is re-run on
another worker (``max_retries``); an exception raised *by the function* is not retried (the
build is deterministic: it would fail again) and comes back as the function's own typed error.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar

from edgekit.errors import InternalError

from .base import ExecutorError

T = TypeVar("T")
R = TypeVar("R")

RAY_EXTRA = 'pip install "edgekit-sdk[ray]"'
# A lost worker's task runs again this many times before the map fails: enough for a killed
# worker or a lost node, few enough that a task that kills every worker it lands on stops.
MAX_RETRIES = 3


def _import_ray() -> Any:
    # Ray phones home with usage statistics unless told not to; a build never should.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise ExecutorError(f"--executor ray needs Ray, which is not installed here; expected "
                            f"the [ray] extra: {RAY_EXTRA}") from exc
    return ray


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    return fn(item)


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None) -> None:
        """``address`` None: start a local cluster with ``num_cpus`` workers (default: this
        machine's cores). Inside a process where Ray is already initialized, that cluster is
        used (and left running by ``close``)."""
        self._ray = _import_ray()
        self.address = address
        self.num_cpus = num_cpus
        self._owns = False
        self._connect()

    def _connect(self) -> None:
        ray, address, num_cpus = self._ray, self.address, self.num_cpus
        if ray.is_initialized():
            return
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False,
                 "include_dashboard": False, "configure_logging": True}
        try:
            if address is None:
                # "local": a new cluster of this machine's own, even where `ray start`
                # left one running (that one is ray:auto)
                ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                         _node_ip_address="127.0.0.1", **quiet)
            else:
                ray.init(address=address, **quiet)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = "a local Ray cluster" if address is None else f"the Ray cluster at {address!r}"
            raise ExecutorError(f"could not start or reach {where}: {exc}; expected "
                                "--executor ray (a local cluster) or ray:HOST:PORT of a running "
                                "`ray start --head`") from exc
        self._owns = True

    @property
    def workers(self) -> int:
        """CPUs the cluster offers: how many tasks run at once."""
        return int(self._ray.cluster_resources().get("CPU", 1))

    def _submitter(self, fn: Callable[[T], R], label: str) -> Callable[[T], Any]:
        ray = self._ray
        self._connect()  # a cluster shut down since (by its owner) is started again
        # the task's name is the label: `ray::<label>` in ps and in Ray's own tools
        remote = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(_call).options(
            name=label)
        fn_ref = ray.put(fn)  # shipped once, not once per item
        return lambda item: remote.remote(fn_ref, item)

    def _window(self) -> int:
        # Tasks in flight at once: one per worker and one queued behind, so a worker never
        # waits for the driver. Never more: a map that stops early leaves at most this many
        # running, because tasks are not cancelled. Ray 2.60's ray.cancel races a task's
        # reply and aborts the driver ("Check failed: it != submissible_tasks_.end() Tried to
        # complete task that was not pending", seen in 3 of ~40 runs of the error test here,
        # and it ended a CI run).
        return self.workers + 1

    def _error(self, label: str, exc: Exception) -> BaseException:
        """The error a map raises for a failed task (tasks still running finish unwatched)."""
        ray = self._ray
        if isinstance(exc, ray.exceptions.RayTaskError):
            cause = exc.cause
            if isinstance(cause, BaseException):
                return cause  # the function's own error, typed as it raised it
            return InternalError(f"{label}: a task failed: {exc}")
        return InternalError(f"{label}: a task was lost after {MAX_RETRIES} retries "
                             f"(worker or node died each time): {exc}")

    def map(self, fn: Callable[[T], R], items: Sequence[T], *, label: str,
            quiet: bool = False) -> list[R]:
        from tqdm import tqdm

        ray = self._ray
        submit, window = self._submitter(fn, label), self._window()
        refs: list[Any] = []
        bar = tqdm(total=len(items), desc=label, unit="task", leave=False, file=sys.stderr,
                   disable=True if quiet else None)  # None: a bar on a terminal only
        try:
            pending: list[Any] = []
            while len(refs) < len(items) or pending:
                while len(refs) < len(items) and len(pending) < window:
                    refs.append(submit(items[len(refs)]))
                    pending.append(refs[-1])
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    ray.get(ref)  # the first failure stops the map, not the last
                bar.update(len(done))
            return [ray.get(ref) for ref in refs]
        except ray.exceptions.RayError as exc:
            raise self._error(label, exc) from None
        finally:
            bar.close()

    def imap(self, fn: Callable[[T], R], items: Sequence[T], *, label: str,
             quiet: bool = False) -> Iterator[R]:
        ray = self._ray
        submit, window = self._submitter(fn, label), self._window()
        rest = iter(items)
        ahead = deque(submit(item) for item in islice(rest, window))
        while ahead:
            ref = ahead.popleft()
            for item in islice(rest, 1):  # keep the window full while this one is awaited
                ahead.append(submit(item))
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise self._error(label, exc) from None
            yield result  # closed here: the tasks ahead finish unwatched, none more starts

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False
