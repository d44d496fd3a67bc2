"""KataGo's auxiliary opponent-reply head (Wu 2019, section 3.3), a training-only addition to the network.

Predicting the move the opponent played next gives the trunk a second policy-shaped target per sample
for the price of one small head, and KataGo measured it to speed learning up. The head reads the
trunk's features and has the policy head's shape (1x1 conv C -> C + BN + ReLU, 1x1 conv C -> 27,
one bias per label, 2187 logits), its labels from the replying side's point of view, as the
reply targets in `train.buffer` are.

The head lives here, beside the trainer, not in `PolicyValueNet`: model files, ONNX exports,
search and the engine stay (policy, value) and do not change with `train.aux_reply_weight`. Its
weights travel only in training checkpoints.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dlzero.encoding import NUM_LABELS
from dlzero.model import PolicyValueNet
from dlzero.model.blocks import conv_bn


class ReplyHead(nn.Module):
    """Trunk features (B, C, 9, 9) -> logits (B, 2187) of the opponent's reply."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = conv_bn(channels, channels, 1)
        self.out = nn.Conv2d(channels, NUM_LABELS // 81, 1, bias=False)
        self.bias = nn.Parameter(torch.zeros(NUM_LABELS))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.conv(h))).flatten(1) + self.bias


class TrainingNet(nn.Module):
    """The network as the trainer runs it: (policy, value logit, reply logits or None) from one trunk pass.

    One module, so a DistributedDataParallel wrapper sees every parameter, the reply head's included.
    """

    def __init__(self, model: PolicyValueNet, reply: bool) -> None:
        super().__init__()
        self.model = model
        self.reply = ReplyHead(model.cfg.channels) if reply else None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        h = self.model.trunk(x)
        policy, value = self.model.heads(h, value_logit=True)
        return policy, value, (self.reply(h) if self.reply is not None else None)


def reply_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy against the reply label; 0 where the label is -1 (the game's last ply)."""
    return F.cross_entropy(logits, target, ignore_index=-1, reduction="none")
