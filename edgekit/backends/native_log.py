"""Silence the one line the LiteRT C++ runtime prints on every interpreter creation.

``INFO: Created TensorFlow Lite XNNPACK delegate for CPU.`` is written by C++ straight to
file descriptor 2, below Python's ``sys.stderr``, and no LiteRT option turns it off; it
appeared in every CLI output, ``-q`` included. ``quiet_native_info()`` points fd 2 at a
temporary file while the interpreter is created, then replays everything else it caught,
so that a real native error message is never lost.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

# Informational lines the runtime prints on success; anything else is replayed.
NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)
_LOCK = threading.Lock()  # fd 2 is process-wide: one redirection at a time


@contextlib.contextmanager
def quiet_native_info() -> Iterator[None]:
    """Drop the runtime's INFO lines written to fd 2 inside the block; keep the rest."""
    with _LOCK:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):  # no real fd 2 (embedded interpreters): nothing to do
            yield
            return
        with tempfile.TemporaryFile() as caught:
            os.dup2(caught.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                caught.seek(0)
                kept = [line for line in caught.read().decode(errors="replace").splitlines(True)
                        if line.strip() not in NOISE]
                if kept:
                    sys.stderr.write("".join(kept))
                    sys.stderr.flush()
