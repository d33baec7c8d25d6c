"""Post-processing turns a probability map back into the text boxes the targets were made from."""

from __future__ import annotations

import numpy as np
import pytest

import perfkit
from examples.ocr_dbnet.data import SyntheticReceipts
from examples.ocr_dbnet.metrics import DetectionMetric, polygon_iou
from examples.ocr_dbnet.postprocess import mini_box, postprocess, unclip
from examples.ocr_dbnet.targets import make_shrink_map

RECT = np.array([[10, 10], [110, 10], [110, 30], [10, 30]], dtype=np.float32)


def test_a_perfect_map_of_the_shrunk_rectangle_gives_back_the_rectangle() -> None:
    prob, _, _ = make_shrink_map([RECT], [False], 50, 130)
    boxes, scores = postprocess(prob)
    assert scores == [pytest.approx(1.0)]
    # the shrunk 86x6 box grows by D' = 516 * 1.5 / 184 = 4.2 px: 94.4 x 14.4 of the 100 x 20
    assert polygon_iou(boxes[0], RECT) == pytest.approx(94.4 * 14.4 / 2000, abs=0.03)


@pytest.mark.parametrize("augment", [False, True])
def test_perfect_maps_of_synthetic_receipts_give_back_their_words(augment: bool) -> None:
    ds = SyntheticReceipts(3, augment=augment)
    metric = DetectionMetric()
    for i in range(len(ds)):
        sample = ds[i]
        prob, _, _ = make_shrink_map(sample["polygons"], sample["ignore"], 256, 256)
        boxes, _ = postprocess(prob)
        metric.update(boxes, sample["polygons"], sample["ignore"])
    assert metric.compute()["hmean"] >= 0.9


def test_boxes_are_clockwise_quads_from_the_top_left_in_pixel_coordinates() -> None:
    prob = np.zeros((64, 64), np.float32)
    prob[20:27, 10:51] = 0.9
    (box,), _ = postprocess(prob)
    assert box.shape == (4, 2)
    assert box.dtype == np.float32
    top_left, top_right, bottom_right, bottom_left = box
    assert top_left[0] < top_right[0]
    assert top_left[1] < bottom_left[1]
    assert bottom_right[0] > bottom_left[0]
    assert bottom_right[1] > top_right[1]


def test_an_empty_map_or_faint_regions_give_no_boxes() -> None:
    prob = np.zeros((64, 64), np.float32)
    assert postprocess(prob) == ([], [])
    prob[20:30, 10:50] = 0.5  # above thresh 0.3, below box_thresh 0.6
    assert postprocess(prob) == ([], [])
    assert len(postprocess(prob, box_thresh=0.4)[0]) == 1


def test_unclip_offsets_outwards_by_area_times_ratio_over_perimeter() -> None:
    grown = unclip(RECT, unclip_ratio=1.5)  # D' = 2000 * 1.5 / 240 = 12.5
    assert grown is not None
    _, short_side = mini_box(grown)
    assert short_side == pytest.approx(20 + 2 * 12.5, abs=1)


def test_postprocess_times_each_unclip_inside_itself() -> None:
    prob = np.zeros((64, 64), np.float32)
    prob[10:16, 10:50] = prob[30:36, 10:50] = 1
    with perfkit.use_registry(perfkit.Registry()) as reg:
        postprocess(prob)
    snap = reg.snapshot()
    assert snap["postprocess"].count == 1
    assert snap["pyclipper.unclip"].count == 2
    assert ("postprocess", "pyclipper.unclip") in snap.tree
