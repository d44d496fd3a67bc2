"""Gumbel AlphaZero's root as pure functions, on hand-made arrays with values worked out by hand
(a broken Gumbel that never learns is a known pitfall, so each piece is pinned down here), then the
same root inside the batched search."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_search import HashEvaluator
from test_selfplay import check_game, tiny_config, tiny_evaluator

from dlzero.config import Config, SearchConfig
from dlzero.data.hcpe3 import ShardWriter, read_hcpe3
from dlzero.encoding import NUM_LABELS
from dlzero.engine.player import Player
from dlzero.engine.timeman import Limits
from dlzero.inference.base import Evaluator
from dlzero.position import parse_position
from dlzero.search import Search, Tree, chosen_index
from dlzero.search.gumbel import (
    PSEUDO_VISITS,
    GumbelParams,
    GumbelRoot,
    completed_q,
    considered_visit,
    final_choice,
    halving_visits,
    improved_policy,
    logits_from_prior,
    mixed_value,
    pseudo_visits,
    select_root,
    sigma,
    top_k,
    transformed_q,
)
from dlzero.selfplay.games import FinishedRecord, play_selfplay_games

PAPER = GumbelParams(c_visit=50.0, c_scale=1.0)


# -- Sequential Halving ------------------------------------------------------------------------
@pytest.mark.parametrize(("m", "n", "expected"), [
    # n = m: one phase, every considered move once
    (4, 4, [1, 1, 1, 1]),
    (12, 12, [1] * 12),
    (16, 16, [1] * 16),
    # m = 16, n = 48, ceil(log2 16) = 4 phases: 16 x max(1, 48 // 64) = 16 sims, then 8 x (48 // 32 = 1),
    # then 4 x (48 // 16 = 3) = 12, then 2 x (48 // 8 = 6) = 12: 16 + 8 + 12 + 12 = 48
    (16, 48, [11, 11, 5, 5, 2, 2, 2, 2] + [1] * 8),
    # m = 4, n = 12, log2 = 2: 4 x (12 // 8 = 1), then 2 x (12 // 4 = 3) = 6 (10 so far), and the
    # last phase (2 x 3) is cut at the budget: 2 more
    (4, 12, [5, 5, 1, 1]),
    # m = 4, n = 16: 4 x 2 = 8, then 2 x 4 = 8
    (4, 16, [6, 6, 2, 2]),
    # one considered move takes everything
    (1, 7, [7]),
])
def test_halving_visits_by_hand(m, n, expected):
    visits = halving_visits(m, n)
    assert visits.tolist() == expected
    assert visits.sum() == n


def test_schedule_phases_for_48():
    seq = [considered_visit(k, 16, 48) for k in range(48)]
    assert seq[:16] == [0] * 16
    assert seq[16:24] == [1] * 8
    assert seq[24:36] == [2] * 4 + [3] * 4 + [4] * 4
    assert seq[36:48] == [5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10]
    assert considered_visit(48, 16, 48) == 11  # past the budget the last phase goes on


# -- completed Q, v_mix, sigma -----------------------------------------------------------------
def _root():
    prior = np.array([0.5, 0.3, 0.2])
    n = np.array([2.0, 1.0, 0.0])
    w = np.array([1.2, 0.3, 0.0])     # Q = 0.6, 0.3
    return prior, n, w, 0.4           # the network's value of the root: 0.4


def test_mixed_value_by_hand():
    prior, n, w, v = _root()
    q = np.array([0.6, 0.3, 0.0])
    weighted = (0.5 * 0.6 + 0.3 * 0.3) / (0.5 + 0.3)         # 0.4875
    assert mixed_value(v, q, n, prior) == pytest.approx((0.4 + 3 * weighted) / 4)  # 0.465625
    assert mixed_value(v, q, np.zeros(3), prior) == pytest.approx(0.4)  # nothing visited: v itself


def test_completed_q_and_sigma_by_hand():
    prior, n, w, v = _root()
    cq = completed_q(n, w, v, prior)
    np.testing.assert_allclose(cq, [0.6, 0.3, 0.465625])
    # sigma = (50 + max N = 2) * 1.0 * q
    np.testing.assert_allclose(sigma(cq, n, PAPER), [52 * 0.6, 52 * 0.3, 52 * 0.465625])
    np.testing.assert_allclose(sigma(cq, n, GumbelParams(10.0, 0.1)), [1.2 * 0.6, 1.2 * 0.3, 1.2 * 0.465625])


def test_improved_policy_moves_mass_to_the_better_move():
    prior, n, w, v = _root()
    logits = np.log(prior)
    small = GumbelParams(c_visit=1.0, c_scale=0.5)  # sigma = (1 + 2) * 0.5 * q = 1.5 q
    pi = improved_policy(logits, n, w, v, small)
    by_hand = prior * np.exp(1.5 * np.array([0.6, 0.3, 0.465625]))
    np.testing.assert_allclose(pi, by_hand / by_hand.sum())
    assert pi.sum() == pytest.approx(1.0)
    assert pi[0] > prior[0] and pi[1] < prior[1]   # the search found move 0 better than its prior said
    # with the paper's constants, 52 * (0.6 - 0.47) dominates the log-prior gap
    assert improved_policy(logits, n, w, v, PAPER)[0] > 0.99


def test_improved_policy_without_search_is_the_prior():
    prior = np.array([0.7, 0.2, 0.1])
    pi = improved_policy(np.log(prior), np.zeros(3), np.zeros(3), 0.3, PAPER)
    np.testing.assert_allclose(pi, prior)  # every Q completes to v: sigma is a constant shift


def test_logits_from_tempered_prior_recover_the_raw_policy():
    raw = np.array([2.0, 0.5, -1.0, -30.0])
    t = 1.74
    tempered = np.exp(raw / t) / np.exp(raw / t).sum()
    want = raw - math.log(np.exp(raw).sum())
    np.testing.assert_allclose(logits_from_prior(tempered.astype(np.float32), t), want, rtol=1e-5, atol=1e-4)


def test_pseudo_visits_keep_the_ratios():
    pi = np.array([0.6, 0.25, 0.15, 0.00001])
    counts = pseudo_visits(pi)
    assert counts.tolist() == [6000, 2500, 1500, 0] and PSEUDO_VISITS <= 0xFFFF


# -- root selection and the played move --------------------------------------------------------
def test_top_k_and_selection_follow_the_schedule():
    g = np.array([0.0, 3.0, 0.0, 0.0, -1.0])
    logits = np.log(np.array([0.4, 0.1, 0.3, 0.1, 0.1]))
    considered = top_k(g + logits, 3)
    assert considered.tolist() == [True, True, True, False, False]
    visits = np.array([1, 0, 1, 0, 0])
    sq = np.zeros(5)
    assert select_root(visits, considered, g, logits, sq, 0) == 1    # the only considered move with 0 visits
    visits = np.array([1, 1, 1, 0, 0])
    sq = np.array([0.0, 0.0, 5.0, 0.0, 0.0])
    assert select_root(visits, considered, g, logits, sq, 1) == 2    # sigma(q) lifts move 2 over move 1's g
    visits = np.array([2, 1, 2, 0, 0])
    assert final_choice(visits, considered, g, logits, sq) == 2      # among the two with the most visits


def test_gumbel_root_spends_the_budget_as_scheduled():
    """With fixed Q the root's visits are exactly the halving schedule's, best moves the longest."""
    k = 20
    prior = np.full(k, 1.0 / k, np.float32)
    q = np.linspace(0.1, 0.9, k)  # move 19 is best
    root = GumbelRoot(prior, 1.0, 0.5, 48, 16, np.random.default_rng(0), PAPER)
    n, w = np.zeros(k), np.zeros(k)
    for _ in range(48):
        i = root.select(n, w)
        n[i] += 1
        w[i] += q[i]
    assert root.visits.sum() == 48 and (root.visits[~root.considered] == 0).all()
    assert sorted(root.visits[root.considered].tolist(), reverse=True) == halving_visits(16, 48).tolist()
    best_considered = int(np.flatnonzero(root.considered).max())
    assert root.choice(n, w) == best_considered  # Q dwarfs g: the best considered move is played
    assert root.visits[best_considered] == 11


# -- inside the batched search -----------------------------------------------------------------
HANGING = "sfen 4k4/9/9/7g1/9/9/9/7R1/4K4 b - 1"   # the gold on 2d hangs: R2h x 2d wins it for free
_VALUES = np.array([1, 3, 4, 5, 8, 10, 6, 0, 6, 6, 6, 6, 10, 12], np.float64)  # board planes P..+R
_HAND = np.array([1, 3, 4, 5, 6, 8, 10], np.float64) * np.array([18, 4, 4, 4, 4, 2, 2])  # hand planes P..R


class MaterialEvaluator(Evaluator):
    """A uniform policy (the raw prior has no idea) and a value from the material balance."""

    backend = "material"

    def __init__(self) -> None:
        super().__init__(1 << 16)

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        board = planes.sum(axis=(2, 3))   # (B, 100): a plane sum is a count (hand planes: x81)
        ours = board[:, 0:14] @ _VALUES + board[:, 62:69] @ _HAND / 81
        theirs = board[:, 31:45] @ _VALUES + board[:, 69:76] @ _HAND / 81
        value = np.tanh((ours - theirs) / 5.0).astype(np.float32)
        return np.zeros((len(planes), NUM_LABELS), np.float32), value


def _gumbel_cfg(**search) -> SearchConfig:
    return SearchConfig(algorithm="gumbel", root_mate_depth=0, leaf_mate_depth=0, **search)


def test_trees_in_lockstep_follow_their_own_schedules():
    positions = ["startpos", "startpos moves 7g7f", "startpos moves 2g2f 8c8d"]
    trees = [Tree(parse_position(p), noise=True) for p in positions]
    search = Search(HashEvaluator(), _gumbel_cfg(), np.random.default_rng(3))
    search.run(trees, 48, leaves_per_tree=1)
    for tree in trees:
        g = tree.gumbel
        assert g is not None and tree.playouts_done == 48
        # a fresh root spends one playout on its own evaluation; its moves get the other 47
        assert g.visits.sum() == 47 == int(tree.root.n.sum())
        assert sorted(g.visits[g.considered].tolist(), reverse=True) == halving_visits(16, 47).tolist()
        assert (tree.root.n[~g.considered] == 0).all()
        pi = g.policy(tree.root.n, tree.root.w)
        assert pi.sum() == pytest.approx(1.0) and (pi > 0).all()
    # a reused root: the next search's schedule counts only its own playouts
    tree = trees[0]
    tree.advance(int(tree.root.moves[chosen_index(tree)]))
    search.run([tree], 16, leaves_per_tree=1)
    assert tree.gumbel.visits.sum() == 16


def test_gumbel_adds_no_dirichlet_noise_and_samples_only_when_exploring():
    board = parse_position("startpos")
    search = Search(HashEvaluator(), _gumbel_cfg(), np.random.default_rng(0))
    quiet, noisy = Tree(board.copy()), Tree(board.copy(), noise=True)
    search.run([quiet, noisy], 16, leaves_per_tree=1)
    np.testing.assert_array_equal(quiet.root.prior, noisy.root.prior)  # no Dirichlet mixed in
    assert not noisy.noised
    assert (quiet.gumbel.gumbel == 0).all() and (noisy.gumbel.gumbel != 0).all()


def test_gumbel_finds_the_hanging_gold_more_often_than_the_prior():
    board = parse_position(HANGING)
    capture = board.move_from_usi("2h2d")
    k = len(list(board.legal_moves))
    search = Search(MaterialEvaluator(), _gumbel_cfg(gumbel_considered=8), np.random.default_rng(7))
    trials = 40
    trees = [Tree(board.copy(), noise=True) for _ in range(trials)]
    search.run(trees, 8, leaves_per_tree=1)    # a small budget: 7 simulations among 8 sampled moves
    chosen = [int(t.root.moves[chosen_index(t)]) for t in trees]
    rate = sum(m == capture for m in chosen) / trials
    # the uniform prior plays it 1 time in k (~1/20); Gumbel plays it whenever it was sampled
    # among the considered moves (7 of k), so ~7/k
    assert rate > 3.0 / k
    # and its target puts more mass on it than the prior
    i = trees[0].root.child_index(capture)
    assert np.mean([t.gumbel.policy(t.root.n, t.root.w)[i] for t in trees]) > 2.0 / k


def test_selfplay_with_gumbel_writes_improved_policy_targets(tmp_path):
    cfg = tiny_config("search.algorithm=gumbel", "selfplay.playouts=12", "selfplay.full_search_prob=0.6")
    ev = tiny_evaluator(cfg, tmp_path)
    done: list[FinishedRecord] = []
    writer = ShardWriter(tmp_path / "data", "g", cfg.selfplay.games_per_shard, {"generation": 0})

    def on_done(game: FinishedRecord) -> None:
        done.append(game)
        writer.add(game.record)

    play_selfplay_games(ev, cfg, 4, on_done, np.random.default_rng(2))
    writer.close()
    games = [g for p in writer.written for g in read_hcpe3(p)]  # validates legality by replay
    assert games == [g.record for g in done] and len(games) == 4
    for game in done:
        check_game(game, cfg)
    targets = [m for g in games for m in g.moves if m.is_target]
    assert targets
    for m in targets:
        counts = m.candidates[:, 1].astype(np.int64)
        # pi' as pseudo-visits: every legal move with mass >= 0.5e-4, summing to ~PSEUDO_VISITS
        # (a 12-playout visit count would sum to 12 over at most 12 moves)
        assert abs(int(counts.sum()) - PSEUDO_VISITS) <= len(counts)
        assert len(counts) > 12


def test_engine_with_gumbel_plays_the_capture_and_reports_it_first():
    cfg = Config()
    cfg.search = _gumbel_cfg(gumbel_considered=32)
    player = Player(MaterialEvaluator(), cfg)
    player.set_position(parse_position(HANGING))
    result = player.think(Limits(playouts=40))
    assert result.bestmove == "2h2d" and result.pv[0] == "2h2d"
    assert result.winrate > 0.9  # the chosen move's Q, not the most visited move's


def test_fast_root_selection_equals_the_pure_rule():
    """`GumbelRoot.select` computes on the eligible moves only; it must pick what the pure rule picks."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        k = int(rng.integers(2, 40))
        prior = rng.dirichlet(np.ones(k)).astype(np.float32)
        budget = int(rng.integers(2, 80))
        root = GumbelRoot(prior, 1.74, float(rng.random()), budget, 16, rng if trial % 2 else None, PAPER)
        n = np.where(rng.random(k) < 0.3, rng.integers(0, 5, k), 0).astype(np.float64)  # reused-root visits
        w = n * rng.random(k)
        for _ in range(budget):
            want = considered_visit(int(root.visits.sum()), root.m, budget)
            expected = select_root(root.visits.copy(), root.considered, root.gumbel, root.logits,
                                   transformed_q(root.logits, n, w, root.raw_value, PAPER), want)
            i = root.select(n, w)
            assert i == expected
            n[i] += 1
            w[i] += rng.random()


def test_usi_option_selects_gumbel():
    from dlzero.usi.options import OPTIONS, with_option

    opt = next(o for o in OPTIONS if o.name == "SearchAlgorithm")
    assert with_option(Config(), opt, "gumbel").search.algorithm == "gumbel"
    with pytest.raises(ValueError, match="search.algorithm"):
        with_option(Config(), opt, "alphabeta")
