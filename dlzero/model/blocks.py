"""KataGo's global-pooling bias block (Wu 2019, "Accelerating Self-Play Learning in Go", section 3.1).

A plain residual block sees only a 3x3 neighbourhood per layer, so whole-board facts (material in
hand, who is attacking on the far side) reach a square only through many layers. The pooling block
lets every square see them after one:

    a = ReLU(BN(conv3x3(x)))                       C channels
    X, G = a[:, :C - g], a[:, C - g:]              g = C // 4 pooled channels
    bias = Linear([mean(G), max(G)])               one value per channel of X (mean and max over 81 squares)
    out = ReLU(x + BN(conv3x3(X + bias)))

KataGo also feeds a board-size-scaled mean; shogi's board is always 9x9, so that term would be the
mean times a constant and is left out. All ops (ReduceMean, ReduceMax, Gemm) export to ONNX.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn(cin: int, cout: int, k: int) -> nn.Sequential:
    """Convolution without bias (the BN's shift does that job) followed by batch norm."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout))


def pooled_channels(channels: int) -> int:
    """Channels of the first convolution that are pooled (KataGo pools about a third; we take a quarter)."""
    return max(1, channels // 4)


class GlobalPoolBlock(nn.Module):
    """A residual block whose middle activation gets a per-channel bias computed from global pooling."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        if channels < 2:
            raise ValueError("a global-pooling block needs at least 2 channels")
        self.pool = pooled_channels(channels)
        rest = channels - self.pool
        self.a = conv_bn(channels, channels, 3)
        self.pool_fc = nn.Linear(2 * self.pool, rest)
        self.b = conv_bn(rest, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.a(x))
        rest = a.shape[1] - self.pool
        local, pooled = a[:, :rest], a[:, rest:]
        summary = torch.cat([pooled.mean(dim=(2, 3)), pooled.amax(dim=(2, 3))], dim=1)
        biased = local + self.pool_fc(summary)[:, :, None, None]
        return torch.relu(x + self.b(biased))
