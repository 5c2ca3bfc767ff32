"""A run with a time limit: the call runs on a helper thread and the caller waits at most
``timeout_s``. Python cannot stop a thread inside native code, so on a timeout the helper is
abandoned (onnxruntime is also told to stop the run: ``Backend.terminate``) and the next call
gets a new helper."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")
A = TypeVar("A")


class TimedRunner:
    """One daemon thread running calls handed to it, one at a time."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[[A], T], arg: A, timeout_s: float) -> T:
        """``fn(arg)`` or ``TimeoutError`` after ``timeout_s`` (the call goes on, abandoned)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, args=(self._jobs,),
                                            name="edgekit-run", daemon=True)
            self._thread.start()
        future: Future = Future()
        self._jobs.put((fn, arg, future))
        try:
            return future.result(timeout_s)
        except TimeoutError:
            if future.done():
                raise  # the call's own TimeoutError
            self._jobs.put(None)  # the stuck thread exits once its call returns, if ever
            self._jobs, self._thread = queue.SimpleQueue(), None
            raise

    def stop(self) -> None:
        self._jobs.put(None)

    @staticmethod
    def _loop(jobs: queue.SimpleQueue) -> None:
        while (job := jobs.get()) is not None:
            fn, arg, future = job
            try:
                future.set_result(fn(arg))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                future.set_exception(exc)
