"""The policy-value ResNet.

stem: 3x3 conv (100 -> C) + BN + ReLU
tower: `blocks` x [3x3 conv + BN + ReLU + 3x3 conv + BN, add the input, ReLU] (post-activation)
policy head: 1x1 conv C -> C + BN + ReLU, 1x1 conv C -> 27, flattened channel-major to 2187
             logits, plus one learned bias per logit (dlshogi's layout: index = class*81 + square)
value head: 1x1 conv C -> value_channels + BN + ReLU, FC -> value_fc, ReLU, FC -> 1 (the value logit),
            tanh for users

Convolutions feeding a BN carry no bias (the BN's shift does that job).

Why two outputs for the value: users (search, ONNX, inference) see v = tanh(z) in [-1, 1], while the
trainer takes the raw logit z (`forward_train`) and computes its loss with BCE-with-logits on 2z,
since (tanh(z) + 1) / 2 = sigmoid(2z) is the win rate. A loss on tanh's output stops learning once
v rounds to exactly +-1 (|z| >= ~9 in fp32, ~4 in bf16): the gradient through a saturated tanh is 0
whatever the target. The value head also runs in fp32 outside autocast (it is tiny), so bf16 never
rounds its logit; only when the whole model was cast to half precision for inference does it follow
the weights' dtype.
"""

from __future__ import annotations

import torch
from torch import nn

from dlzero.config import ModelConfig
from dlzero.encoding import NUM_LABELS, NUM_PLANES


def _conv_bn(cin: int, cout: int, k: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout))


class ResidualBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the skip, then ReLU."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = _conv_bn(channels, channels, 3)
        self.b = _conv_bn(channels, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.b(torch.relu(self.a(x))))


class PolicyValueNet(nn.Module):
    """planes (B, 100, 9, 9) -> (policy logits (B, 2187), value (B,) in [-1, 1] for the side to move)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        c = cfg.channels
        self.cfg = cfg
        self.stem = _conv_bn(NUM_PLANES, c, 3)
        self.tower = nn.Sequential(*[ResidualBlock(c) for _ in range(cfg.blocks)])
        self.policy_conv = _conv_bn(c, c, 1)
        self.policy_out = nn.Conv2d(c, NUM_LABELS // 81, 1, bias=False)
        self.policy_bias = nn.Parameter(torch.zeros(NUM_LABELS))
        self.value_conv = _conv_bn(c, cfg.value_channels, 1)
        self.value_fc1 = nn.Linear(cfg.value_channels * 81, cfg.value_fc)
        self.value_fc2 = nn.Linear(cfg.value_fc, 1)

    def forward(self, x: torch.Tensor, value_logit: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """planes -> (policy logits, value tanh(z)); with `value_logit` (the trainer) the raw z instead.

        A keyword rather than a second method, so a DistributedDataParallel wrapper still sees the call.
        """
        h = self.tower(torch.relu(self.stem(x)))
        p = self.policy_out(torch.relu(self.policy_conv(h)))
        policy = p.flatten(1) + self.policy_bias
        z = self._value_logit(h)
        return policy, (z if value_logit else torch.tanh(z))

    def _value_logit(self, h: torch.Tensor) -> torch.Tensor:
        """The value head in its weights' dtype (fp32 unless the model was cast), never under autocast."""
        with torch.autocast(h.device.type, enabled=False):
            v = torch.relu(self.value_conv(h.to(self.value_fc2.weight.dtype))).flatten(1)
            return self.value_fc2(torch.relu(self.value_fc1(v))).squeeze(1)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
