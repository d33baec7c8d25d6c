"""DBNet targets of one 100x20 rectangle, worked out by hand, and the collate around them.

The rectangle spans x 10..110, y 10..30: A = 2000, L = 240, r = 0.4, so D = 2000 * 0.84 / 240 = 7.
cv2.fillPoly treats points as pixel centres and fills the outline inclusively: a polygon from
x0 to x1 fills the x1 - x0 + 1 pixels x0..x1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import perfkit
from examples.ocr_dbnet.data import Sample
from examples.ocr_dbnet.targets import (
    border_distance,
    db_collate_fn,
    make_shrink_map,
    make_threshold_map,
    offset_distance,
)

RECT = np.array([[10, 10], [110, 10], [110, 30], [10, 30]], dtype=np.float32)
H, W = 50, 130
D = 7.0


def expected_threshold(distance_to_border: float) -> float:
    return 0.3 + 0.4 * (1 - min(distance_to_border / D, 1.0))


def test_offset_distance_is_area_times_one_minus_r_squared_over_perimeter() -> None:
    assert offset_distance(RECT) == pytest.approx(2000 * (1 - 0.4**2) / 240) == pytest.approx(D)


def test_shrink_map_is_the_rectangle_shrunk_by_d_on_every_side() -> None:
    shrink_map, shrink_mask, ignored = make_shrink_map([RECT], [False], H, W)
    # shrunk to x 17..103, y 17..23 (86 x 6); filled inclusively: 87 x 7 pixels
    expected = np.zeros((H, W), np.float32)
    expected[17:24, 17:104] = 1
    np.testing.assert_array_equal(shrink_map, expected)
    assert shrink_mask.min() == 1
    assert ignored == [False]


def test_threshold_mask_is_the_rectangle_dilated_by_d_with_round_corners() -> None:
    _, mask = make_threshold_map([RECT], [False], H, W)
    ys, xs = np.nonzero(mask)
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (3, 117, 3, 37)
    assert mask[20, 3] == mask[3, 60] == mask[37, 60] == 1  # straight sides: 7 px out
    assert mask[4, 4] == mask[36, 116] == 0  # corners: 8.5 px from the rectangle's corner, beyond D
    continuous_area = 100 * 20 + 2 * D * (100 + 20) + np.pi * D**2
    assert mask.sum() == pytest.approx(continuous_area, rel=0.05)


@pytest.mark.parametrize(
    ("y", "x", "distance"),
    [
        (10, 60, 0.0),  # on the top edge: thresh_max
        (13, 60, 3.0),  # 3 px inside
        (5, 60, 5.0),  # 5 px outside
        (20, 60, 10.0),  # the centre line, further than D from both long sides: thresh_min
        (20, 14, 4.0),  # 4 px inside the left side
        (6, 6, np.hypot(4, 4)),  # diagonally off the top-left corner
        (2, 60, 8.0),  # outside the dilated polygon
    ],
)
def test_threshold_map_falls_from_max_at_the_border_to_min_at_distance_d(
    y: int, x: int, distance: float
) -> None:
    threshold_map, _ = make_threshold_map([RECT], [False], H, W)
    assert threshold_map[y, x] == pytest.approx(expected_threshold(distance), abs=1e-5)


def test_threshold_map_is_thresh_min_away_from_text() -> None:
    threshold_map, _ = make_threshold_map([RECT], [False], H, W)
    assert threshold_map.min() == pytest.approx(0.3)
    assert threshold_map.max() == pytest.approx(0.7)
    assert threshold_map[45, 5] == pytest.approx(0.3)


def test_border_distance_is_the_distance_to_the_nearest_segment() -> None:
    xs = np.array([60.0, 60.0, 0.0, 5.0, 120.0])
    ys = np.array([12.0, 0.0, 0.0, 20.0, 40.0])
    expected = [2.0, 10.0, np.hypot(10, 10), 5.0, np.hypot(10, 10)]
    np.testing.assert_allclose(border_distance(RECT, xs, ys), expected, rtol=1e-6)


def test_ignored_polygon_is_neither_text_nor_background() -> None:
    shrink_map, shrink_mask, ignored = make_shrink_map([RECT], [True], H, W)
    threshold_map, threshold_mask = make_threshold_map([RECT], ignored, H, W)
    assert shrink_map.max() == 0
    assert shrink_mask[10:31, 10:111].max() == 0
    assert shrink_mask.sum() == H * W - 101 * 21
    assert threshold_mask.max() == 0
    assert threshold_map.max() == pytest.approx(0.3)


def test_text_narrower_than_min_text_size_is_ignored() -> None:
    thin = np.array([[10, 10], [110, 10], [110, 16], [10, 16]], dtype=np.float32)  # 6 px < 8
    shrink_map, shrink_mask, ignored = make_shrink_map(
        [thin, RECT + np.array([0, 15], np.float32)], [False, False], H, W
    )
    assert ignored == [True, False]
    assert shrink_mask[10:17, 10:111].max() == 0
    assert shrink_map[32:39, 17:104].min() == 1


def sample(polygons: list[np.ndarray], ignore: list[bool], size: int = 64) -> Sample:
    return Sample(image=torch.rand(3, size, size), polygons=polygons, ignore=ignore)


def test_collate_batches_images_and_maps_as_float32_tensors() -> None:
    quad = np.array([[4, 4], [40, 4], [40, 20], [4, 20]], dtype=np.float32)
    batch = db_collate_fn([sample([quad], [False]), sample([quad + 20, quad], [False, True])])
    assert batch["image"].shape == (2, 3, 64, 64)
    for key in ("shrink_map", "shrink_mask", "threshold_map", "threshold_mask"):
        assert batch[key].shape == (2, 64, 64), key
        assert batch[key].dtype == torch.float32, key
    assert [len(p) for p in batch["polygons"]] == [1, 2]
    assert batch["ignore"] == [[False], [False, True]]


def test_collate_masks_out_ignored_polygons_and_keeps_the_others() -> None:
    kept = np.array([[4, 4], [40, 4], [40, 20], [4, 20]], dtype=np.float32)
    dropped = kept + np.array([0, 30], np.float32)
    batch = db_collate_fn([sample([kept, dropped], [False, True])])
    assert batch["shrink_map"][0, 12, 22] == 1
    assert batch["shrink_mask"][0, 12, 22] == 1
    assert batch["threshold_mask"][0, 12, 22] == 1
    assert batch["shrink_map"][0, 34:51, 4:41].max() == 0
    assert batch["shrink_mask"][0, 34:51, 4:41].max() == 0
    assert batch["threshold_mask"][0, 34:51, 4:41].max() == 0


def test_collate_times_each_pyclipper_offset_and_distance_inside_itself() -> None:
    polygons = [RECT, RECT + np.array([0, 12], np.float32)]
    with perfkit.use_registry(perfkit.Registry()) as reg:
        db_collate_fn([Sample(image=torch.zeros(3, H, W), polygons=polygons, ignore=[False, True])])
    snap = reg.snapshot()
    assert snap["db_collate_fn"].count == 1
    for name in ("pyclipper.shrink", "pyclipper.dilate", "threshold.distance"):
        assert snap[name].count == 1, name  # the ignored polygon gets no targets
        assert ("db_collate_fn", name) in snap.tree
