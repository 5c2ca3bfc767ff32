"""tools/studies/yolo_person_photos.py: crops are attributed to the photo they were cut from, and
the photo bootstrap leaves out draws that hold no float detection (they have no ratio)."""

from __future__ import annotations

import numpy as np

from tools.realzoo import photos
from tools.studies.yolo_person_photos import SETS, _cluster_interval, _photo_of


def test_crops_cycle_over_the_sets_photos_as_letterboxed_cuts_them() -> None:
    names = SETS["new-val"]
    assert names == photos.YOLO_VAL
    source = _photo_of("new-val", 2 * len(names) + 1)
    assert list(source[:len(names)]) == list(names) and source[-1] == names[0]


def test_photos_without_detections_do_not_drag_the_interval_to_zero() -> None:
    # one photo holds every float detection, all kept: every defined draw keeps 100%
    hits, totals = np.array([6.0, 0.0, 0.0, 0.0]), np.array([6.0, 0.0, 0.0, 0.0])
    assert _cluster_interval(hits, totals) == (100.0, 100.0)
    low, high = _cluster_interval(np.array([9.0, 1.0]), np.array([10.0, 10.0]))
    assert 10.0 <= low < 50.0 < high <= 90.0
