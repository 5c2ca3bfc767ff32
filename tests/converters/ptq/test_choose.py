"""The validate stage's pick among calibration methods: a drop within one validation sample's
decision of the lowest is noise, and the continuous figures (cosine, then max error) decide."""

from __future__ import annotations

from types import SimpleNamespace

from edgekit.converters.stages.validate import choose


def _table(**rows: tuple[float, float]) -> tuple[dict, dict]:
    table = {m: {"cosine": cos, "max_abs_error": 1.0 - cos} for m, (_, cos) in rows.items()}
    scores = {m: SimpleNamespace(drop=drop) for m, (drop, _) in rows.items()}
    return table, scores


def test_one_flip_on_a_small_set_is_a_tie_the_cosine_breaks() -> None:
    # 16 samples: one flip is 6.25 points; percentile kept it but is further from float
    table, scores = _table(minmax=(6.25, 0.9998), percentile=(0.0, 0.9990), entropy=(12.5, 0.9999))
    assert choose(table, scores, samples=16) == "minmax"
    # on 1,000 samples the same 6.25 points is 62 decisions: a real loss, the drop decides
    assert choose(table, scores, samples=1000) == "percentile"


def test_the_first_listed_does_not_win_a_tie_it_is_worse_on() -> None:
    table, scores = _table(minmax=(0.0, 0.9990), percentile=(0.0, 0.9995))
    assert choose(table, scores, samples=16) == "percentile"
