"""``edgekit emulate --val`` without --metric judges what the build judged: the metric its
manifest recorded, else the build's rule on every --val sample (it chose from 2 samples)."""

from __future__ import annotations

import numpy as np
from edgekit.converters.commands.emulate import default_metric
from edgekit.converters.metrics import choose_default


def _detection_tables(rng: np.random.Generator, n: int = 16) -> list[np.ndarray]:
    """A sigmoid detection table [N, 400, 10]: background everywhere, a few confident cells
    on the later samples only (the first two images hold nothing confident)."""
    table = rng.uniform(0, 0.3, (n, 400, 10))
    table[2:, :30, 3] = 0.9
    return [table]


def test_the_recorded_metric_is_judged() -> None:
    rng = np.random.default_rng(11)
    outputs = _detection_tables(rng)
    assert choose_default([o[:2] for o in outputs]).name == "signal"  # what 2 samples said
    recorded = {"metric": {"name": "cells", "reason": "default: ...", "labels": False}}
    assert default_metric(recorded, lambda: outputs, False) == ("cells", 0)
    tags_on_second = {"metric": {"name": "tags", "output": 1}}
    assert default_metric(tags_on_second, lambda: outputs, False) == ("tags", 1)


def test_without_a_record_the_build_rule_sees_every_sample() -> None:
    rng = np.random.default_rng(12)
    outputs = _detection_tables(rng)
    assert default_metric({}, lambda: outputs, False) == ("cells", 0)
    # a recorded detection may have had a --postprocess emulate cannot replay: the rule decides
    assert default_metric({"metric": {"name": "detection"}}, lambda: outputs, False)[0] == "cells"


def test_unlabelled_val_line_says_the_target_is_judged_against_the_host() -> None:
    """Without labels the host's score is its agreement with itself (always 1): the line says
    what the target's figure is measured against instead of printing 'host 1'."""
    from edgekit.converters.emulation.accuracy import TargetScore

    unlabelled = TargetScore("tflite", "litert", "regions", "F1 of regions", 1.0, 0.97, 36,
                             labelled=False).line("cortex-a72")
    assert "host 1" not in unlabelled
    assert "emulated cortex-a72 against the host's outputs (no labels in --val): 0.97 over 36" \
        in unlabelled
    labelled = TargetScore("tflite", "litert", "top1", "accuracy", 0.9, 0.89, 200).line("cortex-a72")
    assert "host 90.00%, emulated cortex-a72 89.00% over 200 samples, +1.00 points lost" in labelled
