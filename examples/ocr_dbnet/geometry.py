"""Area and perimeter of a closed polygon given as an (N, 2) array of (x, y) points (OpenCV, in C)."""

from __future__ import annotations

import cv2
import numpy as np


def polygon_area(polygon: np.ndarray) -> float:
    """Unsigned area.

    >>> polygon_area(np.array([[0, 0], [4, 0], [4, 3], [0, 3]]))
    12.0
    """
    return float(cv2.contourArea(np.asarray(polygon, dtype=np.float32)))


def polygon_perimeter(polygon: np.ndarray) -> float:
    """Length of the closed outline, last point joined back to the first.

    >>> polygon_perimeter(np.array([[0, 0], [4, 0], [4, 3], [0, 3]]))
    14.0
    """
    return float(cv2.arcLength(np.asarray(polygon, dtype=np.float32), True))
