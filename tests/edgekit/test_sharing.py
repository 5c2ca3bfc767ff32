"""Other models of the process sharing the cores: the overlap figure, and the tuner's
re-tune when a second model starts (or stops) running alongside, which proc/stat cannot show.
Stepped clock and recorded executions; no assertion on how fast anything ran."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit import sharing
from edgekit.policy import TunerOptions
from edgekit.sharing import threads_alongside

from .runtime_models import mlp_onnx, write_model_artifact
from .test_tuner import StepClock, tuner_for


def test_only_executions_that_overlap_count() -> None:
    starts, ends = np.array([0.0, 2.0]), np.array([1.0, 3.0])  # ours: two 1 s runs
    over = (np.array([0.5]), np.array([2.5]), np.array([2.0]))  # 2 threads across both
    assert threads_alongside(starts, ends, [over]) == pytest.approx(1.0)  # 2 x 1 s / 2 s
    turns = (np.array([1.0, 3.0]), np.array([2.0, 4.0]), np.array([2.0, 2.0]))
    assert threads_alongside(starts, ends, [turns]) == 0.0  # served in turns: no sharing
    both = (np.array([0.0, 2.0]), np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    assert threads_alongside(starts, ends, [over, both]) == pytest.approx(2.0)


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("share") / "mlp.edgekit"
    return write_model_artifact(out, mlp_onnx(), ["N", 16])


def test_a_second_model_running_alongside_triggers_a_retune(mlp_artifact: Path,
                                                            tmp_path: Path) -> None:
    with edgekit.load(mlp_artifact, threads=1, power_root=str(tmp_path)) as ours, \
            edgekit.load(mlp_artifact, threads=2, power_root=str(tmp_path)) as other:
        sharing.register(other.session)
        clock = StepClock()
        tuner = tuner_for(ours, TunerOptions(cooldown_s=0.0, strikes=2, min_samples=5), clock)
        # ends ahead of now: these runs are the current traffic whatever the machine's pace
        t = [time.perf_counter() + 1000.0]

        def window(alongside: bool) -> str | None:
            for _ in range(10):
                ours.session.recorder.add(t[0], t[0] + 1e-3, 1, 1)
                if alongside:  # the other model's 2-thread runs over the same millisecond
                    other.session.recorder.add(t[0], t[0] + 1e-3, 1, 2)
                else:  # ... or in between ours (turns: no core shared)
                    other.session.recorder.add(t[0] + 1e-3, t[0] + 2e-3, 1, 2)
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


def test_old_executions_are_not_sharing_now(mlp_artifact: Path, tmp_path: Path) -> None:
    with edgekit.load(mlp_artifact, threads=1, power_root=str(tmp_path)) as ours, \
            edgekit.load(mlp_artifact, threads=2, power_root=str(tmp_path)) as other:
        sharing.register(other.session)
        t = time.perf_counter() - 3600.0  # an hour ago, side by side
        for _ in range(10):
            ours.session.recorder.add(t, t + 1e-3, 1, 1)
            other.session.recorder.add(t, t + 1e-3, 1, 2)
            t += 2e-3
        assert sharing.shared_threads(ours.session, 0) is None
        # a reference over a span: 2 threads during half of it
        assert sharing.shared_during(ours.session, t - 0.02, t) == pytest.approx(1.0)
