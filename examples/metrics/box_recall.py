"""Box recall at IoU 0.5 of an object detector, for ``--metric FILE.py:FUNCTION``.

    --metric examples/metrics/box_recall.py:box_recall   # higher is better

sparsify-tui calls it as ``box_recall(outputs, reference, labels)`` and budgets its drop against the FP32 model
(``--max-drop 0.02``: at most 2 points of recall lost).

* ``outputs[BOXES_OUTPUT]``: the detector's boxes, ``[items, K, 4 or more]``: ``x1, y1, x2, y2`` (corners, any unit)
  then, when there are more columns, the score in column 4 (``[x1, y1, x2, y2, score, class]`` as many exported
  detectors give). Or the scores in their own output, ``outputs[SCORES_OUTPUT]`` ``[items, K]``. A box counts when
  its score is at least ``SCORE_MIN``; without scores every box whose corners are not all 0 counts (padding rows).
* ``labels``: the true boxes, ``[items, M, 4]`` (``x1, y1, x2, y2``, extra columns such as a class are ignored),
  padded with -1: a row with a negative coordinate is padding. Build them with numpy and save them beside the
  inputs (``numpy.savez(path, images=..., labels=boxes)``). Without labels the FP32 model's own boxes (those that
  count) are the truth: the metric then says how many of the original's detections the optimized model keeps.

Recall = true boxes matched / true boxes, over every item. Matching is one-to-one and greedy, the highest IoU first,
and a pair matches when its IoU (intersection over union of the two rectangles) is at least ``IOU``. Recall alone
ignores false positives: pair it with a precision or mAP metric of your own when they matter.
"""

from __future__ import annotations

import numpy as np

#: which output holds the boxes
BOXES_OUTPUT = 0
#: which output holds the scores, or None (column 4 of the boxes, when present)
SCORES_OUTPUT = None
#: boxes scoring below this do not count
SCORE_MIN = 0.5
#: the IoU a predicted box needs to match a true one
IOU = 0.5


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` ``[n, 4]`` with every box of ``b`` ``[m, 4]`` (``x1, y1, x2, y2``): ``[n, m]``."""
    a = np.asarray(a, np.float64)[:, None, :4]
    b = np.asarray(b, np.float64)[None, :, :4]
    w = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    h = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = w * h
    area_a = np.clip(a[..., 2] - a[..., 0], 0, None) * np.clip(a[..., 3] - a[..., 1], 0, None)
    area_b = np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def matched(predicted: np.ndarray, truth: np.ndarray, threshold: float = IOU) -> int:
    """How many true boxes get a predicted box of IoU >= ``threshold``, matched one-to-one, highest IoU first."""
    if not len(predicted) or not len(truth):
        return 0
    m = iou(predicted, truth)
    pairs = sorted(((m[i, j], i, j) for i, j in zip(*np.nonzero(m >= threshold))), reverse=True)
    used_p, used_t = set(), set()
    for _v, i, j in pairs:
        if i not in used_p and j not in used_t:
            used_p.add(i)
            used_t.add(j)
    return len(used_t)


def detections(outputs, item: int) -> np.ndarray:
    """The boxes that count of item ``item``: ``[n, 4]``."""
    boxes = np.asarray(outputs[BOXES_OUTPUT][item], np.float64).reshape(-1, np.shape(outputs[BOXES_OUTPUT])[-1])
    if SCORES_OUTPUT is not None:
        keep = np.asarray(outputs[SCORES_OUTPUT][item]).reshape(-1) >= SCORE_MIN
    elif boxes.shape[1] > 4:
        keep = boxes[:, 4] >= SCORE_MIN
    else:
        keep = np.any(boxes[:, :4] != 0, axis=1)
    return boxes[keep, :4]


def true_boxes(labels: np.ndarray, item: int) -> np.ndarray:
    """The true boxes of item ``item`` (padding rows, with a negative coordinate, left out): ``[m, 4]``."""
    rows = np.asarray(labels[item], np.float64).reshape(-1, np.shape(labels)[-1])[:, :4]
    return rows[np.all(rows >= 0, axis=1)]


def box_recall(outputs, reference, labels) -> float:
    """Recall of the true boxes at IoU >= :data:`IOU` over every item (module docstring), 0..1; 1.0 when there is
    no true box at all."""
    items = len(outputs[BOXES_OUTPUT])
    found = total = 0
    for k in range(items):
        truth = true_boxes(labels, k) if labels is not None else detections(reference, k)
        found += matched(detections(outputs, k), truth)
        total += len(truth)
    return found / total if total else 1.0


box_recall.higher_is_better = True
