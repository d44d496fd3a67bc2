"""The flat-array search tree (dlzero.search.arena): the compiled walk, backup and compaction (`_puct.c`'s arena_*
functions) against the numpy code they replace, bit for bit, and their argument checks.

Why bit for bit: the search must pick the same moves whether or not the install built the C extension, so every
float the C code writes must be the one numpy writes, not merely a close one."""

from __future__ import annotations

import cshogi
import numpy as np
import pytest

from dlzero.search import arena as arena_mod
from dlzero.search.arena import EDGE_DTYPE, NODE_DTYPE, Arena

compiled_only = pytest.mark.skipif(not arena_mod.COMPILED, reason="the compiled arena functions were not built")

_c = arena_mod._c
PARAMS = (1.0, 19652.0, 0.2)
ROOT_PARAMS = (1.5, 19652.0, 0.0)
SFENS = [
    cshogi.STARTING_SFEN,
    "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1",  # wide nodes: drops everywhere
    "8k/9/7GP/9/9/9/9/9/K8 b G 1",  # a mate in one (G*1b) and quick mates below
]


class _Board:
    """Stands in for cshogi.Board where only `push` is called: records the moves, raises from push number `fail_at`."""

    def __init__(self, fail_at: int = -1) -> None:
        self.moves: list[int] = []
        self.fail_at = fail_at

    def push(self, move: int) -> None:
        if len(self.moves) == self.fail_at:
            raise _PushError(move)
        self.moves.append(move)


class _PushError(Exception):
    pass


def _assert_records_equal(a: np.ndarray, b: np.ndarray) -> None:
    """Field by field, bit for bit (NaN payloads and signed zeros included; padding bytes left out)."""
    assert a.dtype == b.dtype and len(a) == len(b)
    for name in a.dtype.names:
        assert a[name].tobytes() == b[name].tobytes(), name


def _assert_arenas_equal(x: Arena, y: Arena) -> None:
    assert (x.n_nodes, x.n_edges) == (y.n_nodes, y.n_edges)
    _assert_records_equal(x.nodes[:x.n_nodes], y.nodes[:y.n_nodes])
    _assert_records_equal(x.edges[:x.n_edges], y.edges[:y.n_edges])


def _assert_same_tree(x: Arena, i: int, y: Arena, j: int) -> None:
    """The subtrees below x's node `i` and y's node `j` hold the same records (all but the indices `first` and
    `child`) in the same shape."""
    stack = [(i, j)]
    names = [f for f in NODE_DTYPE.names if f != "first"]
    while stack:
        i, j = stack.pop()
        for name in names:
            assert x.nodes[name][i].tobytes() == y.nodes[name][j].tobytes(), name
        assert x.expanded(i) == y.expanded(j)
        assert x.moves(i).tolist() == y.moves(j).tolist()
        assert x.prior(i).tobytes() == y.prior(j).tobytes()
        cx, cy = x.children(i), y.children(j)
        assert ((cx >= 0) == (cy >= 0)).all()
        stack.extend((int(a), int(b)) for a, b in zip(cx, cy, strict=True) if a >= 0)


def _drive(sfen: str, seed: int, virtual_loss: float, root_params: tuple[float, float, float] | None,
           playouts: int) -> tuple[Arena, Arena, int]:
    """A compiled and a numpy arena grown by the same playouts, the search's way, in batches of 1 to 32 descents:
    a leaf is proven (no legal move, or now and then at random) and backed up at once, or queued for the network
    (pending), then expanded with random priors (sometimes tied, sometimes one move dominating) and backed up with
    a random value when its batch ends (now and then dropped instead, or given a child made and proven at once);
    a descent reaching a queued leaf collides and takes its virtual loss back.
    Every descent must return the same leaf, count and path from both arenas, and the arenas must be equal after
    every batch. Returns the arenas and the number of collisions."""
    rng = np.random.default_rng(seed)
    arenas = (Arena(compiled=True), Arena(compiled=False))
    boards = (cshogi.Board(sfen), cshogi.Board(sfen))
    correction = 1.0 - virtual_loss
    compiled, board = arenas[0], boards[0]
    waiting: list[tuple[int, list[int], np.ndarray, np.ndarray, float]] = []
    collisions = 0
    batch_end = 0
    for playout in range(playouts):
        walks = []
        for a, b in zip(arenas, boards, strict=True):
            path: list[int] = []
            leaf, created = a.descend(0, b, path, root_params, PARAMS, virtual_loss)
            walks.append((leaf, created, path, b.sfen()))
        assert walks[0] == walks[1], playout
        leaf, _, path, _ = walks[0]
        value = float(rng.random())
        if rng.random() < 0.2:
            value = round(value * 2) / 2  # equal Q values: ties
        if compiled.pending(leaf):
            collisions += 1
            for a in arenas:
                a.undo_virtual_loss(path, virtual_loss)
        elif compiled.terminal(leaf) is not None:
            for a in arenas:
                a.backup(path, leaf, compiled.terminal(leaf), correction)
        else:
            moves = np.array(list(board.legal_moves), dtype=np.int64)
            if len(moves) == 0 or (leaf != 0 and rng.random() < 0.03):
                # (a random proof a win for the side to move there, or a draw: a loss would draw every later walk)
                result, plies = (0.0, 0) if len(moves) == 0 else (float(rng.choice([0.5, 1.0])), None)
                for a in arenas:
                    a.set_proof(leaf, result, plies)
                    a.backup(path, leaf, result, correction)
            else:
                prior = rng.random(len(moves)).astype(np.float32)
                if rng.random() < 0.2:
                    prior[:] = 1.0  # tied priors: the lowest index must win
                elif rng.random() < 0.3:
                    prior[int(rng.integers(len(prior)))] += len(prior)  # one move dominates: walks collide there
                prior /= prior.sum()
                for a in arenas:
                    a.set_pending(leaf, True)
                waiting.append((leaf, path, moves, prior, value))
        for b in boards:
            for _ in range(len(path) // 2):
                b.pop()
        if playout >= batch_end or playout == playouts - 1:  # the network answers the batch
            for leaf, path, moves, prior, value in waiting:
                dropped = rng.random() < 0.1  # a batch cut short: the leaf stays unexpanded, at in_n 0 again
                proven = int(rng.integers(len(moves))) if rng.random() < 0.1 else -1
                for a in arenas:
                    a.set_pending(leaf, False)
                    if dropped:
                        a.undo_virtual_loss(path, virtual_loss)
                        continue
                    a.set_nn_value(leaf, value)
                    a.expand(leaf, moves, prior)
                    if proven >= 0:  # the mate guard's way: a child made and proven before any walk reaches it
                        a.set_proof(a.make_child(leaf, proven), 1.0, 1)
                    a.backup(path, leaf, value, correction)
            waiting.clear()
            batch_end = playout + int(rng.integers(1, 33))
            _assert_arenas_equal(*arenas)
    return (*arenas, collisions)


def test_the_c_structs_are_the_dtypes_where_the_extension_was_built():
    """arena.py uses the C functions only where the structs' layout is numpy's: where `_puct` was built it must be,
    or the search would quietly walk in numpy."""
    try:
        from dlzero.search import _puct
    except ImportError:
        pytest.skip("dlzero.search._puct was not built here")
    assert _puct.arena_layout() == (72, 12, (0, 8, 16, 24, 32, 40, 48, 56, 60, 62, 64), (0, 4, 8))
    assert (NODE_DTYPE.itemsize, EDGE_DTYPE.itemsize) == (72, 12)
    assert arena_mod.COMPILED and Arena().compiled and not Arena(compiled=False).compiled


@compiled_only
@pytest.mark.parametrize(("sfen", "seed", "virtual_loss", "root_params"), [
    (SFENS[0], 1, 1.0, None),
    (SFENS[0], 1, 3.0, ROOT_PARAMS),
    (SFENS[1], 3, 1.0, ROOT_PARAMS),
    (SFENS[2], 7, 3.0, None),
    (SFENS[2], 6, 1.0, ROOT_PARAMS),
])
def test_compiled_walk_and_backup_grow_numpys_tree_bit_for_bit(sfen, seed, virtual_loss, root_params):
    compiled, fallback, collisions = _drive(sfen, seed, virtual_loss, root_params, playouts=300)
    assert compiled.compiled and not fallback.compiled
    assert compiled.n_nodes > 50 and collisions > 0
    if sfen == SFENS[2]:
        assert (compiled.nodes["mate_plies"][:compiled.n_nodes] == 0).any()  # mated leaves were reached


def _small_tree() -> Arena:
    """Root 0 with two moves; both children expanded alike: below each, move 0 tried once and won (Q 1), move 1
    untried, the node visited once with a win. Move 0 has the higher prior. With FPU reduction 1 move 0 scores
    best (FPU 1 - sqrt(0.6) < 1), with no reduction move 1 does (FPU 1 and a smaller divisor)."""
    a = Arena(compiled=True)
    moves, prior = np.array([11, 12], dtype=np.int64), np.array([0.6, 0.4], dtype=np.float32)

    def set_up(i: int) -> None:
        a.expand(i, moves, prior)
        c = a.make_child(i, 0)
        a.nodes["in_n"][c], a.nodes["in_w"][c] = 1.0, 1.0
        a.nodes["visits"][i], a.nodes["value_sum"][i], a.nodes["visited_prior"][i] = 1.0, 1.0, 0.6

    set_up(0)
    for slot in (0, 1):
        child = a.make_child(0, slot)
        set_up(child)
    return a


@compiled_only
@pytest.mark.parametrize("compiled", [True, False])
def test_root_params_steer_the_first_level_only(compiled):
    reduced, unreduced = (1.0, 19652.0, 1.0), (1.0, 19652.0, 0.0)
    walks = {}
    for root_params in (None, reduced, unreduced):
        a = _small_tree()
        a.compiled = compiled
        board, path = _Board(), []
        leaf, created = a.descend(0, board, path, root_params, reduced, 1.0)
        walks[root_params] = (path, board.moves, created, leaf == a.child(path[-2], path[-1]))
    c0, c1 = _small_tree().child(0, 0), _small_tree().child(0, 1)
    assert walks[None] == walks[reduced] == ([0, 0, c0, 0], [11, 11], 0, True)
    assert walks[unreduced] == ([0, 1, c1, 0], [12, 11], 0, True)


@compiled_only
def test_a_walk_stops_at_proven_and_unexpanded_nodes_and_creates_one_node():
    a = _small_tree()
    n = a.n_nodes
    a.set_proof(a.child(0, 0), 1.0, 3)
    path: list[int] = []
    assert a.descend(0, _Board(), path, None, (1.0, 19652.0, 1.0), 1.0) == (a.child(0, 0), 0)
    assert path == [0, 0] and a.n_nodes == n
    fresh = Arena(compiled=True)
    assert fresh.descend(0, _Board(), [], None, PARAMS, 1.0) == (0, 0)  # the root itself is unexpanded
    fresh.expand(0, np.array([5, 6, 7], dtype=np.int64), np.array([0.2, 0.5, 0.3], dtype=np.float32))
    board, path = _Board(), []
    assert fresh.descend(0, board, path, None, PARAMS, 2.0) == (1, 1)
    assert (path, board.moves, fresh.n_nodes) == ([0, 1], [6], 2)
    assert fresh.nodes["in_n"][1] == 2.0 and fresh.visits(0) == 2.0 and fresh.visited_prior(0) == np.float32(0.5)
    assert fresh.terminal(1) is None and fresh.nn_value(1) is None and not fresh.expanded(1)


@compiled_only
def test_compact_matches_numpy_and_keeps_the_subtree():
    compiled, fallback, _ = _drive(SFENS[0], 9, 1.0, ROOT_PARAMS, playouts=400)
    rng = np.random.default_rng(9)
    roots = [0, *[int(c) for c in compiled.children(0) if c >= 0][:3],
             *[int(i) for i in rng.integers(0, compiled.n_nodes, size=8)]]
    for root in roots:
        assert compiled.subtree_size(root) == fallback.subtree_size(root)
        nodes = len(fallback.subtree(root))
        edges = int(sum(fallback.count(int(i)) for i in fallback.subtree(root) if fallback.expanded(int(i))))
        assert _c.arena_subtree_size(compiled.nodes, compiled.edges, root) == (nodes, edges)
        x, y = compiled.compact(root), fallback.compact(root)
        assert x.compiled and not y.compiled
        _assert_arenas_equal(x, y)
        _assert_same_tree(x, 0, compiled, root)
        for name in NODE_DTYPE.names:
            if name != "first":
                assert x.nodes[name][0].tobytes() == compiled.nodes[name][root].tobytes()
        again = x.compact(0)  # breadth-first order is its own compaction
        _assert_arenas_equal(again, x)
    assert compiled.compact(0).n_nodes == compiled.n_nodes  # nothing is unreachable from the root


@compiled_only
def test_compact_of_a_leaf_and_of_nodes_expanded_with_no_edges():
    a = Arena(compiled=True)
    one = a.compact(0)
    assert (one.n_nodes, one.n_edges) == (1, 0) and len(one.edges) > 0  # room for the next expansion
    _assert_records_equal(one.nodes[:1], Arena(compiled=False).compact(0).nodes[:1])
    arenas = (_small_tree(), _small_tree())
    arenas[1].compiled = False
    for x in arenas:  # expanded with no moves: `first` set, no edges (the fallback keeps `first` at its block start)
        x.expand(x.child(x.child(0, 0), 0), np.empty(0, np.int64), np.empty(0, np.float32))
        x.expand(x.child(x.child(0, 1), 0), np.empty(0, np.int64), np.empty(0, np.float32))
    assert arenas[0].subtree_size(0) == arenas[1].subtree_size(0) == (5, 5 * 72 + 6 * 12)
    for root in range(arenas[0].n_nodes):
        _assert_arenas_equal(arenas[0].compact(root), arenas[1].compact(root))


@compiled_only
def test_bad_arguments_raise():
    a = _small_tree()
    nodes, edges = a.nodes, a.edges
    before = (nodes.copy(), edges.copy())
    with pytest.raises(TypeError, match="nodes"):
        _c.arena_descend(list(nodes), edges, a.n_nodes, 0, _Board(), [], None, PARAMS, 1.0)
    with pytest.raises(TypeError, match="edges"):
        _c.arena_descend(nodes, np.zeros(10), a.n_nodes, 0, _Board(), [], None, PARAMS, 1.0)
    read_only = nodes.copy()
    read_only.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        _c.arena_backup(read_only, edges, [], 0, 0.5, 0.0)
    with pytest.raises(TypeError, match="path"):
        _c.arena_descend(nodes, edges, a.n_nodes, 0, _Board(), (), None, PARAMS, 1.0)
    with pytest.raises(TypeError, match="params"):
        _c.arena_descend(nodes, edges, a.n_nodes, 0, _Board(), [], None, [1.0, 2.0, 3.0], 1.0)
    with pytest.raises(TypeError, match="node"):
        _c.arena_descend(nodes, edges, a.n_nodes, "0", _Board(), [], None, PARAMS, 1.0)
    for node in (-1, a.n_nodes):
        with pytest.raises(IndexError, match="outside"):
            _c.arena_descend(nodes, edges, a.n_nodes, node, _Board(), [], None, PARAMS, 1.0)
    with pytest.raises(ValueError, match="room"):
        _c.arena_descend(nodes, edges, len(nodes), 0, _Board(), [], None, PARAMS, 1.0)
    with pytest.raises(TypeError, match="9 arguments"):
        _c.arena_descend(nodes, edges, a.n_nodes, 0)
    for path, error in (([0], ValueError), ([0, 2], IndexError), ([0, -1], IndexError),
                        ([a.n_nodes + 99, 0], IndexError), ([a.child(0, 0), 1], IndexError),
                        ([a.child(a.child(0, 0), 0), 0], ValueError), ([0, "x"], TypeError), ((0, 0), TypeError)):
        with pytest.raises(error):
            _c.arena_backup(nodes, edges, path, a.child(0, 0), 0.5, 0.0)
    with pytest.raises(IndexError, match="leaf"):
        _c.arena_backup(nodes, edges, [0, 0], len(nodes), 0.5, 0.0)
    with pytest.raises(IndexError, match="root"):
        _c.arena_subtree_size(nodes, edges, len(nodes))
    with pytest.raises(ValueError, match="exactly|hold"):
        _c.arena_compact(nodes, edges, 0, np.empty(2, NODE_DTYPE), np.empty(2, EDGE_DTYPE))
    with pytest.raises(ValueError, match="own"):
        _c.arena_compact(nodes, edges, 0, nodes, edges)
    _assert_records_equal(nodes, before[0])  # a refused call wrote nothing
    _assert_records_equal(edges, before[1])

    broken = _small_tree()
    broken.edges["child"][1] = broken.n_nodes + 5  # an edge past the nodes in use
    with pytest.raises(IndexError, match="outside"):
        broken.descend(0, _Board(), [], None, (1.0, 19652.0, 0.0), 1.0)
    cycle = _small_tree()
    cycle.edges["child"][cycle.nodes["first"][cycle.child(0, 0)]] = 0  # a grandchild that is the root
    with pytest.raises(ValueError, match="cycle"):
        _c.arena_subtree_size(cycle.nodes, cycle.edges, 0)
    empty = _small_tree()
    empty.nodes["count"][0] = 0  # expanded with no edges
    with pytest.raises(ValueError, match="no edges"):
        empty.descend(0, _Board(), [], None, PARAMS, 1.0)
    past = _small_tree()
    past.nodes["first"][0] = len(past.edges) - 1  # a block running past the edge array
    with pytest.raises(IndexError, match="edges"):
        past.descend(0, _Board(), [], None, PARAMS, 1.0)


@compiled_only
@pytest.mark.parametrize("fail_at", [0, 1])
def test_a_refused_push_leaves_the_path_as_it_was_before_that_level(fail_at):
    a = _small_tree()
    n = a.n_nodes
    path = [7, 7]  # what a caller had there already stays
    board = _Board(fail_at=fail_at)
    with pytest.raises(_PushError):
        a.descend(0, board, path, None, (1.0, 19652.0, 1.0), 1.0)
    assert path == [7, 7] + [0, 0][:2 * fail_at]
    assert len(board.moves) == fail_at
    assert a.n_nodes == n

    fresh = Arena(compiled=True)  # a level that created its node: the node is unlinked again, not left dangling
    fresh.expand(0, np.array([5, 6], dtype=np.int64), np.array([0.5, 0.5], dtype=np.float32))
    path = []
    with pytest.raises(_PushError):
        fresh.descend(0, _Board(fail_at=0), path, None, PARAMS, 1.0)
    assert path == [] and fresh.n_nodes == 1 and (fresh.children(0) == -1).all()


@compiled_only
def test_compiled_expand_writes_what_numpy_writes_and_checks_first():
    """`arena_expand` (the search's expansion of every new leaf) against the numpy field writes it replaced:
    the same records for contiguous and strided moves and priors, growth past the first block, an empty
    expansion; bad arguments raise before anything is written."""
    rng = np.random.default_rng(3)
    x, y = Arena(compiled=True), Arena(compiled=False)
    for k in (3, 0, 593, 40, 300):
        moves = rng.integers(1, 1 << 24, size=2 * k, dtype=np.int64)
        prior = rng.random(2 * k, dtype=np.float32)
        for a in (x, y):
            node = a.new_node()
            a.expand(node, moves[:k], prior[:k])
            a.expand(a.new_node(), moves[::2], prior[::2])  # strided views, as a filtered node's could be
    _assert_arenas_equal(x, y)
    nodes, edges = x.nodes, x.edges
    before = (nodes.copy(), edges.copy())
    moves, prior = np.arange(5, dtype=np.int64), np.full(5, 0.2, dtype=np.float32)
    for args, error, words in (((x.n_edges, 0, moves, prior.astype(np.float64)), TypeError, "float32"),
                               ((x.n_edges, 0, moves.astype(np.int32), prior), TypeError, "int64"),
                               ((x.n_edges, 0, moves, prior[:4]), ValueError, "5 moves but 4 priors"),
                               ((len(edges) - 4, 0, moves, prior), ValueError, "do not fit"),
                               ((-1, 0, moves, prior), ValueError, "do not fit"),
                               ((x.n_edges, x.n_nodes + len(nodes), moves, prior), IndexError, "outside")):
        with pytest.raises(error, match=words):
            _c.arena_expand(nodes, edges, *args)
    _assert_records_equal(nodes, before[0])
    _assert_records_equal(edges, before[1])
    # a float64 prior (not the search's) takes the numpy path, with the same result
    z, w = Arena(compiled=True), Arena(compiled=False)
    for a in (z, w):
        a.expand(0, moves, prior.astype(np.float64))
    _assert_arenas_equal(z, w)


@compiled_only
def test_compiled_settle_writes_what_its_four_steps_write_and_checks_first():
    """`arena_settle` (every new leaf's network result in one call) against set_pending(False), set_nn_value,
    expand and backup on the numpy path: the same records after settling a leaf two levels down and one at the
    root's child; a bad path, node or room raises before anything is written (a half-settled leaf would be
    expanded with no visit, or visited with no moves)."""
    arenas = (_small_tree(), _small_tree())
    arenas[1].compiled = False
    moves, prior = np.array([21, 22, 23], dtype=np.int64), np.array([0.5, 0.3, 0.2], dtype=np.float32)
    for a in arenas:
        for level_one in (0, 1):
            child = a.child(0, level_one)
            leaf = a.make_child(child, 1)
            a.set_pending(leaf, True)
            a.settle(leaf, moves, prior, 0.25 + 0.5 * level_one, [0, level_one, child, 1], 0.0)
    _assert_arenas_equal(*arenas)
    a = arenas[0]
    leaf = a.make_child(a.child(0, 0), 0)
    nodes, edges = a.nodes, a.edges
    before = (nodes.copy(), edges.copy())
    for args, error, words in (((a.n_edges, leaf, moves, prior, 0.5, [0, 0, a.child(0, 0), 7], 0.0), IndexError,
                                "slot 7"),
                               ((a.n_edges, leaf, moves, prior, 0.5, [0, 0, 1], 0.0), ValueError, "pairs"),
                               ((a.n_edges, leaf, moves, prior[:2], 0.5, [0, 0], 0.0), ValueError, "priors"),
                               ((len(edges) - 1, leaf, moves, prior, 0.5, [0, 0], 0.0), ValueError, "do not fit"),
                               ((a.n_edges, len(nodes), moves, prior, 0.5, [0, 0], 0.0), IndexError, "outside")):
        with pytest.raises(error, match=words):
            _c.arena_settle(nodes, edges, *args)
    _assert_records_equal(nodes, before[0])
    _assert_records_equal(edges, before[1])
