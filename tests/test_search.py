"""Search behaviour the engine relies on: mates, draws, declaration, tree reuse, batching."""

from __future__ import annotations

import dataclasses
import threading
import time
import zlib

import cshogi
import numpy as np
import pytest

from dlzero.config import Config, SearchConfig
from dlzero.encoding import NUM_LABELS
from dlzero.engine import Engine
from dlzero.engine.player import Player, root_checks
from dlzero.engine.timeman import Limits
from dlzero.inference import NullEvaluator
from dlzero.inference.base import Evaluator
from dlzero.position import parse_position
from dlzero.search import Search, Tree, find_mate, leaf_result
from dlzero.search.node import Node

MATE1 = "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1"        # G*5b mates
MATE3 = "sfen 4k4/9/9/4G4/9/9/9/9/4K4 b RG 1"       # no mate in 1, mate in 3
NYUGYOKU = "sfen RBGGSSGG1/PPPPPPPPP/4K4/9/9/9/9/9/4k4 b RB 1"


class HashEvaluator(Evaluator):
    """Deterministic, position-dependent priors and values (a stand-in for a network)."""

    backend = "hash"

    def __init__(self) -> None:
        super().__init__(1 << 16)

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = planes.reshape(len(planes), -1).astype(np.float64) @ np.arange(planes[0].size, dtype=np.float64)
        logits = np.sin(np.outer(s % 97 + 1, np.arange(NUM_LABELS) * 0.013)).astype(np.float32)
        return logits, np.tanh(np.sin(s)).astype(np.float32) * 0.5


def _cfg(**search) -> Config:
    cfg = Config()
    cfg.search = dataclasses.replace(cfg.search, **search)
    return cfg


def _mates_in_3(board: cshogi.Board, usi: str) -> bool:
    b = board.copy()
    b.push_usi(usi)
    replies = list(b.legal_moves)
    ok = all(True for _ in replies)
    for r in replies:
        b.push(r)
        ok = ok and bool(find_mate(b, 1))
        b.pop()
    return ok and bool(replies)


def test_root_checks_find_mate_in_1_and_3():
    assert root_checks(parse_position(MATE1), 7).bestmove == "G*5b"
    board = parse_position(MATE3)
    result = root_checks(board, 7)
    assert result.mate == 3 and _mates_in_3(board, result.bestmove)
    assert root_checks(board, 1) is None


def test_tree_finds_mate_in_1_without_root_check():
    player = Player(NullEvaluator(), _cfg(root_mate_depth=0, leaf_mate_depth=0))
    player.set_position(parse_position(MATE1))
    result = player.think(Limits(playouts=300))
    assert result.bestmove == "G*5b" and result.mate == 1


def test_tree_finds_mate_in_3_with_leaf_mate_search():
    player = Player(NullEvaluator(), _cfg(root_mate_depth=0, leaf_mate_depth=1, leaves_per_tree=16))
    board = parse_position(MATE3)
    player.set_position(board)
    result = player.think(Limits(playouts=1500))
    assert _mates_in_3(board, result.bestmove)


def test_repetition_child_gets_draw_value():
    # After 2h3h 8b7b 3h2h, White's 7b8b brings back the start position.
    cfg = SearchConfig(draw_value_black=0.3, draw_value_white=0.6, root_mate_depth=0)
    board = parse_position("startpos moves 2h3h 8b7b 3h2h")
    tree = Tree(board)
    Search(NullEvaluator(), cfg).run([tree], 3000, leaves_per_tree=8)
    i = tree.root.child_index(board.move_from_usi("7b8b"))
    child = tree.root.children[i]
    # White made the repeating move: the draw is worth 0.6 to White, so 0.4 to Black, to move there
    assert child is not None and child.terminal == pytest.approx(0.4)


def test_perpetual_check_is_a_loss_for_the_checker():
    # Black's rook checks from file 1 and file 2 while White's king steps between 1a and 2a; the
    # last move repeats the position after Black's first check.
    board = parse_position("sfen 8k/9/9/9/9/9/9/7R1/K8 b - 1 moves 2h1h 1a2a 1h2h 2a1a 2h1h")
    value = leaf_result(board, SearchConfig(leaf_mate_depth=0), len(list(board.legal_moves)))
    assert value == 1.0  # White, to move, was checked perpetually: White wins


def test_declaration_win():
    board = parse_position(NYUGYOKU)
    assert board.is_nyugyoku()
    player = Player(NullEvaluator(), Config())
    player.set_position(board)
    assert player.think(Limits(playouts=10)).bestmove == "win"


def test_a_search_without_a_limit_takes_search_playouts():
    """`go` with no clock, no nodes and usi.playouts 0, and the Python Engine without playouts, search
    `search.playouts` (one key for the playouts of a one-position search)."""
    player = Player(NullEvaluator(), _cfg(playouts=24))
    player.set_position(parse_position("startpos"))
    assert player.think(Limits()).playouts == 24
    engine = Engine(NullEvaluator(), _cfg(playouts=40))
    assert engine.analyze("startpos").playouts == 40 and engine.analyze("startpos", playouts=12).playouts == 12


def test_max_moves_draw():
    cfg = SearchConfig(max_moves=20, draw_value_black=0.2, draw_value_white=0.7, leaf_mate_depth=0)
    board = parse_position("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 20")
    tree = Tree(board)
    Search(NullEvaluator(), cfg).run([tree], 200, leaves_per_tree=8)
    children = [c for c in tree.root.children if c is not None]
    # Black's move reached the cap: worth 0.2 to Black, so 0.8 to White, to move in each child
    assert children and all(c.terminal == pytest.approx(0.8) for c in children)


def test_tree_reuse_keeps_visits():
    player = Player(HashEvaluator(), _cfg(root_mate_depth=0))
    board = parse_position("startpos")
    player.set_position(board)
    result = player.think(Limits(playouts=300))
    move = board.move_from_usi(result.bestmove)
    visits = player.tree.root.n[player.tree.root.child_index(move)]
    board.push(move)
    player.set_position(board)
    assert player.tree.root.visits >= visits - 1 > 10


def test_batched_and_single_leaf_agree():
    cfg = SearchConfig(root_mate_depth=0, leaf_mate_depth=0)
    board = parse_position(MATE1)
    fractions = {}
    for leaves in (1, 32):
        tree = Tree(board.copy())
        Search(HashEvaluator(), cfg).run([tree], 800, leaves_per_tree=leaves)
        root = tree.root
        best = int(np.argmax(root.n))
        assert cshogi.move_to_usi(int(root.moves[best])) == "G*5b"
        fractions[leaves] = root.n[best] / root.n.sum()
    assert abs(fractions[1] - fractions[32]) < 0.1


class _SlowOverlapCounting(HashEvaluator):
    """HashEvaluator taking 4 ms a call, counting how many of its calls overlap (as a CPU network
    call releases the GIL, so does the sleep)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.inside = self.most = 0

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.004)
            return super()._run(planes)
        finally:
            with self.lock:
                self.inside -= 1


@pytest.mark.parametrize("streams", [1, 2, 3])
def test_eval_streams_keep_that_many_batches_in_flight(streams):
    """`search.eval_streams` batches are evaluated at once, never more; every playout is backed up
    exactly once and the search still finds the mate."""
    ev = _SlowOverlapCounting()
    tree = Tree(parse_position(MATE1))
    search = Search(ev, SearchConfig(root_mate_depth=0, leaf_mate_depth=0, eval_streams=streams))
    search.run([tree], 600, leaves_per_tree=8)
    search.close()
    assert ev.most == streams
    assert tree.playouts_done == 600 == int(tree.root.n.sum()) + 1  # the first playout evaluates the root
    assert tree.inflight == 0 and search.stats.evaluations <= 600
    assert cshogi.move_to_usi(int(tree.root.moves[int(np.argmax(tree.root.n))])) == "G*5b"


def test_lockstep_equals_one_at_a_time():
    cfg = SearchConfig(root_mate_depth=0)
    positions = ["startpos", "startpos moves 7g7f", "startpos moves 2g2f 8c8d", MATE3]
    together = [Tree(parse_position(p)) for p in positions]
    Search(HashEvaluator(), cfg).run(together, 120, leaves_per_tree=4)
    for p, tree in zip(positions, together, strict=True):
        alone = Tree(parse_position(p))
        Search(HashEvaluator(), cfg).run([alone], 120, leaves_per_tree=4)
        np.testing.assert_array_equal(alone.root.n, tree.root.n)
        np.testing.assert_allclose(alone.root.w, tree.root.w)


class _HashedPriors(Evaluator):
    """Deterministic non-uniform priors and values from the planes (so ties are rare but possible)."""

    backend = "fake"

    def __init__(self) -> None:
        super().__init__(1 << 12)

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out_p = np.empty((len(planes), NUM_LABELS), np.float32)
        out_v = np.empty(len(planes), np.float32)
        for j, x in enumerate(planes):
            rng = np.random.default_rng(zlib.crc32(x.tobytes()))
            out_p[j] = rng.normal(0.0, 2.0, NUM_LABELS)
            out_v[j] = rng.uniform(-0.9, 0.9)
        return out_p, out_v


@pytest.mark.parametrize("evaluator,algorithm", [(NullEvaluator, "puct"), (_HashedPriors, "puct"),
                                                 (_HashedPriors, "gumbel")])
@pytest.mark.parametrize("noise", [False, True])
def test_the_compiled_walk_grows_the_numpy_tree(evaluator, algorithm, noise, monkeypatch):
    """The search on the compiled arena (`_puct.c`'s walk, backup and compaction) and on the numpy one build
    identical trees: every node and edge record, bit for bit. The second search runs on a reused root (the
    subtree compacted into a new arena) with fresh root noise when `noise`. Under Gumbel the root's step is
    Python's in both and the compiled walk starts below it."""
    import dlzero.search.arena as arena

    def grow(compiled: bool) -> Tree:
        monkeypatch.setattr(arena, "COMPILED", compiled)
        tree = Tree(parse_position("startpos moves 7g7f 3c3d 2g2f 4c4d 2f2e 2b3c"), noise=noise)
        search = Search(evaluator(), SearchConfig(leaf_mate_depth=0, root_mate_depth=0, algorithm=algorithm),
                        rng=np.random.default_rng(5))
        search.run([tree], 1500, leaves_per_tree=8)
        tree.advance(int(tree.root.moves[np.argmax(tree.root.n)]))
        assert tree.root.expanded and tree.root.visits > 20
        search.add_root_noise(tree)
        search.run([tree], 1200, leaves_per_tree=8)
        assert tree.arena.compiled == compiled
        return tree

    built = arena.COMPILED
    full = grow(False)
    assert walk_equal(full.root, full.root) == full.nodes > 1000
    assert full.memory == full.root.size()[1]  # a reused tree holds its subtree and nothing else
    if not built:
        pytest.skip("the compiled arena is not built here")
    fast = grow(True)
    assert fast.nodes == full.nodes and fast.arena.n_edges == full.arena.n_edges
    for name in arena.NODE_DTYPE.names:
        np.testing.assert_array_equal(fast.arena.nodes[name][:fast.nodes], full.arena.nodes[name][:full.nodes])
    for name in arena.EDGE_DTYPE.names:
        n = fast.arena.n_edges
        np.testing.assert_array_equal(fast.arena.edges[name][:n], full.arena.edges[name][:n])


def walk_equal(a: Node, b: Node) -> int:
    """Nodes of two trees compared move for move from `a` and `b` down (moves, visits, values); their count."""
    assert a.expanded == b.expanded
    if not a.expanded:
        return 1
    np.testing.assert_array_equal(a.moves, b.moves)
    np.testing.assert_array_equal(a.n, b.n)
    np.testing.assert_array_equal(a.w, b.w)
    return 1 + sum(walk_equal(x, y) for x, y in zip(a.children, b.children, strict=True)
                   if x is not None and y is not None)


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_a_search_in_slices_grows_the_tree_of_one_search_and_guards_it_once(algorithm, monkeypatch):
    """Issue 41: the analysis engine cuts long searches into slices, and each slice's `Search.run` began a
    new Gumbel root (Sequential Halving restarted on the playouts left) and ran the mate guard again.
    Cut here at every network call, the search must grow the unsliced search's tree, node for node,
    and the guard run once per tree."""
    import dlzero.search.mcts as mcts
    from dlzero.analysis import AnalysisEngine

    guarded: list[Tree] = []
    real_guard = mcts.guard_root
    monkeypatch.setattr(mcts, "guard_root", lambda tree, *args: guarded.append(tree) or real_guard(tree, *args))

    def analyse(sliced: bool) -> list[Tree]:
        cfg = _cfg(algorithm=algorithm, mate_guard_nodes=2000, leaves_per_tree=4, pipeline=False)
        engine = AnalysisEngine(_HashedPriors(), cfg, playouts=160)
        tasks = engine.reader.game_tasks("startpos", ["7g7f", "3c3d"], [0, 2], 160)
        # a slice ends after each step (the root checks before the first are not cut)
        cut = (lambda: any(t.tree is not None and t.tree.playouts_done > 0 for t in tasks)) if sliced else None
        pending, slices = tasks, 0
        while pending:
            pending, slices = engine.search(pending, lambda result: None, cut), slices + 1
        assert (slices > 30) == sliced and all(t.searched == 160 for t in tasks)
        return [t.tree for t in tasks]

    whole = analyse(sliced=False)
    assert len(guarded) == 2
    guarded.clear()
    cut = analyse(sliced=True)
    assert len(guarded) == 2

    for a, b in zip(whole, cut, strict=True):
        assert walk_equal(a.root, b.root) == a.nodes == b.nodes > 100


@pytest.mark.parametrize("compiled", [False, True])
def test_batch_softmax_equals_the_one_row_softmax(compiled, monkeypatch):
    import dlzero.search.mcts as mcts
    from dlzero.search.mcts import softmax_priors, softmax_rows_into, split_rows

    def batch_softmax_priors(logits: np.ndarray, labels: list[np.ndarray], temperature: float) -> list[np.ndarray]:
        flat = np.empty(sum(len(x) for x in labels), dtype=np.float32)
        softmax_rows_into(logits, labels, temperature, flat)
        return split_rows(flat, labels)

    if compiled and mcts._compiled_softmax_rows is None:
        pytest.skip("the compiled priors were not built")
    monkeypatch.setattr(mcts, "COMPILED_PRIORS", compiled)
    rng = np.random.default_rng(1)
    logits = rng.normal(0.0, 3.0, (12, NUM_LABELS)).astype(np.float32)
    labels = [rng.choice(NUM_LABELS, size=int(k), replace=False).astype(np.int32)
              for k in [1, 2, 593, *rng.integers(1, 120, size=9)]]  # one forced move, the most moves
    for temperature in (1.0, 1.6):
        batch = batch_softmax_priors(logits, labels, temperature)
        assert len(batch) == len(labels)
        for j, prior in enumerate(batch):
            assert prior.dtype == np.float32 and len(prior) == len(labels[j])
            np.testing.assert_allclose(prior, softmax_priors(logits[j], labels[j], temperature), rtol=1e-6)
        assert batch[0].tolist() == [1.0]
    # a batch shorter than the buffer the network filled (the rows past it are not read)
    assert len(batch_softmax_priors(logits, labels[:3], 1.0)) == 3


def test_compiled_priors_reject_what_they_cannot_read():
    from dlzero.search import mcts

    if mcts._compiled_softmax_rows is None:
        pytest.skip("the compiled priors were not built")
    rows = mcts._compiled_softmax_rows
    logits = np.zeros((2, NUM_LABELS), np.float32)
    out = np.empty(4, np.float32)
    with pytest.raises(IndexError, match="outside the logits"):
        rows(logits, [np.array([0, NUM_LABELS], np.int32)], 1.0, out)
    with pytest.raises(ValueError, match="shorter"):
        rows(logits, [np.arange(5, dtype=np.int32)], 1.0, out)
    with pytest.raises(ValueError, match="no labels"):
        rows(logits, [np.zeros(0, np.int32)], 1.0, out)
    with pytest.raises(ValueError, match="more label rows"):
        rows(logits, [np.zeros(1, np.int32)] * 3, 1.0, out)
    with pytest.raises(TypeError, match="'i'"):
        rows(logits, [np.zeros(1, np.int64)], 1.0, out)
    with pytest.raises(TypeError, match="float32"):
        rows(logits.astype(np.float64), [np.zeros(1, np.int32)], 1.0, out)
