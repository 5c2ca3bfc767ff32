"""Sparse probability maps judged by their regions (issue 30/31): what a DB text detector's
post-processing keeps, float's matched to int8's, with pages as the samples of the interval.

``data/ppocr_det_maps.npz``: three real PP-OCRv4 det pages (rapidocr-onnxruntime 1.4.4's
ch_PP-OCRv4_det_infer.onnx on the suite's rendered pages, val.npz pages 0, 2 and 9), the float
model's map and onnxruntime quantize_static's int8 map (the suite's peer_ort_u8s8.onnx), each
[3, 1, 384, 384] stored as round(255 x p) uint8. Page 0 is blank; on page 2 int8 keeps every
line but moves their edges (thresholded at 0.5, pixel IoU 0.77 with float's: the per-page gate
``map_iou`` failed it); on page 9 int8 splits one 293-px line into two regions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgekit.converters.metrics import get_metric
from edgekit.converters.metrics.evidence import Evidence
from edgekit.converters.metrics.regions import kept_regions, page_counts

DATA = Path(__file__).parent / "data" / "ppocr_det_maps.npz"


def _real_maps() -> tuple[np.ndarray, np.ndarray]:
    with np.load(DATA) as data:
        return data["float_map"] / 255.0, data["int8_map"] / 255.0


def _lines(prob: np.ndarray) -> list[tuple[slice, slice]]:
    """The bounding slices of the regions float's consumer keeps on one page."""
    from scipy import ndimage

    return list(ndimage.find_objects(kept_regions(prob)))


def test_real_db_maps_judged_by_their_regions_not_their_edge_pixels() -> None:
    float_map, int8_map = _real_maps()
    assert page_counts(float_map, int8_map).tolist() == [[0, 0, 0], [11, 11, 11], [11, 12, 10]]
    # the per-pixel gate fails both text pages; the regions fail only the page whose line split
    assert get_metric("map_iou")([float_map], [int8_map]).details["images_below_0.9"] == 2
    result = get_metric("regions")([float_map], [int8_map])
    assert result.details["lost_regions"] == 1 and result.details["invented_regions"] == 2
    assert result.details["pages_changed"] == 1 and result.details["blank_pages"] == 1
    assert result.drop == pytest.approx(100 * 3 / 45)
    assert result.per_sample.num.tolist() == [0, 0, 3] and result.per_sample.den.tolist() == [0, 22, 23]
    same = get_metric("regions")([float_map], [float_map.copy()])
    assert same.drop == 0 and same.details["f1"] == 1.0


def _tiled(pages: np.ndarray, times: int) -> np.ndarray:
    return np.concatenate([pages] * times)


def test_int8_that_loses_text_lines_misses_the_budget() -> None:
    """48 real pages (the fixture's float pages, 16 times): int8 keeps every page's map but
    crushes three of its lines below the 0.3 threshold. Lost lines are the task's loss: 100 x 33 /
    (2 x 11 - 3) = 17.4 points on each text page, the whole interval past the 5-point budget."""
    float_map = _tiled(_real_maps()[0], 16)
    crushed = float_map.copy()
    for page in range(len(crushed)):
        for rows, cols in _lines(float_map[page, 0])[:3]:
            crushed[page, 0, rows, cols] *= 0.2
    result = get_metric("regions")([float_map], [crushed])
    assert result.details["lost_regions"] == 3 * 32 and result.details["invented_regions"] == 0
    evidence = Evidence.of(result.per_sample)
    assert evidence.low > 5.0 and evidence.verdict(5.0) == "missed"


def test_edges_that_move_keep_the_regions_and_meet_the_budget() -> None:
    """The real int8 pages whose lines all stay (the blank page and page 2), 24 times each: the
    per-pixel gate fails every text page (edges moved, IoU 0.77), the regions all match: met."""
    float_map, int8_map = (_tiled(m[:2], 24) for m in _real_maps())
    assert get_metric("map_iou")([float_map], [int8_map]).drop == 50.0
    result = get_metric("regions")([float_map], [int8_map])
    assert result.drop == 0 and Evidence.of(result.per_sample).verdict(5.0) == "met"


def test_text_invented_on_a_blank_page_is_counted_and_named() -> None:
    float_map = _real_maps()[0]
    invented = float_map.copy()
    invented[0, 0, 100:112, 40:200] = 0.9  # page 0 is blank in float: int8 finds a line there
    result = get_metric("regions")([float_map], [invented])
    assert result.details["invented_regions"] == 1 and result.details["blank_pages_with_invented"] == 1
    assert result.per_sample.num[0] == 1 and result.drop > 0
    # pooled over pages the drop barely moves, so the build's summary says the counts
    from edgekit.converters.summary import decision_lines

    said = decision_lines({"metric": {"name": "regions", "details": result.details}})
    assert any("1 invented" in line and "1 of" in line and "blank pages show text that is not there"
               in line for line in said), said


def test_few_pages_cannot_tell() -> None:
    """Three pages, every region matched: 22 regions cannot show that int8 keeps 95% of them
    (exact binomial on the totals, 0 of 44: 0..8.0 points); the decision says how many would."""
    float_map = _real_maps()[0]
    evidence = Evidence.of(get_metric("regions")([float_map], [float_map.copy()]).per_sample)
    assert evidence.low == 0 and evidence.high > 5.0
    assert evidence.verdict(5.0) == "cannot tell" and evidence.samples_to_tell(5.0) > 3


def test_options_and_channels_last() -> None:
    """``threshold`` / ``min_score`` / ``iou`` are options; [N, H, W, C] maps read per channel."""
    float_map, int8_map = _real_maps()
    strict = get_metric("regions", iou=0.95)([float_map], [int8_map])
    assert strict.details["lost_regions"] > 1
    last = np.concatenate([float_map, float_map], 1).transpose(0, 2, 3, 1)
    assert get_metric("regions")([last], [last.copy()]).details["float_regions"] == 2 * 22
    with pytest.raises(ValueError, match="probability maps"):
        get_metric("regions")([np.zeros((2, 8, 16, 16))], [np.zeros((2, 8, 16, 16))])


@pytest.mark.parametrize("target", ["rpi4", "rpi3", "rpi5", "rpi-zero2w", "host", "generic-aarch64"])
def test_the_default_build_judges_db_maps_by_regions_within_5_points(target: str) -> None:
    """The build's metric for PP-OCRv4 det's maps is ``regions`` with the profile's 5-point
    agreement budget (map_iou's 0-point per-page gate refused it); the real int8 page that
    split a line costs 3 of 45 regions on these 3 pages: cannot tell, so the build ships."""
    from edgekit.converters.context import BuildConfig
    from edgekit.converters.metrics.task_accuracy import BuildMetric
    from edgekit.targets import load_profile

    float_map, int8_map = _real_maps()
    build = BuildMetric.of(BuildConfig(source="det.onnx", target=target), [float_map], has_labels=False)
    assert build.name == "regions" and build.budget(load_profile(target)) == (5.0, "agreement")
    score = build.score([float_map], [int8_map], None, ["sigmoid_0.tmp_0"], 0.99)
    assert score.drop == pytest.approx(100 * 3 / 45) and score.evidence.verdict(5.0) == "cannot tell"
