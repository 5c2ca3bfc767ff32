"""Other models of the process sharing the cores: the overlap figure, and the tuner's
re-tune when a second model starts (or stops) running alongside, which proc/stat cannot show.
Stepped clock and recorded executions; no assertion on how fast anything ran."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from edgekit.targets import load_profile

from edgekit.adapt import sharing
from edgekit.adapt.sharing import threads_alongside
from edgekit.adapt.tuner import ThreadTuner
from edgekit.artifact.manifest import ModelEntry
from edgekit.backends import BackendOptions, TensorSpec
from edgekit.backends.onnxruntime import OnnxRuntimeBackend
from edgekit.device.power import PowerMonitor
from edgekit.runtime.options import TunerOptions
from edgekit.runtime.session import Session

from ..runtime_models import mlp_onnx
from .test_tuner import StepClock


def test_only_executions_that_overlap_count() -> None:
    starts, ends = np.array([0.0, 2.0]), np.array([1.0, 3.0])  # ours: two 1 s runs
    over = (np.array([0.5]), np.array([2.5]), np.array([2.0]))  # 2 threads across both
    assert threads_alongside(starts, ends, [over]) == pytest.approx(1.0)  # 2 x 1 s / 2 s
    turns = (np.array([1.0, 3.0]), np.array([2.0, 4.0]), np.array([2.0, 2.0]))
    assert threads_alongside(starts, ends, [turns]) == 0.0  # served in turns: no sharing
    both = (np.array([0.0, 2.0]), np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    assert threads_alongside(starts, ends, [over, both]) == pytest.approx(2.0)


def mlp_session(threads: int) -> Session:
    """A live session without an artifact (cheap): the tuner sees only ``SessionLike``."""
    spec, out = [TensorSpec("x", ("N", 16))], [TensorSpec("probs", ("N", 10))]
    entry = ModelEntry(format="onnx", path="model.onnx", runtime="onnxruntime", bytes=None,
                       data={})
    session = Session(mlp_onnx(), entry, OnnxRuntimeBackend, spec, out)
    session.start(session.make_backend(BackendOptions(threads=threads)))
    return session


@pytest.fixture()
def ours_and_other() -> Iterator[tuple[Session, Session]]:
    ours, other = mlp_session(1), mlp_session(2)
    sharing.register(other)
    yield ours, other
    ours.close()
    other.close()


def test_a_second_model_running_alongside_triggers_a_retune(
        ours_and_other: tuple[Session, Session], tmp_path: Path) -> None:
    ours, other = ours_and_other
    clock = StepClock()
    tuner = ThreadTuner(ours, "latency", PowerMonitor(str(tmp_path)), load_profile("rpi4"),
                        TunerOptions(cooldown_s=0.0, strikes=2, min_samples=5),
                        power_root=str(tmp_path), clock=clock)
    # ends ahead of now: these runs are the current traffic whatever the machine's pace
    t = [time.perf_counter() + 1000.0]

    def window(alongside: bool) -> str | None:
        for _ in range(10):
            ours.recorder.add(t[0], t[0] + 1e-3, 1, 1)
            if alongside:  # the other model's 2-thread runs over the same millisecond
                other.recorder.add(t[0], t[0] + 1e-3, 1, 2)
            else:  # ... or in between ours (turns: no core shared)
                other.recorder.add(t[0] + 1e-3, t[0] + 2e-3, 1, 2)
            t[0] += 2e-3
        clock.advance(0.25)
        return tuner.check()

    assert window(False) is None and window(False) is None  # tuned alone, served in turns
    assert window(True) is None  # one strike is not enough (hysteresis)
    assert window(True) == "shared 0.00->2.00 threads"
    tuner._tuned_shared = 2.0  # as re-tuned under the sharing ...
    tuner._shared_strikes = 0
    assert window(True) is None and window(True) is None  # ... steady: nothing to do
    assert window(False) is None
    assert window(False) == "shared 2.00->0.00 threads"  # the other model left


def test_old_executions_are_not_sharing_now(ours_and_other: tuple[Session, Session]) -> None:
    ours, other = ours_and_other
    t = time.perf_counter() - 3600.0  # an hour ago, side by side
    for _ in range(10):
        ours.recorder.add(t, t + 1e-3, 1, 1)
        other.recorder.add(t, t + 1e-3, 1, 2)
        t += 2e-3
    assert sharing.shared_threads(ours, ours.recorder.window()) is None
    # a reference over a span: 2 threads during half of it
    assert sharing.shared_during(ours, t - 0.02, t) == pytest.approx(1.0)
