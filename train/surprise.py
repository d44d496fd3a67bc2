"""Policy-surprise weighting of samples (KataGo, Wu 2019 appendix: "policy surprise weighting").

KataGo spends half of each sample's weight uniformly and half in proportion to how much the search's
target disagreed with the network's prior, KL(target || prior): positions where search found
something the net did not expect carry more to learn.

What dlzero does, and why it differs: hcpe3 (dlshogi's format) stores each ply's visit counts but
not the prior the self-play network gave, so the prior is taken from the network being trained, in
the same forward pass that computes the loss (no extra cost). That net is the self-play net plus the
training steps since, so the weight also favours samples it has not yet learned, a form of
hard-example weighting. KataGo varies how often a sample is drawn; dlzero keeps its deterministic
sampler and scales each sample's loss instead, which gives the same expected gradient. The
normaliser (the mean KL) is taken over the batch, so the weights of every batch average to 1 and the
learning rate keeps its meaning.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def policy_surprise(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample KL(target || softmax(logits)) in nats (0 log 0 taken as 0); no gradient."""
    with torch.no_grad():
        log_prior = F.log_softmax(logits.float(), dim=1)
        return (torch.xlogy(target, target) - target * log_prior).sum(dim=1).clamp_min(0.0)


def surprise_weights(logits: torch.Tensor, target: torch.Tensor, share: float) -> torch.Tensor:
    """Loss weights (1 - share) + share * KL_i / mean(KL); mean 1 over the batch. All ones when share is 0."""
    if share <= 0:
        return torch.ones(len(target), device=target.device)
    kl = policy_surprise(logits, target)
    mean = kl.mean()
    # every target exactly what the net predicts: nothing to favour (a where, not an if: no device sync)
    return torch.where(mean > 1e-12, (1.0 - share) + share * kl / mean.clamp_min(1e-12), torch.ones_like(kl))
