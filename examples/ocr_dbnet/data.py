"""Synthetic receipts: printed-looking words on paper, with one ground-truth quad per word.

    ds = SyntheticReceipts(16, image_size=256, lines=(8, 14), augment=True)
    sample = ds[3]          # the same receipt every time: the seed is (seed, index)
    sample["image"]         # (3, 256, 256) float32 in [0, 1]
    sample["polygons"]      # list of (4, 2) float32 quads, (x, y) pixel coordinates
    sample["ignore"]        # True for an illegible ("###") word: neither text nor background

Words are rows of dark glyph boxes on light, noisy paper; some lines are slightly rotated.
Annotations are word-level, as in ICDAR-style DBNet datasets. Nothing is downloaded.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import get_spawning_popen
from typing import Any, TypedDict

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

import perfkit

from .geometry import polygon_area

_INK = np.array([0.08, 0.08, 0.14], dtype=np.float32)
_MARGIN = 0.06  # of the image size, on every side
_MIN_PITCH = 11.0  # px per line: text is at least 9 px high, and lines must not touch
_AA_SHIFT = 4  # cv2 drawing with 4 fractional bits: glyph edges are anti-aliased, not snapped to pixels


class Sample(TypedDict):
    """One receipt: the image, its word quads and which of them are illegible."""

    image: torch.Tensor
    polygons: list[np.ndarray]
    ignore: list[bool]


class SyntheticReceipts(Dataset[Sample]):
    """``n`` receipts generated on the fly, each from the seed ``(seed, index)``.

    With ``augment=True`` a random brightness/contrast and a small scale/translation are applied
    to the image and its quads alike, seeded by ``(seed, index, epoch)``: call ``set_epoch`` to
    get new augmentations. The epoch lives in shared memory, so DataLoader workers, persistent
    ones included, see the new value from their next sample on.

    >>> ds = SyntheticReceipts(4, image_size=128, lines=(4, 6))
    >>> ds[0]["image"].shape, len(ds)
    (torch.Size([3, 128, 128]), 4)
    """

    def __init__(
        self,
        n: int = 16,
        *,
        image_size: int = 256,
        lines: tuple[int, int] = (8, 14),
        seed: int = 0,
        augment: bool = False,
        epoch: int = 0,
    ) -> None:
        if n < 0 or not 1 <= lines[0] <= lines[1]:
            raise ValueError(f"need n >= 0 and 1 <= lines[0] <= lines[1], got n={n}, lines={lines}")
        if (1 - 2 * _MARGIN) * image_size / lines[1] < _MIN_PITCH:
            raise ValueError(
                f"{lines[1]} lines do not fit in {image_size} px: allow fewer lines or a larger image"
            )
        self.n, self.image_size, self.lines = n, image_size, lines
        self.seed, self.augment = seed, augment
        # Shared with worker processes (inherited when they start); one int, so no lock is needed.
        self._epoch = multiprocessing.RawValue("q", epoch)

    def __len__(self) -> int:
        return self.n

    def set_epoch(self, epoch: int) -> None:
        """Seed the augmentations of the next ``__getitem__`` calls, here and in workers, with ``epoch``."""
        self._epoch.value = epoch

    @property
    def epoch(self) -> int:
        """The epoch that seeds the augmentations."""
        return int(self._epoch.value)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if get_spawning_popen() is None:  # a copy or pickle, not a worker starting: copy the epoch
            state["_epoch"] = self.epoch
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state["_epoch"], int):
            state["_epoch"] = multiprocessing.RawValue("q", state["_epoch"])
        self.__dict__.update(state)

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for {self.n} receipts")
        image, polygons, ignore = render_receipt(
            np.random.default_rng((self.seed, index)), self.image_size, self.lines
        )
        if self.augment:
            rng = np.random.default_rng((self.seed, index, self.epoch))
            image, polygons, ignore = augment(image, polygons, ignore, rng)
        return Sample(
            image=torch.from_numpy(image.transpose(2, 0, 1).copy()), polygons=polygons, ignore=ignore
        )


@perfkit.timed("render_receipt")  # stands in for the image decoding of a real dataset
def render_receipt(
    rng: np.random.Generator, size: int, lines: tuple[int, int]
) -> tuple[np.ndarray, list[np.ndarray], list[bool]]:
    """Draw one receipt: an (H, W, 3) float32 image in [0, 1], its word quads and ignore flags."""
    n_lines = int(rng.integers(lines[0], lines[1] + 1))
    margin = _MARGIN * size
    pitch = (size - 2 * margin) / n_lines
    ink = np.zeros((size, size), dtype=np.uint8)  # ink coverage, 255 = full
    polygons: list[np.ndarray] = []
    ignore: list[bool] = []
    for k in range(n_lines):
        center_y = margin + (k + 0.5) * pitch
        height = float(np.clip(pitch * rng.uniform(0.6, 0.75), 9.0, 24.0))
        angle = np.deg2rad(rng.uniform(-4, 4)) if rng.random() < 0.3 else 0.0
        to_page = _rotation(angle, (size / 2, center_y))
        for quad, glyphs in _line_words(rng, size, margin, height):
            illegible = bool(rng.random() < 0.05)
            glyph_quads = [(_apply(to_page, g) * (1 << _AA_SHIFT)).round().astype(np.int32) for g in glyphs]
            cv2.fillPoly(ink, glyph_quads, 90 if illegible else 255, cv2.LINE_AA, _AA_SHIFT)
            polygons.append(_apply(to_page, quad).astype(np.float32))
            ignore.append(illegible)
    return _paper(rng, size, ink), polygons, ignore


def _line_words(
    rng: np.random.Generator, size: int, margin: float, height: float
) -> list[tuple[np.ndarray, list[np.ndarray]]]:
    """Words of one line, around y = 0: (word quad, glyph quads), left column then a right price."""
    char_w, gap = height * rng.uniform(0.5, 0.65), height * 0.15
    right, x = size - margin, margin + rng.uniform(0, 0.25) * size
    words = []
    lengths = [int(rng.integers(2, 9)) for _ in range(int(rng.integers(1, 4)))]
    if rng.random() < 0.6:  # an item line: the price goes to the right edge
        price = int(rng.integers(3, 7))
        right -= price * (char_w + gap) - gap
        words.append(_word(rng, right, price, char_w, gap, height))
        right -= 1.5 * height
    for n_chars in lengths:
        if x + n_chars * (char_w + gap) - gap > right:
            break
        words.append(_word(rng, x, n_chars, char_w, gap, height))
        x += n_chars * (char_w + gap) - gap + rng.uniform(0.5, 0.9) * height
    return words


def _word(
    rng: np.random.Generator, x0: float, n_chars: int, char_w: float, gap: float, height: float
) -> tuple[np.ndarray, list[np.ndarray]]:
    top, bottom = -height / 2, height / 2
    glyphs = []
    for i in range(n_chars):
        left = x0 + i * (char_w + gap)
        glyph_top = top + height * (0.0 if rng.random() < 0.35 else rng.uniform(0.25, 0.4))  # x-height
        glyph_bottom = bottom - (0.0 if rng.random() < 0.85 else height * 0.2)
        glyphs.append(_box(left, glyph_top, left + char_w, glyph_bottom))
    return _box(x0, top, x0 + n_chars * (char_w + gap) - gap, bottom), glyphs


def _box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float64)


def _rotation(angle: float, center: tuple[float, float]) -> np.ndarray:
    """A 2x3 affine map rotating line coordinates (x, y around 0) by ``angle`` about ``center``."""
    c, s = np.cos(angle), np.sin(angle)
    cx, cy = center
    return np.array([[c, -s, cx - c * cx], [s, c, cy - s * cx]])


def _apply(affine: np.ndarray, points: np.ndarray) -> np.ndarray:
    return np.asarray(points @ affine[:, :2].T + affine[:, 2])


def _paper(rng: np.random.Generator, size: int, ink: np.ndarray) -> np.ndarray:
    paper = rng.uniform(0.82, 0.97) + rng.uniform(-0.03, 0.03, 3).astype(np.float32)
    coverage = cv2.GaussianBlur(ink.astype(np.float32) / 255, (3, 3), 0.6)[..., None]
    image = paper * (1 - coverage) + _INK * coverage
    image += 0.025 * rng.standard_normal(image.shape, dtype=np.float32)
    return np.clip(image, 0, 1).astype(np.float32)


@perfkit.timed("augment")
def augment(
    image: np.ndarray, polygons: list[np.ndarray], ignore: list[bool], rng: np.random.Generator
) -> tuple[np.ndarray, list[np.ndarray], list[bool]]:
    """Random brightness/contrast, scale and translation, applied alike to image and quads.

    A quad pushed mostly out of the image is clipped to it and marked ignored.
    """
    h, w = image.shape[:2]
    affine = np.asarray(cv2.getRotationMatrix2D((w / 2, h / 2), 0.0, rng.uniform(0.9, 1.1)), np.float64)
    affine[:, 2] = affine[:, 2] + rng.uniform(-0.04, 0.04, 2) * (w, h)
    paper = tuple(float(c) for c in image[0].mean(axis=0))  # the top margin holds no text
    image = cv2.warpAffine(image, affine, (w, h), flags=cv2.INTER_LINEAR, borderValue=paper)
    image = (image - 0.5) * rng.uniform(0.75, 1.25) + 0.5 + rng.uniform(-0.1, 0.1)
    moved, kept = [], []
    for polygon, ignored in zip(polygons, ignore, strict=True):
        warped = _apply(affine, polygon)
        clipped = np.clip(warped, 0, (w - 1, h - 1))
        moved.append(clipped.astype(np.float32))
        kept.append(ignored or polygon_area(clipped) < 0.5 * polygon_area(warped))
    return np.clip(image, 0, 1).astype(np.float32), moved, kept
