"""SQNR in dB: known noise gives a known figure; identical outputs are capped."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import sqnr


def test_known_noise_gives_known_db() -> None:
    ref = np.ones(1000)
    assert sqnr.sqnr_db(ref, ref + 0.1) == pytest.approx(20.0)     # 1 / 0.01 -> 20 dB
    assert sqnr.sqnr_db(ref, ref) == sqnr.CAP_DB
    assert sqnr.sqnr_db(np.zeros(3), np.ones(3)) == -sqnr.CAP_DB


def test_metric_reports_the_worst_output() -> None:
    ref = [np.ones((4, 8)), np.ones((4, 2))]
    got = [np.ones((4, 8)) + 0.01, np.ones((4, 2)) + 0.1]
    result = sqnr.sqnr(ref, got)
    assert result.score == pytest.approx(20.0) and result.drop is None
    assert result.details["output0_db"] == pytest.approx(40.0)
