"""Accuracy decisions a user can trust (issue 31): every figure with N and an interval; a build
refused only when the interval lies past the budget; labels judged by accuracy, not agreement."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters import build
from edgekit.converters.context import BuildConfig
from edgekit.converters.metrics import get_metric
from edgekit.converters.metrics.evidence import Evidence, PerSample, compare
from edgekit.converters.metrics.task_accuracy import BuildMetric
from edgekit.targets import load_profile

from edgekit.errors import BudgetError

from ..conftest import DIGITS_NPZ
from .sizing import outlier_digits


def _logits(classes: np.ndarray, n_classes: int = 10, margin: float = 5.0) -> np.ndarray:
    out = np.zeros((len(classes), n_classes), np.float32)
    out[np.arange(len(classes)), classes] = margin
    return out


def test_a_near_tie_on_32_samples_cannot_tell_and_says_how_many_would() -> None:
    """4 of 32 top-1 decisions changed: 12.5 points against a 10-point agreement budget, but
    the exact interval reaches from 3.5 to 29: the evidence cannot tell, so the build ships."""
    flips = np.zeros(32)
    flips[:4] = 1
    evidence = Evidence.of(PerSample.decisions(flips))
    assert evidence.samples == 32 and evidence.figure == pytest.approx(12.5)
    assert evidence.low < 10 < evidence.high
    assert evidence.verdict(10.0) == "cannot tell"
    need = evidence.samples_to_tell(10.0)
    assert need is not None and need > 32
    # at the same rate, that many samples do tell
    assert Evidence.of(PerSample.decisions(np.r_[np.ones(round(need / 8)), np.zeros(need - round(need / 8))])
                       ).verdict(10.0) != "cannot tell"
    line = evidence.judged(10.0)
    assert "cannot tell against the budget of 10 points with 32 samples" in line  # its unit
    assert f"about {need} would tell" in line
    assert Evidence.of(PerSample.decisions(flips)).judged(50.0).endswith(": budget 50 points met")


def test_a_clear_miss_is_missed_and_a_clean_run_is_met() -> None:
    flips = np.zeros(64)
    flips[:40] = 1
    assert Evidence.of(PerSample.decisions(flips)).verdict(10.0) == "missed"
    clean = Evidence.of(PerSample.decisions(np.zeros(400)))
    assert clean.low == 0 and 0 < clean.high < 1.0 and clean.verdict(1.0) == "met"


def test_bootstrap_interval_is_the_same_every_time() -> None:
    rng = np.random.default_rng(0)
    parts = PerSample("ratio", rng.integers(0, 3, 50).astype(float), rng.integers(5, 9, 50).astype(float))
    first, second = Evidence.of(parts), Evidence.of(parts)
    assert (first.low, first.high) == (second.low, second.high) and first.low < first.figure < first.high


def test_paired_comparison_with_the_reference() -> None:
    ours = np.zeros(64)
    ours[:3] = 1
    theirs = np.zeros(64)
    theirs[:5] = 1
    versus = compare(PerSample.decisions(ours), PerSample.decisions(theirs))
    assert versus.figure == pytest.approx(-100 * 2 / 64) and versus.low < 0 < versus.high  # no worse


def test_a_labelled_set_decides_by_accuracy_not_agreement() -> None:
    """Int8 changes 20 of 64 decisions, all between wrong classes: 31 points of disagreement
    (a miss of the 10-point agreement budget) but no accuracy lost against the labels."""
    profile = load_profile("rpi4")
    truth = np.arange(64) % 10
    float_pred = truth.copy()
    float_pred[32:] = (truth[32:] + 1) % 10  # float is wrong on half
    int8_pred = float_pred.copy()
    int8_pred[32:52] = (truth[32:52] + 2) % 10  # int8 moves 20 wrong answers to other wrong classes
    reference, candidate = [_logits(float_pred)], [_logits(int8_pred)]
    labelled = BuildMetric("top1", "test", get_metric("top1"), use_labels=True)
    unlabelled = BuildMetric("top1", "test", get_metric("top1"), use_labels=False)
    by_accuracy = labelled.score(reference, candidate, truth, ["logits"], 1.0)
    by_agreement = unlabelled.score(reference, candidate, None, ["logits"], 1.0)
    assert labelled.budget(profile) == (1.0, "accuracy") and unlabelled.budget(profile)[1] == "agreement"
    assert by_accuracy.drop == 0 and by_accuracy.evidence.verdict(1.0) != "missed"
    assert by_agreement.drop == pytest.approx(100 * 20 / 64)
    assert by_agreement.evidence.verdict(unlabelled.budget(profile)[0]) == "missed"


def test_a_crushed_channel_is_refused_with_its_interval(tmp_path) -> None:
    """The outlier digits CNN: one channel's outlier crushes the rest on the int8 grid. With the
    guard's work cut to nothing the build is refused (exit 3) naming the figure's interval, N,
    the metric judged and how to pick another."""
    source = outlier_digits(tmp_path)
    with pytest.raises(BudgetError) as refused:
        build(str(source), target="host", calib=str(DIGITS_NPZ), output=tmp_path / "crushed.edgekit",
              formats=["onnx"], quiet=True, guard_time=0)
    message = str(refused.value)
    assert "95% interval" in message and "N=" in message
    assert "judged by metric 'top1'" in message and "--metric" in message
    assert not (tmp_path / "crushed.edgekit").exists()


def test_config_keeps_guard_work_bounds() -> None:
    config = BuildConfig(source="m.onnx")
    assert config.guard_steps >= 1 and config.guard_time > 0


def test_a_refusal_names_the_layer_at_fault() -> None:
    """The exit 3's text names the tensor whose restoring alone helped most, with its figure."""
    from edgekit.converters.search.autoguard import GuardOutcome, at_fault
    from edgekit.converters.search.guard import Sensitivity

    assert at_fault(GuardOutcome()) == ""
    head = Sensitivity("sigmoid_0.tmp_0", "activation", ["p2o.Sigmoid.0"], 21.5, measured="task", task_drop=50.0)
    text = at_fault(GuardOutcome(ranking=[head]))
    assert "layer at fault" in text and "'sigmoid_0.tmp_0'" in text and "50.00 points" in text
    stretch = Sensitivity("12 tensors a .. b", "activation", ["n1", "n2"], 30.0, measured="task", task_drop=0.0)
    text = at_fault(GuardOutcome(ranking=[stretch, head], best_single=head))
    assert "'12 tensors a .. b'" in text and "of single tensors" in text and "'sigmoid_0.tmp_0'" in text


def test_the_exact_interval_is_scipys_binomtest_interval() -> None:
    """Beta quantiles give the interval scipy.stats.binomtest's exact method finds by root
    finding: the same figures to 1e-11 at every count (0 and n included)."""
    from edgekit.converters.metrics.evidence import _clopper_pearson
    from scipy.stats import binomtest

    for confidence in (0.9, 0.95, 0.99):
        for n in (1, 2, 7, 20, 64, 200):
            for k in range(n + 1):
                ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
                low, high = _clopper_pearson(k, n, confidence)
                assert abs(low - ci.low) < 1e-11 and abs(high - ci.high) < 1e-11, (k, n, confidence)
    assert _clopper_pearson(0, 0) == (0.0, 1.0)
