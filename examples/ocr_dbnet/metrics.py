"""Detection precision / recall / hmean: one-to-one matching of predicted quads to ground truth at IoU >= 0.5.

    metric = DetectionMetric()
    metric.update(pred_boxes, gt_polygons, gt_ignore)       # once per image
    metric.compute()        # {"precision": ..., "recall": ..., "hmean": ...}

As in the ICDAR protocol, ignored ("###") ground truth is not counted, and a prediction lying
mostly (> 50 % of its area) on an ignored polygon is dropped rather than counted as false.
Polygon intersections use PyClipper on coordinates scaled to integers (no shapely).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyclipper

_SCALE = 64  # PyClipper works on integers: 1/64 px keeps the areas exact enough


def intersection_area(a: np.ndarray, b: np.ndarray) -> float:
    """Area of the intersection of two polygons ((N, 2) arrays, pixel coordinates).

    >>> square = np.array([[0, 0], [10, 0], [10, 10], [0, 10]])
    >>> intersection_area(square, square + 5)
    25.0
    """
    clipper = pyclipper.Pyclipper()
    clipper.AddPath(_scaled(a), pyclipper.PT_SUBJECT, True)
    clipper.AddPath(_scaled(b), pyclipper.PT_CLIP, True)
    paths = clipper.Execute(pyclipper.CT_INTERSECTION, pyclipper.PFT_NONZERO, pyclipper.PFT_NONZERO)
    return float(sum(pyclipper.Area(path) for path in paths)) / _SCALE**2  # holes have negative area


def area(polygon: np.ndarray) -> float:
    """Area of a polygon, on the same integer grid as ``intersection_area``."""
    return float(abs(pyclipper.Area(_scaled(polygon)))) / _SCALE**2


def polygon_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two polygons.

    >>> square = np.array([[0, 0], [10, 0], [10, 10], [0, 10]])
    >>> round(polygon_iou(square, square + 5), 4)   # 25 / (100 + 100 - 25)
    0.1429
    """
    if not _boxes_overlap(a, b):
        return 0.0
    inter = intersection_area(a, b)
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def _scaled(polygon: np.ndarray) -> list[list[int]]:
    return [[int(v) for v in point] for point in np.round(np.asarray(polygon, np.float64) * _SCALE)]


def _boxes_overlap(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a.min(axis=0) < b.max(axis=0)) and np.all(b.min(axis=0) < a.max(axis=0)))


class DetectionMetric:
    """Accumulates matches over images; ``compute`` gives precision, recall and hmean over all of them.

    >>> metric = DetectionMetric()
    >>> square = np.array([[0, 0], [10, 0], [10, 10], [0, 10]], np.float32)
    >>> metric.update([square], [square, square + 20], [False, False])
    >>> metric.compute()
    {'precision': 1.0, 'recall': 0.5, 'hmean': 0.6666666666666666}
    """

    def __init__(self, iou_threshold: float = 0.5, ignore_overlap: float = 0.5) -> None:
        self.iou_threshold, self.ignore_overlap = iou_threshold, ignore_overlap
        self.reset()

    def reset(self) -> None:
        """Forget every image seen so far (call at the start of each validation epoch)."""
        self.matched = self.n_pred = self.n_gt = 0

    def update(
        self, pred_boxes: Sequence[np.ndarray], gt_polygons: Sequence[np.ndarray], gt_ignore: Sequence[bool]
    ) -> None:
        """Match one image's predictions to its ground truth and add the counts."""
        cared = [p for p, ignored in zip(gt_polygons, gt_ignore, strict=True) if not ignored]
        dont_care = [p for p, ignored in zip(gt_polygons, gt_ignore, strict=True) if ignored]
        preds = [p for p in pred_boxes if not self._on_dont_care(p, dont_care)]
        self.n_pred += len(preds)
        self.n_gt += len(cared)
        self.matched += _greedy_matches(preds, cared, self.iou_threshold)

    def _on_dont_care(self, pred: np.ndarray, dont_care: list[np.ndarray]) -> bool:
        pred_area = area(pred)
        return pred_area > 0 and any(
            _boxes_overlap(pred, d) and intersection_area(pred, d) > self.ignore_overlap * pred_area
            for d in dont_care
        )

    def compute(self) -> dict[str, float]:
        """Precision and recall over all images so far (0 when there is nothing to divide by), and hmean."""
        precision = self.matched / self.n_pred if self.n_pred else 0.0
        recall = self.matched / self.n_gt if self.n_gt else 0.0
        hmean = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"precision": precision, "recall": recall, "hmean": hmean}


def _greedy_matches(preds: Sequence[np.ndarray], gts: Sequence[np.ndarray], threshold: float) -> int:
    """Number of one-to-one pairs at IoU >= threshold, taking the highest IoU pairs first."""
    pairs = sorted(
        (
            (iou, i, j)
            for i, p in enumerate(preds)
            for j, g in enumerate(gts)
            if (iou := polygon_iou(p, g)) >= threshold
        ),
        reverse=True,
    )
    used_pred: set[int] = set()
    used_gt: set[int] = set()
    for _, i, j in pairs:
        if i not in used_pred and j not in used_gt:
            used_pred.add(i)
            used_gt.add(j)
    return len(used_pred)
