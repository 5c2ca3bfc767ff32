"""Half of a large input write on a second thread, while the caller does the other half.

With 2+ interpreter threads, LiteRT's workers sleep between invokes (their process CPU is
~1x wall between calls), so the float -> int8 input write of a 224x224 image, which is
memory-bound and runs on the caller's core alone, can use the idle core's cache and time.
numpy releases the GIL inside each ufunc and copy, so the two halves run at once.

The hand-off uses two raw locks (C-level, a futex each) rather than ``threading.Event`` or a
``Semaphore`` (Python-level conditions): one release and one acquire per side per write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

# below this many input elements the hand-off costs more than the half it saves
SPLIT_MIN_ELEMENTS = 1 << 16
# whether a 2+-thread LiteRT backend splits its input write unless told (BackendOptions
# extra "split_write"); see tools/bench_fastpath.py's "split write" row
SPLIT_BY_DEFAULT = False


class RowSplitter:
    """One daemon thread that runs ``fn(*args)`` for the caller's second half. One write at
    a time (the backend's interpreter lock is held around every write)."""

    def __init__(self) -> None:
        self._go = threading.Lock()
        self._done = threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._job: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="edgekit-input-write",
                                        daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., None], mine: tuple[Any, ...],
            theirs: tuple[Any, ...]) -> None:
        """``fn(*mine)`` here and ``fn(*theirs)`` on the helper, both done on return."""
        if self._closed:  # a closed backend's write: both halves here
            fn(*mine)
            fn(*theirs)
            return
        self._job = (fn, theirs)
        self._go.release()
        try:
            fn(*mine)
        finally:
            self._done.acquire()  # never leave the helper writing into a buffer we reuse
            error, self._error = self._error, None  # not left for the next write
        if error is not None:
            raise error

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            job, self._job = self._job, None  # hold no view of the interpreter's buffer:
            if job is None:  # LiteRT refuses to invoke while one is alive
                return
            try:
                job[0](*job[1])
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                self._error = exc.with_traceback(None)
            finally:
                job = None
                self._done.release()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._job = None
            self._go.release()
