"""DBNet post-processing (MhLiao/DB ``SegDetectorRepresenter.boxes_from_bitmap``): map -> boxes.

    boxes, scores = postprocess(prob)       # prob: (H, W) probability map
    boxes[0]                                # (4, 2) float32 quad, (x, y) pixel coordinates

Binarise at ``thresh``, take each contour's minimum-area box, keep it if the mean probability
inside reaches ``box_thresh``, unclip it (PyClipper offset outwards by D' = A' * unclip_ratio / L')
to undo the shrinking of the training targets, and take the minimum-area box again.
"""

from __future__ import annotations

import cv2
import numpy as np
import pyclipper

import perfkit

from .geometry import polygon_area, polygon_perimeter


@perfkit.timed("postprocess")
def postprocess(
    prob: np.ndarray,
    *,
    thresh: float = 0.3,
    box_thresh: float = 0.6,
    unclip_ratio: float = 1.5,
    min_size: float = 2.0,
    max_candidates: int = 1000,
) -> tuple[list[np.ndarray], list[float]]:
    """Text boxes (4x2 float32 quads, clockwise from top-left) and their scores from one (H, W) map.

    ``min_size`` is the shortest side a candidate may have (pixels); the reference uses 3 at
    640-736 px inputs, the 256 px receipts here need 2.

    >>> prob = np.zeros((64, 64), np.float32)
    >>> prob[20:26, 10:50] = 0.9
    >>> boxes, scores = postprocess(prob)
    >>> len(boxes), round(scores[0], 2)
    (1, 0.9)
    """
    h, w = prob.shape
    contours, _ = cv2.findContours((prob > thresh).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    boxes, scores = [], []
    for contour in contours[:max_candidates]:
        box, short_side = mini_box(contour)
        if short_side < min_size:
            continue
        score = box_score(prob, box)
        if score < box_thresh:
            continue
        expanded = unclip(box, unclip_ratio)
        if expanded is None:
            continue
        box, short_side = mini_box(expanded)
        if short_side < min_size + 2:
            continue
        boxes.append(np.clip(box, 0, (w, h)).astype(np.float32))
        scores.append(score)
    return boxes, scores


def mini_box(points: np.ndarray) -> tuple[np.ndarray, float]:
    """The minimum-area rectangle around ``points`` as a 4x2 quad from top-left, and its short side."""
    rect = cv2.minAreaRect(np.asarray(points, dtype=np.float32).reshape(-1, 1, 2))
    corners = sorted(cv2.boxPoints(rect).tolist())  # by x: the two left corners first
    left = sorted(corners[:2], key=lambda p: p[1])
    right = sorted(corners[2:], key=lambda p: p[1])
    return np.array([left[0], right[0], right[1], left[1]], dtype=np.float32), float(min(rect[1]))


def box_score(prob: np.ndarray, box: np.ndarray) -> float:
    """Mean probability inside the quad as filled on the pixel grid (the reference's ``box_score_fast``)."""
    h, w = prob.shape
    x0, y0 = np.clip(np.floor(box.min(axis=0)).astype(int), 0, (w - 1, h - 1))
    x1, y1 = np.clip(np.ceil(box.max(axis=0)).astype(int), 0, (w - 1, h - 1))
    mask = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=np.uint8)
    cv2.fillPoly(mask, [(box - (x0, y0)).astype(np.int32)], 1)
    return float(cv2.mean(prob[y0 : y1 + 1, x0 : x1 + 1], mask)[0])


@perfkit.timed("pyclipper.unclip")
def unclip(box: np.ndarray, unclip_ratio: float = 1.5) -> np.ndarray | None:
    """The box offset outwards by D' = A' * unclip_ratio / L' (int points), None if degenerate."""
    perimeter = polygon_perimeter(box)
    if perimeter == 0:
        return None
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(np.round(box).astype(np.int64).tolist(), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
    paths = offset.Execute(polygon_area(box) * unclip_ratio / perimeter)
    return np.asarray(paths[0], dtype=np.float32) if len(paths) == 1 else None
