"""``edgekit.load(..., threads="auto", allow_spinning=False)``: no session the thread tuner
opens spin-waits, whatever the policy (the bug: the tuner derived spinning from the policy
alone, so a "balanced" tuner spun although the caller had said no).

Real onnxruntime sessions; the check reads each session's own options
(``InferenceSession.get_session_options``), as onnxruntime was given them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.backends import Backend, BackendOptions
from edgekit.runtime.session import Session

from ..fake_sysfs import laptop_tree
from ..runtime_models import mlp_onnx, write_model_artifact

SPIN = "session.intra_op.allow_spinning"
FAST = {"budget_s": 0.2, "retune_budget_s": 0.1, "check_s": 0.02, "cooldown_s": 0.0}


def spins(backend: Backend) -> bool:
    """Whether onnxruntime's intra-op pool of this session spin-waits (its default when
    the entry is absent)."""
    options = backend.session.get_session_options()
    try:
        return options.get_session_config_entry(SPIN) != "0"
    except Exception:  # onnxruntime: "does not have configuration with key": the default
        return True


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spin") / "mlp.edgekit"
    x = np.random.default_rng(0).random((4, 16), dtype=np.float32)
    return write_model_artifact(out, mlp_onnx(), ["N", 16], vectors=x)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """(threads, spins) of every session the model's Session makes, read as it is made."""
    seen: list[tuple[int, bool]] = []
    make = Session.make_backend

    def recording(self: Session, options: BackendOptions) -> Backend:
        backend = make(self, options)
        seen.append((backend.options.threads, spins(backend)))
        return backend

    monkeypatch.setattr(Session, "make_backend", recording)
    return seen


@pytest.mark.parametrize("policy", ["balanced", "latency"])
def test_no_session_the_tuner_opens_spins_when_the_caller_says_no(
        artifact: Path, tmp_path: Path, opened: list[tuple[int, bool]], policy: str) -> None:
    root = laptop_tree(tmp_path)
    with edgekit.load(artifact, backend="onnxruntime", threads="auto", policy=policy,
                      allow_spinning=False, power_root=str(root), tuner=FAST) as model:
        assert model.tuner is not None
        at_load = len(opened)
        model.tuner.retune("test: offline re-probe")
        assert not spins(model.backend)
    assert at_load >= 1 and len(opened) > at_load  # the load-time probe and the re-probe
    assert [t for t, spinning in opened if spinning] == []


def test_the_tuner_still_spins_where_the_caller_allows_it(
        artifact: Path, tmp_path: Path, opened: list[tuple[int, bool]]) -> None:
    # the control: the same load with spinning allowed spins (so the check above can fail)
    root = laptop_tree(tmp_path)
    with edgekit.load(artifact, backend="onnxruntime", threads="auto", policy="latency",
                      power_root=str(root), tuner=FAST) as model:
        assert spins(model.backend)
    assert opened and all(spinning for _, spinning in opened)


def test_a_fixed_count_does_not_spin_when_the_caller_says_no(
        artifact: Path, opened: list[tuple[int, bool]]) -> None:
    with edgekit.load(artifact, backend="onnxruntime", threads=2, allow_spinning=False) as model:
        assert not spins(model.backend)
    assert opened == [(2, False)]
