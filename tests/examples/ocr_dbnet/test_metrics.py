"""Precision / recall / hmean with one-to-one matching at IoU >= 0.5, worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from examples.ocr_dbnet.metrics import DetectionMetric, intersection_area, polygon_iou


def box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)


A, B = box(0, 0, 40, 10), box(0, 20, 40, 30)


def scores(
    preds: list[np.ndarray], gts: list[np.ndarray], ignore: list[bool] | None = None
) -> dict[str, float]:
    metric = DetectionMetric()
    metric.update(preds, gts, ignore or [False] * len(gts))
    return metric.compute()


def test_iou_of_overlapping_boxes() -> None:
    assert polygon_iou(A, A) == pytest.approx(1.0)
    assert polygon_iou(A, box(20, 0, 60, 10)) == pytest.approx(200 / 600)
    assert polygon_iou(A, B) == 0.0


def test_iou_of_a_rotated_quad() -> None:
    diamond = np.array([[20, -15], [35, 5], [20, 25], [5, 5]], dtype=np.float32)
    square = box(5, -15, 35, 25)
    assert intersection_area(diamond, square) == pytest.approx(600)  # the diamond lies inside
    assert polygon_iou(diamond, square) == pytest.approx(600 / 1200)


def test_a_perfect_match_scores_one() -> None:
    assert scores([A, B], [A, B]) == {"precision": 1.0, "recall": 1.0, "hmean": 1.0}


def test_a_missed_word_halves_recall() -> None:
    assert scores([A], [A, B]) == pytest.approx({"precision": 1.0, "recall": 0.5, "hmean": 2 / 3})


def test_a_false_positive_lowers_precision() -> None:
    assert scores([A, B, box(50, 0, 90, 10)], [A, B]) == pytest.approx(
        {"precision": 2 / 3, "recall": 1.0, "hmean": 0.8}
    )


def test_a_match_needs_iou_of_at_least_one_half() -> None:
    assert scores([box(0, 0, 40, 20)], [A])["recall"] == 1.0  # IoU 0.5
    assert scores([box(0, 0, 40, 21)], [A])["recall"] == 0.0  # IoU 400 / 840


def test_a_ground_truth_matches_one_detection_only() -> None:
    loose, tight = box(0, 0, 40, 12), box(0, 0, 40, 10.5)
    result = scores([loose, tight], [A])
    assert result == pytest.approx({"precision": 0.5, "recall": 1.0, "hmean": 2 / 3})


def test_ignored_ground_truth_neither_counts_nor_penalises_a_detection_on_it() -> None:
    assert scores([A, B], [A, B], [False, True]) == {"precision": 1.0, "recall": 1.0, "hmean": 1.0}
    assert scores([A], [A, B], [False, True]) == {"precision": 1.0, "recall": 1.0, "hmean": 1.0}


def test_counts_accumulate_over_images_until_reset() -> None:
    metric = DetectionMetric()
    metric.update([A], [A], [False])
    metric.update([], [A, B], [False, False])
    assert metric.compute() == pytest.approx({"precision": 1.0, "recall": 1 / 3, "hmean": 0.5})
    metric.reset()
    assert metric.compute() == {"precision": 0.0, "recall": 0.0, "hmean": 0.0}
