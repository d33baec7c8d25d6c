"""A small DBNet: strided-conv backbone, FPN neck, DB head; and the DB loss.

    model = DBNet()
    out = model(images)                 # images (N, 3, H, W), H and W multiples of 32
    out["prob"], out["thresh"], out["binary"]       # each (N, 1, H, W), in [0, 1]
    losses = DBLoss()(out, batch)       # batch: shrink/threshold maps and masks, (N, H, W)
    losses["loss"].backward()

binary = 1 / (1 + exp(-k (P - T))) is the differentiable binarisation of the paper (k = 50).
The loss is L = Ls + alpha Lb + beta Lt: balanced BCE (hard negatives 3:1) on P, dice on the
binary map, L1 on T inside the threshold mask; alpha = 1, beta = 10.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import TypedDict

import torch
from torch import nn
from torch.nn import functional as F


class DBOutput(TypedDict):
    """The three maps of the DB head, each (N, 1, H, W)."""

    prob: torch.Tensor
    thresh: torch.Tensor
    binary: torch.Tensor


def conv_bn_relu(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """3x3 convolution, batch norm, ReLU."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)
    )


class Backbone(nn.Module):
    """Five stride-2 stages; returns the features at 1/4, 1/8, 1/16 and 1/32 of the input."""

    def __init__(self, channels: tuple[int, ...] = (8, 16, 32, 64, 96)) -> None:
        super().__init__()
        widths = (3, *channels)
        self.stages = nn.ModuleList(
            nn.Sequential(conv_bn_relu(c_in, c_out, 2), conv_bn_relu(c_out, c_out))
            for c_in, c_out in pairwise(widths)
        )
        self.out_channels = channels[1:]

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        return features[1:]


class FPN(nn.Module):
    """Lateral 1x1 convs, top-down upsample + add, 3x3 smooth; every level upsampled to 1/4, concatenated."""

    def __init__(self, in_channels: tuple[int, ...], inner: int = 32) -> None:
        super().__init__()
        self.lateral = nn.ModuleList(nn.Conv2d(c, inner, 1, bias=False) for c in in_channels)
        self.smooth = nn.ModuleList(
            nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False) for _ in in_channels
        )
        self.out_channels = inner // 4 * len(in_channels)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        laterals = [conv(f) for conv, f in zip(self.lateral, features, strict=True)]
        for i in range(len(laterals) - 2, -1, -1):  # top-down: 1/32 into 1/16, ... into 1/4
            laterals[i] = laterals[i] + F.interpolate(
                laterals[i + 1], size=laterals[i].shape[-2:], mode="nearest"
            )
        size = laterals[0].shape[-2:]
        return torch.cat(
            [
                F.interpolate(s(p), size=size, mode="nearest")
                for s, p in zip(self.smooth, laterals, strict=True)
            ],
            1,
        )


def db_branch(c_in: int) -> nn.Sequential:
    """conv-BN-ReLU, then two stride-2 deconvolutions back to input resolution, and a sigmoid."""
    mid = c_in // 4
    return nn.Sequential(
        conv_bn_relu(c_in, mid),
        nn.ConvTranspose2d(mid, mid, 2, 2),
        nn.BatchNorm2d(mid),
        nn.ReLU(inplace=True),
        nn.ConvTranspose2d(mid, 1, 2, 2),
        nn.Sigmoid(),
    )


class DBNet(nn.Module):
    """Backbone, FPN and the DB head: probability, threshold and approximate binary maps.

    >>> out = DBNet()(torch.zeros(1, 3, 64, 64))
    >>> out["binary"].shape
    torch.Size([1, 1, 64, 64])
    """

    def __init__(self, *, k: float = 50.0, inner: int = 32) -> None:
        super().__init__()
        self.k = k
        self.backbone = Backbone()
        self.neck = FPN(self.backbone.out_channels, inner)
        self.prob_head = db_branch(self.neck.out_channels)
        self.thresh_head = db_branch(self.neck.out_channels)

    def forward(self, images: torch.Tensor) -> DBOutput:
        if images.shape[-1] % 32 or images.shape[-2] % 32:
            raise ValueError(f"image height and width must be multiples of 32, got {tuple(images.shape)}")
        fused = self.neck(self.backbone(images))
        prob, thresh = self.prob_head(fused), self.thresh_head(fused)
        return DBOutput(prob=prob, thresh=thresh, binary=torch.sigmoid(self.k * (prob - thresh)))


def balanced_bce(
    pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor, negative_ratio: float = 3.0, eps: float = 1e-6
) -> torch.Tensor:
    """BCE over all positives and the hardest ``negative_ratio`` x as many negatives (OHEM)."""
    positive = (gt * mask) > 0.5
    negative = ((1 - gt) * mask) > 0.5
    n_pos = int(positive.sum())
    n_neg = min(int(negative.sum()), int(n_pos * negative_ratio))
    loss = F.binary_cross_entropy(pred, gt, reduction="none")
    hardest_negatives = torch.topk((loss * negative).flatten(), n_neg).values
    return ((loss * positive).sum() + hardest_negatives.sum()) / (n_pos + n_neg + eps)


def dice_loss(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """1 - 2 |P ∩ G| / (|P| + |G|) inside ``mask``."""
    intersection = (pred * gt * mask).sum()
    return 1 - 2 * intersection / ((pred * mask).sum() + (gt * mask).sum() + eps)


def masked_l1(pred: torch.Tensor, gt: torch.Tensor, mask: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Mean absolute error inside ``mask``."""
    return ((pred - gt).abs() * mask).sum() / (mask.sum() + eps)


class DBLoss(nn.Module):
    """L = Ls + alpha Lb + beta Lt; returns the total under "loss" and each term."""

    def __init__(self, *, alpha: float = 1.0, beta: float = 10.0, negative_ratio: float = 3.0) -> None:
        super().__init__()
        self.alpha, self.beta, self.negative_ratio = alpha, beta, negative_ratio

    def forward(self, out: DBOutput, targets: Mapping[str, object]) -> dict[str, torch.Tensor]:
        gt, mask = _map(targets, "shrink_map"), _map(targets, "shrink_mask")
        prob = balanced_bce(out["prob"][:, 0], gt, mask, self.negative_ratio)
        binary = dice_loss(out["binary"][:, 0], gt, mask)
        thresh = masked_l1(
            out["thresh"][:, 0], _map(targets, "threshold_map"), _map(targets, "threshold_mask")
        )
        loss = prob + self.alpha * binary + self.beta * thresh
        return {"loss": loss, "prob": prob, "binary": binary, "thresh": thresh}


def _map(targets: Mapping[str, object], key: str) -> torch.Tensor:
    value = targets[key]
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"targets[{key!r}] must be a tensor (N, H, W), got {type(value).__name__}")
    return value
