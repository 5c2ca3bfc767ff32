"""Dense-output task metrics (issue 31): a map's IoU per image with blank images counted, and a
region int8 invents on a blank page named; embeddings by nearest neighbour; tags per token."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import get_metric
from edgekit.converters.metrics.evidence import Evidence


def _pages(n: int = 8) -> np.ndarray:
    maps = np.zeros((n, 1, 32, 32), np.float32)
    for i in range(0, n, 2):  # text on every other page, blank pages between
        maps[i, 0, 4:10, 2:30] = 0.9
    return maps


def test_a_region_invented_on_a_blank_page_is_named() -> None:
    reference = _pages()
    candidate = reference.copy()
    candidate[1, 0, 20:24, 5:15] = 0.8  # page 1 is blank in float: int8 invents a text region
    result = get_metric("map_iou")([reference], [candidate])
    assert result.details["min_iou"] == 0.0 and result.details["worst_image"] == 1
    assert result.details["blank_images_with_invented"] == 1 and result.details["invented_regions"] == 1
    assert result.drop == pytest.approx(100 / 8)
    evidence = Evidence.of(result.per_sample)
    assert evidence.samples == 8 and evidence.low <= result.drop <= evidence.high


def test_identical_maps_score_full_iou_blank_pages_included() -> None:
    reference = _pages()
    result = get_metric("map_iou")([reference], [reference.copy()])
    assert result.drop == 0 and result.details["region_recall"] == 1.0 and result.details["blank_images"] == 4


def test_embedding_nearest_neighbours_and_tags() -> None:
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(12, 64))
    assert get_metric("embedding")([rows], [rows + 1e-4]).drop == 0
    swapped = rows.copy()
    swapped[0] = rows[1] * 1.001  # sample 0 now sits on sample 1: neighbours change
    assert get_metric("embedding")([rows], [swapped]).drop > 0
    tags = rng.normal(size=(4, 10, 5))
    changed = tags.copy()
    changed[0, 0] = -changed[0, 0]
    result = get_metric("tags")([tags], [changed])
    assert 0 < result.drop <= 100 / 40 + 1e-9 and result.per_sample.num.sum() == result.drop * 40 / 100


def test_the_map_gate_judges_the_worst_page_not_the_mean() -> None:
    """31 pages match float exactly and one loses half its text: the mean IoU (0.98) would pass
    a mean-based bar, but the per-image gate (IoU >= 0.9 on every image) names the page and the
    zero budget refuses it; with every page passing the same budget is met."""
    reference = _pages(32)
    candidate = reference.copy()
    candidate[4, 0, 4:10, 16:30] = 0.1  # page 4 keeps only half its text line
    result = get_metric("map_iou")([reference], [candidate])
    assert result.details["mean_iou"] > 0.98 and result.details["min_iou"] == pytest.approx(0.5, abs=0.01)
    assert result.details["worst_image"] == 4
    assert result.drop == pytest.approx(100 / 32)
    evidence = Evidence.of(result.per_sample)
    assert evidence.verdict(0.0) == "missed"
    assert Evidence.of(get_metric("map_iou")([reference], [reference.copy()]).per_sample).verdict(0.0) == "met"
    # the gate's bar is an option: at 0.4 the half page passes
    assert get_metric("map_iou", min_iou=0.4)([reference], [candidate]).drop == 0


def test_tags_judge_tokens_up_to_the_padding() -> None:
    """An attention decoder's tokens then padding (SLANet: 17..47 tokens of 501 steps): one
    lost cell token per sequence is 1 of 18 judged tokens, not 1 of 120 steps."""
    rng = np.random.default_rng(14)
    logits = rng.normal(0, 1, (4, 120, 30))
    logits[:, :17, 28] += 10
    logits[:, 17:, 0] += 10  # padding after the content
    changed = logits.copy()
    changed[:, 5, 28] -= 20  # one cell token lost per sequence
    result = get_metric("tags")([logits], [changed])
    assert abs(result.drop - 100 / 18) < 1e-9 and result.details["tokens_judged"] == 4 * 18
    pad_changed = logits.copy()
    pad_changed[0, 60:, 0] -= 20  # int8 pads with another token: every step counts again
    assert get_metric("tags")([logits], [pad_changed]).details["tokens_judged"] == 120 + 3 * 18
