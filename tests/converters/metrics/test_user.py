"""User metrics and hooks by module:function, and the registry's errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.metrics import METRICS, get_metric

from edgekit.errors import UserError


def write_metric(tmp_path: Path) -> Path:
    path = tmp_path / "my_metric.py"
    path.write_text(
        "import numpy as np\n"
        "def close(ref, got, labels):\n"
        "    return float(np.mean(np.abs(ref[0] - got[0]) < 0.05))\n"
        "def broken(ref, got, labels):\n"
        "    return 'good'\n")
    return path


def test_user_metric_from_a_file(tmp_path: Path) -> None:
    path = write_metric(tmp_path)
    metric = get_metric(f"{path}:close")
    ref = np.zeros((4, 5))
    got = ref.copy()
    got[0] = 1.0
    result = metric([ref], [got])
    assert result.score == pytest.approx(0.75)
    assert result.drop == pytest.approx(25.0)  # float against itself scores 1


def test_user_metric_returning_garbage_is_a_user_error(tmp_path: Path) -> None:
    metric = get_metric(f"{write_metric(tmp_path)}:broken")
    with pytest.raises(UserError, match="returned str"):
        metric([np.zeros((2, 2))], [np.zeros((2, 2))])


def test_unknown_names_list_the_allowed_set(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="top1, detection, ctc, sqnr"):
        get_metric("map50")
    with pytest.raises(UserError, match="no callable 'nope'"):
        get_metric(f"{write_metric(tmp_path)}:nope")
    with pytest.raises(UserError, match="no file"):
        get_metric(f"{tmp_path / 'missing.py'}:close")
    with pytest.raises(UserError, match="its options: blank"):
        get_metric("ctc", conf=0.5)
    assert set(METRICS) == {"top1", "detection", "ctc", "sqnr", "map_iou", "embedding", "tags", "regression", "cells",
                            "regions", "signal"}


def test_options_are_bound() -> None:
    logits = np.eye(3)[[2, 0, 0, 1]][None]  # with blank 2: "0 1"; with blank 0: "2 1"
    assert get_metric("ctc", blank=2)([logits], [logits]).details["cer_vs_float"] == 0.0
    postprocess = "edgekit.converters.metrics.detection:decode_packed"
    assert callable(get_metric("detection", postprocess=postprocess))
