"""Synthetic receipts: the same per index, word quads that cover the ink, augmentations that keep them so."""

from __future__ import annotations

import copy
import pickle

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import perfkit
from examples.ocr_dbnet.data import Sample, SyntheticReceipts


def ink_inside_and_outside(sample: Sample) -> tuple[float, float]:
    """Mean darkness (1 - brightness) inside the legible quads and outside every quad."""
    darkness = 1 - sample["image"].mean(0).numpy()
    inside = np.zeros(darkness.shape, np.uint8)
    anywhere = np.zeros(darkness.shape, np.uint8)
    for polygon, ignored in zip(sample["polygons"], sample["ignore"], strict=True):
        points = [np.round(polygon).astype(np.int32)]
        cv2.fillPoly(anywhere, points, 1)
        if not ignored:
            cv2.fillPoly(inside, points, 1)
    return float(darkness[inside == 1].mean()), float(darkness[anywhere == 0].mean())


def test_a_receipt_is_an_image_with_float32_quads_in_pixel_coordinates() -> None:
    sample = SyntheticReceipts(2, image_size=128, lines=(4, 6))[1]
    image = sample["image"]
    assert image.shape == (3, 128, 128)
    assert image.dtype == torch.float32
    assert image.min() >= 0
    assert image.max() <= 1
    assert len(sample["polygons"]) == len(sample["ignore"]) >= 4
    for polygon in sample["polygons"]:
        assert polygon.shape == (4, 2)
        assert polygon.dtype == np.float32
        assert polygon.min() >= 0
        assert polygon.max() <= 127


def test_the_same_index_gives_the_same_receipt_and_another_index_another() -> None:
    ds = SyntheticReceipts(4, image_size=128, lines=(4, 6), augment=True)
    a, again, other = ds[2], ds[2], ds[3]
    assert torch.equal(a["image"], again["image"])
    assert all(np.array_equal(p, q) for p, q in zip(a["polygons"], again["polygons"], strict=True))
    assert not torch.equal(a["image"], other["image"])


def test_augmentation_changes_with_the_epoch_and_comes_back_with_it() -> None:
    ds = SyntheticReceipts(1, image_size=128, lines=(4, 6), augment=True)
    first = ds[0]["image"]
    ds.set_epoch(1)
    assert not torch.equal(ds[0]["image"], first)
    ds.set_epoch(0)
    assert torch.equal(ds[0]["image"], first)


@pytest.mark.parametrize("augment", [False, True])
def test_the_quads_cover_the_ink(augment: bool) -> None:
    ds = SyntheticReceipts(3, image_size=192, lines=(6, 10), augment=augment)
    for i in range(len(ds)):
        inside, outside = ink_inside_and_outside(ds[i])
        assert inside > outside + 0.3, i


def test_receipts_hold_realistic_densities_of_words() -> None:
    counts = [len(SyntheticReceipts(6)[i]["polygons"]) for i in range(6)]
    assert min(counts) >= 8
    assert max(counts) <= 80


def test_augment_is_timed_only_when_augmenting() -> None:
    with perfkit.use_registry(perfkit.Registry()) as reg:
        SyntheticReceipts(1, image_size=64, lines=(2, 3))[0]
        SyntheticReceipts(2, image_size=64, lines=(2, 3), augment=True)[1]
    assert reg.snapshot()["augment"].count == 1


def test_too_many_lines_for_the_image_size_is_refused() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        SyntheticReceipts(1, image_size=128, lines=(8, 14))
    with pytest.raises(IndexError):
        SyntheticReceipts(1, image_size=64, lines=(2, 3))[1]


def test_set_epoch_reaches_a_persistent_worker() -> None:
    ds = SyntheticReceipts(1, image_size=64, lines=(2, 3), augment=True)
    loader = DataLoader(
        ds, batch_size=None, num_workers=1, persistent_workers=True, multiprocessing_context="fork"
    )
    [first] = [sample["image"] for sample in loader]  # one whole epoch
    ds.set_epoch(1)
    [second] = [sample["image"] for sample in loader]
    assert torch.equal(
        first, SyntheticReceipts(1, image_size=64, lines=(2, 3), augment=True, epoch=0)[0]["image"]
    )
    assert torch.equal(second, ds[0]["image"])
    assert not torch.equal(first, second)


def test_a_copied_dataset_keeps_its_epoch_but_no_longer_shares_it() -> None:
    ds = SyntheticReceipts(1, image_size=64, lines=(2, 3), augment=True, epoch=3)
    copied, unpickled = copy.deepcopy(ds), pickle.loads(pickle.dumps(ds))
    assert copied.epoch == unpickled.epoch == 3
    ds.set_epoch(4)
    assert copied.epoch == 3
    assert torch.equal(copied[0]["image"], unpickled[0]["image"])


def test_set_epoch_reaches_a_spawned_persistent_worker() -> None:
    ds = SyntheticReceipts(1, image_size=64, lines=(2, 3), augment=True)
    loader = DataLoader(
        ds, batch_size=None, num_workers=1, persistent_workers=True, multiprocessing_context="spawn"
    )
    [first] = [sample["image"] for sample in loader]
    ds.set_epoch(1)
    [second] = [sample["image"] for sample in loader]
    assert torch.equal(second, ds[0]["image"])
    assert not torch.equal(first, second)
