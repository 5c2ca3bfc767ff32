"""Ctrl-C within a second in every stage (issue 35: 6.5 s in calibration).

Python acts on a signal between bytecodes of the main thread, so a long native call (a
batch through onnxruntime, an extension's import-time init such as onnx's op schemas, ~1.8 s
here) holds Ctrl-C until it returns. ``interruptible`` runs such a call on a daemon thread
and waits for it on the main thread, where the wait itself is interrupted at once; the call
is then abandoned (its thread ends with the process: ``edgekit`` exits right after the
build's cleanup). Off the main thread it just calls: no signal arrives there anyway.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def interruptible(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)``, with Ctrl-C acted on while it runs."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    outcome: list[R] = []
    failure: list[BaseException] = []

    def call() -> None:
        try:
            outcome.append(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread as is
            failure.append(exc)

    worker = threading.Thread(target=call, name=f"interruptible {getattr(fn, '__name__', '')}",
                              daemon=True)
    worker.start()
    worker.join()  # a signal interrupts this wait (POSIX lock waits), not the call
    if failure:
        raise failure[0]
    return outcome[0]


def preload(*names: str) -> list[ModuleType]:
    """Import heavy extension modules (onnx, torch) with Ctrl-C acted on meanwhile."""
    return [interruptible(importlib.import_module, name) for name in names]
