"""Budgets: profile defaults, flag overrides, checks with margins, and the figures they use."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.search import budgets as B
from edgekit.targets import load_profile

from edgekit.errors import UserError


def test_profile_defaults_and_overrides():
    rpi4 = load_profile("rpi4")
    plain = B.resolve(rpi4)
    assert plain.limits == {k: float(getattr(rpi4.budgets, k)) for k in B.BUDGETS}
    assert set(plain.sources.values()) == {"profile rpi4"}
    tight = B.resolve(rpi4, {"latency_ms": 40, "ram_mb": 64.0})
    assert tight.limits["latency_ms"] == 40.0 and tight.sources["latency_ms"] == "flag"
    assert tight.limits["storage_mb"] == rpi4.budgets.storage_mb
    # a faster answer is not more answers per second: the power rate stays the profile's
    assert tight.rate_hz == pytest.approx(1000.0 / rpi4.budgets.latency_ms)
    assert B.resolve(rpi4, {"rate_hz": 2}).rate_hz == 2.0


@pytest.mark.parametrize("overrides, match", [
    ({"latency": 10}, "unknown budget.*latency_ms"),
    ({"ram_mb": -1}, "ram_mb.*positive"),
    ({"storage_mb": 0}, "storage_mb.*positive"),
    ({"power_w": "lots"}, "power_w.*number"),
])
def test_bad_budgets_name_what_is_allowed(overrides, match):
    with pytest.raises(UserError, match=match):
        B.resolve(load_profile("rpi4"), overrides)


def test_zero_accuracy_drop_is_allowed():
    assert B.resolve(load_profile("rpi4"), {"accuracy_drop": 0}).limits["accuracy_drop"] == 0


def test_checks_say_which_budget_missed_and_by_how_much():
    budgets = B.resolve(load_profile("rpi4"), {"latency_ms": 10, "accuracy_drop": 1})
    figures = {"storage_mb": 1.0, "ram_mb": 100.0, "latency_ms": 12.5, "power_w": 3.0,
               "accuracy_drop": 0.5}
    verdict = B.check(figures, budgets)
    assert not verdict.fits and verdict.hardware_fits() is False
    assert [c.budget for c in verdict.missed] == ["latency_ms"]
    assert verdict.missed[0].miss() == "latency 12.5 ms > 10 ms (+25%)"
    figures["latency_ms"] = 9.5
    verdict = B.check(figures, budgets)
    assert verdict.fits and not verdict.fits_with(0.10)  # 9.5 > 10 * 0.9
    assert verdict.fits_with(0.05)
    with pytest.raises(KeyError, match="power_w"):
        B.check({"latency_ms": 1.0}, budgets, ("latency_ms", "power_w"))


def test_sustained_power_scales_with_duty_cycle():
    rpi4 = load_profile("rpi4")
    idle, full = rpi4.power.idle_w, rpi4.power.full_load_w
    assert B.sustained_power(rpi4, 4, 0.0, 10) == pytest.approx(idle)
    assert B.sustained_power(rpi4, 4, 0.05, 10) == pytest.approx(idle + 0.5 * (full - idle))
    assert B.sustained_power(rpi4, 4, 1.0, 10) == pytest.approx(full)  # busy all the time


def test_accuracy_drop_in_points_or_cosine():
    reference = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0, 1, 2, 3]] * 5
    labels = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    worse = reference.copy()
    worse[0] = [0, 5, 0, 0]  # one of eight now wrong
    labelled = B.accuracy_figures(reference, worse, labels)
    assert labelled["accuracy_drop"] == pytest.approx(12.5)
    assert labelled["metric"] == "top-1 points"
    unlabelled = B.accuracy_figures(reference, worse, None)
    assert unlabelled["accuracy_drop"] == pytest.approx((1 - unlabelled["cosine"]) * 100)
    assert unlabelled["accuracy_drop"] == pytest.approx(12.5)  # one orthogonal row of eight


def test_storage_estimate_sees_zeros_compress():
    rng = np.random.default_rng(0)
    dense = rng.integers(-127, 128, 100_000, dtype=np.int8)
    sparse = dense.copy()
    sparse[rng.permutation(dense.size)[: dense.size // 2]] = 0
    assert B.storage_estimate(sparse.tobytes()) < 0.8 * B.storage_estimate(dense.tobytes())
    two = B.storage_estimate(dense.tobytes(), copies=2)
    assert two == pytest.approx(2 * B.storage_estimate(dense.tobytes()) - B.MANIFEST_BYTES / B.MB)


def test_a_thread_count_that_meets_latency_and_power_is_chosen_before_pruning():
    from edgekit.converters.estimate import estimate

    from ..conftest import DIGITS_ONNX

    profile = load_profile("rpi4")
    est = estimate(str(DIGITS_ONNX), profile, threads=[1, 2, 3, 4])
    default = B.hardware_figures(est, profile, 100.0)
    assert default["threads"] == profile.threads == 4
    # a power limit the 4-thread figure misses but a thread count at least as fast as it
    # meets: the least-power count that still meets latency is taken
    by_threads = {}
    for t in [1, 2, 3, 4]:
        latency = est.variants["int8"].latency_s[t]
        by_threads[t] = (B.sustained_power(profile, t, latency, 100.0), latency * 1e3)
    power_cap = min(p for p, _ in by_threads.values()) * 1.0001
    assert power_cap < default["power_w"]  # the profile's count misses it
    limits = {"latency_ms": 1e9, "power_w": power_cap}
    chosen = B.hardware_figures(est, profile, 100.0, limits)
    assert chosen["power_w"] <= power_cap and chosen["threads"] != 4
    assert chosen["latency_ms"] == pytest.approx(by_threads[chosen["threads"]][1])
    # nothing meets both: the profile's count stands (and its miss is what the table shows)
    none = B.hardware_figures(est, profile, 100.0, {"latency_ms": 1e-9, "power_w": power_cap})
    assert none == default
    # the profile's count meets both: it stands, whatever another count would save
    assert B.hardware_figures(est, profile, 100.0, {"latency_ms": 1e9, "power_w": 1e9}) == default
