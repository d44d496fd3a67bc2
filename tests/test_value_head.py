"""The value loss keeps learning when the value saturates (issue 10, defect 1).

A confidently wrong value (pre-tanh logit far past tanh's saturation) must still be pulled towards
its target by a training step, in fp32 and under bf16 autocast alike, and the value head must give
the same logit with or without autocast around it.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from conftest import TINY_MODEL

from dlzero.config import config_from_dict
from dlzero.model import PolicyValueNet
from dlzero.train.buffer import TrainingBatch
from dlzero.train.trainer import Trainer, value_loss

CFG = config_from_dict({
    "model": TINY_MODEL,
    "train": {"batch_size": 8, "lr": 0.01, "weight_decay": 0.0, "grad_clip": 0.0, "ema": False, "device": "cpu"},
})


def _saturated_model(logit: float) -> PolicyValueNet:
    """A model whose value logit is `logit` for every input: fc2 weights zero, bias `logit`."""
    torch.manual_seed(0)
    model = PolicyValueNet(CFG.model)
    with torch.no_grad():
        model.value_fc2.weight.zero_()
        model.value_fc2.bias.fill_(logit)
    return model


def _batch(target: float, n: int = 8) -> TrainingBatch:
    torch.manual_seed(1)
    policy = torch.zeros(n, 2187)
    policy[:, 0] = 1.0
    return TrainingBatch(torch.rand(n, 100, 9, 9), policy, torch.full((n,), target), torch.full((n,), target),
                         torch.full((n,), -1))



def _step_bias(amp: str, logit: float, target: float) -> float:
    model = _saturated_model(logit)
    trainer = Trainer(model, dataclasses.replace(CFG.train, amp=amp), torch.device("cpu"))
    trainer.step(_batch(target), lr=0.01)
    return model.value_fc2.bias.item()


@pytest.mark.parametrize("amp, logit", [("off", 12.0), ("off", -12.0), ("bf16", 5.0), ("bf16", -5.0)])
def test_a_saturated_wrong_value_is_corrected(amp, logit):
    # the network says "won" (logit > 0) for a lost position, or the reverse: the step must move
    # the logit towards the target; the old BCE on tanh's output had gradient exactly 0 here
    target = 0.0 if logit > 0 else 1.0
    out = _step_bias(amp, logit, target)
    assert (out < logit) if logit > 0 else (out > logit)
    # one SGD step with Nesterov momentum m moves by lr * g * (1 + m), g = 2 (sigmoid(2x) - target)
    g = 2.0 * (1.0 / (1.0 + math.exp(-2.0 * logit)) - target)
    assert out == pytest.approx(logit - 0.01 * g * (1.0 + CFG.train.momentum), rel=1e-4)


def test_fp32_and_bf16_steps_agree_on_the_value_head():
    assert _step_bias("bf16", 5.0, 0.0) == pytest.approx(_step_bias("off", 5.0, 0.0), rel=1e-5)


def test_value_head_runs_in_fp32_under_autocast():
    torch.manual_seed(2)
    model = PolicyValueNet(CFG.model).eval()
    h = torch.randn(4, 16, 9, 9)
    with torch.no_grad():
        plain = model._value_logit(h)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = model._value_logit(h)
    assert auto.dtype == torch.float32
    assert torch.equal(plain, auto)


def test_users_still_get_tanh_of_the_logit():
    torch.manual_seed(3)
    model = PolicyValueNet(CFG.model).eval()
    x = torch.rand(3, 100, 9, 9)
    with torch.no_grad():
        policy, value = model(x)
        policy2, logit = model(x, value_logit=True)
    assert torch.equal(policy, policy2)
    assert torch.allclose(value, torch.tanh(logit))
    # the loss is BCE on the win rate (v + 1) / 2 where tanh is not saturated
    target = torch.tensor([0.2, 0.5, 0.9])
    expected = torch.nn.functional.binary_cross_entropy((value + 1) / 2, target, reduction="none")
    assert torch.allclose(value_loss(logit, target), expected, atol=1e-5)
