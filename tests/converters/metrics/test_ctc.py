"""CTC metric: greedy decode and known sequences give known CER."""

from __future__ import annotations

import numpy as np
import pytest
from edgekit.converters.metrics import ctc


def one_hot_path(path: list[int], symbols: int = 5) -> np.ndarray:
    return np.eye(symbols, dtype=np.float32)[path][None]


def test_greedy_decode_merges_repeats_and_drops_blank() -> None:
    assert ctc.greedy_decode(one_hot_path([0, 1, 1, 0, 1, 2, 2, 0])) == [[1, 1, 2]]
    # another blank index: 4 is the blank, 0 a symbol
    assert ctc.greedy_decode(one_hot_path([4, 0, 0, 4, 3]), blank=4) == [[0, 3]]


def test_known_sequences_give_known_cer() -> None:
    reference = [[1, 2, 3, 4], [5, 6]]
    hypothesis = [[1, 3, 4], [5, 6, 7]]  # one deletion, one insertion: 2 edits over 6 symbols
    result = ctc.score(reference, hypothesis)
    assert result.cer == pytest.approx(2 / 6)
    assert result.exact_match == pytest.approx(0.0)
    assert ctc.score(reference, reference).cer == 0.0
    assert ctc.edit_distance([1, 2, 3], [3, 2, 1]) == 2


def test_metric_without_and_with_labels() -> None:
    float_out = np.concatenate([one_hot_path([1, 0, 2, 0, 3]), one_hot_path([4, 4, 0, 1, 1])])
    int8_out = np.concatenate([one_hot_path([1, 0, 2, 2, 3]), one_hot_path([4, 0, 4, 1, 1])])
    # line 1: "1 2 3" -> "1 2 3" (repeat merged); line 2: "4 1" -> "4 4 1": 1 edit over 5 symbols
    result = ctc.ctc([float_out], [int8_out])
    assert result.score == pytest.approx(1 / 5) and result.drop == pytest.approx(20.0)
    labelled = ctc.ctc([float_out], [int8_out], [[1, 2, 3], [4, 1]])
    assert labelled.float_score == 0.0 and labelled.score == pytest.approx(1 / 5)


def test_blank_outside_the_alphabet_is_refused() -> None:
    with pytest.raises(ValueError, match="blank index 7"):
        ctc.greedy_decode(one_hot_path([0, 1]), blank=7)
