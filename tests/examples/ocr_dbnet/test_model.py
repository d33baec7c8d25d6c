"""The DBNet model's maps and the DB loss terms."""

from __future__ import annotations

import pytest
import torch

from examples.ocr_dbnet.data import SyntheticReceipts
from examples.ocr_dbnet.model import DBLoss, DBNet, balanced_bce, dice_loss, masked_l1
from examples.ocr_dbnet.targets import db_collate_fn


@pytest.fixture(scope="module")
def batch() -> dict[str, object]:
    ds = SyntheticReceipts(2, image_size=64, lines=(2, 3))
    return dict(db_collate_fn([ds[0], ds[1]]))


def test_the_three_maps_come_out_at_input_resolution_in_zero_one() -> None:
    torch.manual_seed(0)
    out = DBNet().eval()(torch.rand(2, 3, 64, 96))
    for name in ("prob", "thresh", "binary"):
        assert out[name].shape == (2, 1, 64, 96), name
        assert out[name].min() >= 0, name
        assert out[name].max() <= 1, name


def test_binary_map_is_the_differentiable_binarisation_of_prob_and_thresh() -> None:
    model = DBNet(k=50).eval()
    out = model(torch.rand(1, 3, 32, 32))
    expected = 1 / (1 + torch.exp(-50 * (out["prob"] - out["thresh"])))
    torch.testing.assert_close(out["binary"], expected)


def test_input_sides_must_be_multiples_of_32() -> None:
    with pytest.raises(ValueError, match="multiples of 32"):
        DBNet()(torch.rand(1, 3, 48, 64))


def test_loss_on_a_tiny_batch_is_finite_and_backpropagates(batch: dict[str, object]) -> None:
    torch.manual_seed(0)
    model = DBNet()
    image = batch["image"]
    assert isinstance(image, torch.Tensor)
    losses = DBLoss()(model(image), batch)
    assert set(losses) == {"loss", "prob", "binary", "thresh"}
    assert all(torch.isfinite(v) for v in losses.values())
    torch.testing.assert_close(losses["loss"], losses["prob"] + losses["binary"] + 10 * losses["thresh"])
    losses["loss"].backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)


def test_balanced_bce_keeps_every_positive_and_the_three_hardest_negatives_each() -> None:
    pred = torch.tensor([0.8, 0.9, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.95])
    gt = torch.tensor([1.0, 1.0, 0, 0, 0, 0, 0, 0, 0, 0])
    mask = torch.ones(10)
    mask[9] = 0  # the worst negative is masked out
    hardest = torch.tensor([0.7, 0.6, 0.5, 0.4, 0.3, 0.2])  # 2 positives -> 6 negatives
    expected = (-torch.log(torch.tensor([0.8, 0.9])).sum() - torch.log(1 - hardest).sum()) / 8
    torch.testing.assert_close(balanced_bce(pred, gt, mask), expected, rtol=1e-5, atol=1e-6)


def test_dice_and_l1_are_zero_on_a_perfect_prediction_and_one_on_its_opposite() -> None:
    gt = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    mask = torch.ones(2, 2)
    assert dice_loss(gt, gt, mask).item() == pytest.approx(0, abs=1e-6)
    assert dice_loss(1 - gt, gt, mask).item() == pytest.approx(1)
    assert masked_l1(gt, gt, mask).item() == 0
    assert masked_l1(1 - gt, gt, torch.tensor([[1.0, 0.0], [0.0, 0.0]])).item() == pytest.approx(1)
