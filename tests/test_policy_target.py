"""Policy targets hold only what the search itself would choose (issue 10, defect 7).

Trees are built by hand (real legal moves of the start position, chosen visit counts, values and
priors); the visit counts self-play records for them are compared with a brute-force count of the
visits root PUCT with the noise-free priors would give each move against the best move's final score.
"""

from __future__ import annotations

import dataclasses
import math

import cshogi
import numpy as np

from dlzero.config import Config, load_config
from dlzero.data.hcpe3 import Hcpe3Record
from dlzero.encoding import legal_moves_and_labels
from dlzero.inference import NullEvaluator
from dlzero.search import Search, Tree
from dlzero.selfplay.games import SelfPlayer, SelfPlayGame


def _cfg() -> Config:
    return load_config(None, ["selfplay.random_plies=0", "selfplay.resign_threshold=0"])


def _tree(prior: dict[int, float], visits: dict[int, int], q: dict[int, float],
          clean: dict[int, float] | None = None) -> Tree:
    """Start position; root moves by index with the given (noisy) priors, visits and Q."""
    board = cshogi.Board()
    moves, _ = legal_moves_and_labels(board)
    k = len(moves)

    def spread(d: dict[int, float]) -> np.ndarray:
        rest = (1.0 - sum(d.values())) / (k - len(d))
        return np.array([d.get(i, rest) for i in range(k)], np.float32)

    tree = Tree(board)
    arena, root = tree.arena, tree.root_index
    arena.expand(root, moves, spread(prior))
    nodes = arena.nodes
    for i, n in visits.items():
        child = arena.make_child(root, i)
        nodes = arena.nodes  # (a new node may move the array)
        nodes["in_n"][child] = nodes["visits"][child] = n
        nodes["in_w"][child] = n * q[i]
    nodes["visits"][root] = float(tree.root.n.sum() + 1)
    nodes["value_sum"][root] = float(tree.root.w.sum())
    if clean is not None:
        tree.clean_prior = spread(clean)
        tree.noised = True
    return tree


def _recorded(tree: Tree, cfg: Config) -> dict[int, int]:
    """Visits per root move index that self-play records for this tree."""
    moves = [int(m) for m in tree.root.moves]
    game = SelfPlayGame(tree.board.copy(), record=Hcpe3Record.from_board(tree.board), no_resign=True, full=True)
    player = SelfPlayer(NullEvaluator(), cfg, np.random.default_rng(0), threshold=lambda: 0.0)
    player.pick(game, tree)
    return {_find(moves, int(m)): int(v)
            for m, v in game.record.moves[0].candidates}


def _find(moves: list[int], m16: int) -> int:
    return next(i for i, m in enumerate(moves) if cshogi.move16(m) == m16)


def _brute_force(tree: Tree, prior: np.ndarray, cfg: Config) -> dict[int, int]:
    """Visits root PUCT (noise-free priors) would give each visited move against the best's final score."""
    s = cfg.search
    root = tree.root
    total = root.visits
    c = s.c_init_root + math.log((total + s.c_base_root + 1) / s.c_base_root)
    n, w = root.n, root.w
    best = int(n.argmax())
    score = lambda i, m: w[i] / n[i] + c * float(prior[i]) * math.sqrt(total) / (1 + m)  # noqa: E731
    target = score(best, n[best])
    out = {}
    for i in np.nonzero(n > 0)[0]:
        m = 0
        while i != best and m < n[i] and score(i, m) >= target:
            m += 1
        out[int(i)] = int(n[i]) if i == best else m
    return {i: v for i, v in out.items() if v > 0}


def test_visits_caused_by_root_noise_are_not_recorded():
    cfg = _cfg()
    clean = {0: 0.5, 1: 0.3, 2: 0.01}
    noisy = {0: 0.4, 1: 0.25, 2: 0.3}  # the noise lifted move 2, which then drew 25 visits
    tree = _tree(noisy, {0: 50, 1: 20, 2: 25}, {0: 0.6, 1: 0.55, 2: 0.45}, clean)
    expected = _brute_force(tree, tree.clean_prior, cfg)
    got = _recorded(tree, cfg)
    assert got == expected
    assert got[0] == 50 and got.get(2, 0) < 5  # the noise's visits are gone, the best move's stay


def test_visits_carried_over_by_tree_reuse_are_pruned_to_the_root_rule():
    cfg = _cfg()
    # a reused root: the previous search spread visits evenly under the inner constants
    tree = _tree({0: 0.4, 1: 0.3, 2: 0.3}, {0: 30, 1: 30, 2: 30}, {0: 0.7, 1: 0.4, 2: 0.35})
    expected = _brute_force(tree, tree.root.prior, cfg)
    got = _recorded(tree, cfg)
    assert got == expected and got[0] == 30 and got[1] < 30 and got.get(2, 0) < got[1]


def test_a_plain_search_keeps_nearly_all_its_visits():
    cfg = _cfg()
    tree = Tree(cshogi.Board())
    scfg = dataclasses.replace(cfg.search, root_mate_depth=0)
    Search(NullEvaluator(), scfg).run([tree], 300, leaves_per_tree=1)
    total = tree.root.n.sum()
    got = _recorded(tree, cfg)
    assert sum(got.values()) >= 0.9 * total
