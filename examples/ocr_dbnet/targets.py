"""DBNet's training targets (Liao et al. 2020, MhLiao/DB ``make_seg_detection_data``/``make_border_map``).

For a text polygon of area A and perimeter L, with shrink ratio r, the offset is D = A(1 - r²) / L.

- shrink (probability) map: the polygon offset inwards by D, filled with 1; the shrink mask is 1
  except over ignored or too small polygons, which are neither text nor background.
- threshold map: the polygon offset outwards by D; inside it, 1 - distance to the polygon's border / D
  (clipped to [0, 1]), rescaled to [thresh_min, thresh_max]; the threshold mask is the dilated area.

    batch = db_collate_fn([dataset[0], dataset[1]])
    batch["shrink_map"].shape           # (2, H, W)

The offsets (PyClipper) and the border distances run once per polygon in ``db_collate_fn``, in the
DataLoader workers; each is timed with ``@perfkit.timed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import cv2
import numpy as np
import pyclipper
import torch

import perfkit

from .data import Sample
from .geometry import polygon_area, polygon_perimeter

SHRINK_RATIO = 0.4
THRESH_MIN, THRESH_MAX = 0.3, 0.7
MIN_TEXT_SIZE = 8  # polygons narrower than this (pixels) are ignored, as in the reference


class Batch(TypedDict):
    """A collated batch: images, the four target maps (N, H, W), and the ground truth per image."""

    image: torch.Tensor
    shrink_map: torch.Tensor
    shrink_mask: torch.Tensor
    threshold_map: torch.Tensor
    threshold_mask: torch.Tensor
    polygons: list[list[np.ndarray]]
    ignore: list[list[bool]]


def offset_distance(polygon: np.ndarray, shrink_ratio: float = SHRINK_RATIO) -> float:
    """D = A(1 - r²) / L, the offset that shrinks (or dilates) the polygon.

    >>> offset_distance(np.array([[0, 0], [100, 0], [100, 20], [0, 20]]))  # 2000 * 0.84 / 240
    7.0
    """
    return polygon_area(polygon) * (1 - shrink_ratio**2) / polygon_perimeter(polygon)


def _offset(polygon: np.ndarray, delta: float) -> list[np.ndarray]:
    # PyClipper works on integers and would truncate floats: round to the nearest pixel instead.
    offset = pyclipper.PyclipperOffset()
    offset.AddPath(
        np.round(polygon).astype(np.int64).tolist(), pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON
    )
    return [np.asarray(path, dtype=np.int32) for path in offset.Execute(delta)]


@perfkit.timed("pyclipper.shrink")
def shrink_polygon(polygon: np.ndarray, distance: float) -> np.ndarray | None:
    """The polygon offset inwards by ``distance`` (int32 points), or None when nothing is left."""
    paths = _offset(polygon, -distance)
    return paths[0] if paths else None


@perfkit.timed("pyclipper.dilate")
def dilate_polygon(polygon: np.ndarray, distance: float) -> np.ndarray:
    """The polygon offset outwards by ``distance``, corners rounded (int32 points)."""
    return _offset(polygon, distance)[0]


@perfkit.timed("threshold.distance")
def border_distance(polygon: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Distance from each point (xs, ys) to the nearest edge (a segment) of the closed polygon.

    ``xs`` and ``ys`` broadcast against each other (a grid as a row and a column, or equal shapes).

    Vectorised over edges and points, as MhLiao/DB's ``distance``, with the exact clamped projection.

    >>> square = np.array([[0, 0], [10, 0], [10, 10], [0, 10]])
    >>> border_distance(square, np.array([3.0, 13.0, 13.0]), np.array([5.0, 5.0, 14.0]))
    array([3., 3., 5.], dtype=float32)
    """
    points = np.asarray(polygon, dtype=np.float32)
    start = points.reshape(len(points), 2, *[1] * xs.ndim)  # (edges, 2, 1, ...) broadcasts against xs
    edge = np.roll(start, -1, axis=0) - start
    px, py = xs[None] - start[:, 0], ys[None] - start[:, 1]  # (edges, *xs.shape)
    ex, ey = edge[:, 0], edge[:, 1]
    t = np.clip((px * ex + py * ey) / np.maximum(ex * ex + ey * ey, 1e-12), 0, 1)
    dx, dy = px - t * ex, py - t * ey
    return np.asarray(np.sqrt((dx * dx + dy * dy).min(axis=0)), dtype=np.float32)


def _too_small(polygon: np.ndarray, min_text_size: float) -> bool:
    extent = polygon.max(axis=0) - polygon.min(axis=0)
    return bool(extent.min() < min_text_size or polygon_area(polygon) < 1)


def make_shrink_map(
    polygons: Sequence[np.ndarray],
    ignore: Sequence[bool],
    h: int,
    w: int,
    shrink_ratio: float = SHRINK_RATIO,
    min_text_size: float = MIN_TEXT_SIZE,
) -> tuple[np.ndarray, np.ndarray, list[bool]]:
    """(shrink map, shrink mask, ignore) as (h, w) float32 maps and the flags actually applied.

    A polygon is ignored (mask 0 over it) when flagged, narrower than ``min_text_size`` or when
    shrinking leaves nothing; the returned flags say which, for ``make_threshold_map``.
    """
    shrink_map = np.zeros((h, w), dtype=np.float32)
    shrink_mask = np.ones((h, w), dtype=np.float32)
    applied = []
    for polygon, ignored in zip(polygons, ignore, strict=True):
        shrunk = None
        if not ignored and not _too_small(polygon, min_text_size):
            shrunk = shrink_polygon(polygon, offset_distance(polygon, shrink_ratio))
        if shrunk is None:
            cv2.fillPoly(shrink_mask, [np.round(polygon).astype(np.int32)], 0.0)
        else:
            cv2.fillPoly(shrink_map, [shrunk], 1.0)
        applied.append(shrunk is None)
    return shrink_map, shrink_mask, applied


def make_threshold_map(
    polygons: Sequence[np.ndarray],
    ignore: Sequence[bool],
    h: int,
    w: int,
    shrink_ratio: float = SHRINK_RATIO,
    thresh_min: float = THRESH_MIN,
    thresh_max: float = THRESH_MAX,
) -> tuple[np.ndarray, np.ndarray]:
    """(threshold map, threshold mask) as (h, w) float32 maps; ignored polygons are left out."""
    closeness = np.zeros((h, w), dtype=np.float32)
    mask = np.zeros((h, w), dtype=np.float32)
    for polygon, ignored in zip(polygons, ignore, strict=True):
        if not ignored and polygon_area(polygon) >= 1:
            _draw_border(polygon, offset_distance(polygon, shrink_ratio), closeness, mask)
    return closeness * (thresh_max - thresh_min) + thresh_min, mask


def _draw_border(polygon: np.ndarray, distance: float, closeness: np.ndarray, mask: np.ndarray) -> None:
    dilated = dilate_polygon(polygon, distance)
    cv2.fillPoly(mask, [dilated], 1.0)
    h, w = mask.shape
    x0, y0 = np.maximum(dilated.min(axis=0), 0)
    x1, y1 = np.minimum(dilated.max(axis=0), (w - 1, h - 1))
    if x1 < x0 or y1 < y0:
        return
    xs = np.arange(x0, x1 + 1, dtype=np.float32)[None, :]  # a (1, w) row and an (h, 1) column
    ys = np.arange(y0, y1 + 1, dtype=np.float32)[:, None]  # broadcast to the (h, w) grid
    near = 1 - np.clip(border_distance(polygon, xs, ys) / distance, 0, 1)
    region = closeness[y0 : y1 + 1, x0 : x1 + 1]
    np.fmax(region, near, out=region)


@perfkit.timed("db_collate_fn")
def db_collate_fn(samples: Sequence[Sample]) -> Batch:
    """Stack the images and compute every sample's DBNet targets (runs in the DataLoader workers)."""
    images = torch.stack([sample["image"] for sample in samples])
    h, w = images.shape[-2:]
    maps: dict[str, list[np.ndarray]] = {
        "shrink_map": [],
        "shrink_mask": [],
        "threshold_map": [],
        "threshold_mask": [],
    }
    for sample in samples:
        shrink_map, shrink_mask, ignored = make_shrink_map(sample["polygons"], sample["ignore"], h, w)
        threshold_map, threshold_mask = make_threshold_map(sample["polygons"], ignored, h, w)
        for key, value in zip(maps, (shrink_map, shrink_mask, threshold_map, threshold_mask), strict=True):
            maps[key].append(value)
    stacked = {key: torch.from_numpy(np.stack(values)) for key, values in maps.items()}
    return Batch(
        image=images,
        shrink_map=stacked["shrink_map"],
        shrink_mask=stacked["shrink_mask"],
        threshold_map=stacked["threshold_map"],
        threshold_mask=stacked["threshold_mask"],
        polygons=[list(sample["polygons"]) for sample in samples],
        ignore=[list(sample["ignore"]) for sample in samples],
    )
