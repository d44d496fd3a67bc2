"""The policy target a search records: its root visits, less those its own root PUCT rule would
not have made.

Two kinds of root visits are not this search's choice:

- root noise: Dirichlet noise raises some priors, and PUCT then visits those moves for the noise's
  sake (dlshogi subtracts such visits, KataGo prunes its forced playouts);
- tree reuse: the subtree kept from the previous move was grown while this root was an inner node,
  under the inner PUCT constants (larger `c_init`, an FPU reduction) and the previous search's
  statistics, so it carries visits the root rule would not have spent.

Rule (KataGo's policy-target pruning, scored with the priors *before* noise): let b be the most
visited child and S_b = Q_b + c(N) P_b sqrt(N) / (1 + n_b) its root PUCT score at the end. Root PUCT
picks child i over b only while Q_i + c(N) P_i sqrt(N) / (1 + m) >= S_b, that is for its first
floor(c(N) P_i sqrt(N) / (S_b - Q_i)) visits; every visit of i beyond that count was caused by the
noise or carried over, and is removed. A child whose Q is at least S_b keeps all its visits, b keeps
its own. With neither noise nor reuse the rule removes little (only what the final Q values no
longer justify).

Why not count only this move's own playouts: PUCT gives new playouts *given* the visits already
there, so a move that was reused with many visits gets few new ones; the new visits alone are the
complement of the old ones, not a policy. The totals are what PUCT converges to, and pruning takes
away exactly what it would not have chosen.
"""

from __future__ import annotations

import math

import numpy as np

from dlzero.config import SearchConfig
from dlzero.search.node import Node
from dlzero.search.select import PuctParams, exploration_constant


def pruned_visits(root: Node, clean_prior: np.ndarray | None, cfg: SearchConfig) -> np.ndarray:
    """Root visit counts (float, one per root move) after the pruning described above.

    `clean_prior`: the root priors before noise (None: the root's priors carry no noise).
    """
    n = np.asarray(root.n, dtype=np.float64)
    out = n.copy()
    total = root.visits
    if total <= 0 or not (n > 0).any():
        return out
    prior = np.asarray(root.prior if clean_prior is None else clean_prior, dtype=np.float64)
    c = exploration_constant(total, PuctParams(cfg.c_init_root, cfg.c_base_root, cfg.fpu_reduction_root))
    explore = c * math.sqrt(total) * prior  # c(N) P sqrt(N)
    q = np.divide(root.w, n, out=np.zeros_like(n), where=n > 0)
    best = int(n.argmax())
    score_best = q[best] + explore[best] / (1.0 + n[best])
    gap = score_best - q
    prune = (n > 0) & (gap > 0)
    prune[best] = False
    justified = np.floor(np.divide(explore, gap, out=np.zeros_like(n), where=prune))
    out[prune] = np.minimum(n[prune], justified[prune])
    return out
