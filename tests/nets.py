"""Small networks for tests, shared by the test modules."""

from __future__ import annotations

import torch

from dlzero.config import ModelConfig
from dlzero.model import PolicyValueNet, new_model


def perturbed_model(cfg: ModelConfig, seed: int, policy_bias: bool = False) -> PolicyValueNet:
    """A random network whose BatchNorm statistics are not the identity, as a trained one's are.

    Fresh BatchNorm layers (mean 0, variance 1) hide mistakes in how a backend folds or casts them;
    perturbed statistics make torch, ONNX and int8 outputs differ visibly when one of them is wrong.
    With `policy_bias`, the policy head's bias is randomised too (drawn after the statistics).
    """
    model = new_model(cfg, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.copy_(torch.randn(module.num_features, generator=gen) * 0.1)
                module.running_var.copy_(torch.rand(module.num_features, generator=gen) + 0.5)
        if policy_bias:
            model.policy_bias.copy_(torch.randn(model.policy_bias.shape, generator=gen))
    return model.eval()
