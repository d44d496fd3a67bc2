"""The evaluation cache is keyed on everything the network sees (issue 10, defect 6).

The same board reached by two move orders has other last-move planes (and may differ in the
repetition and progress planes): it must be evaluated again, not served the other input's output.
"""

from __future__ import annotations

import random

import cshogi
import numpy as np

from dlzero.config import SearchConfig
from dlzero.encoding import NUM_LABELS, encode_position
from dlzero.inference.base import Evaluator
from dlzero.position import parse_position
from dlzero.search import Search, Tree


class Recording(Evaluator):
    """Uniform policy, value 0; remembers every input it was given."""

    backend = "fake"

    def __init__(self) -> None:
        super().__init__(1 << 10)
        self.seen: list[np.ndarray] = []

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.seen.extend(p.copy() for p in planes)
        return np.zeros((len(planes), NUM_LABELS), np.float32), np.zeros(len(planes), np.float32)


def _root_eval(search: Search, position: str) -> None:
    search.run([Tree(parse_position(position))], 1, leaves_per_tree=1)


def test_two_move_orders_to_one_board_are_evaluated_separately():
    a, b = "startpos moves 7g7f 3c3d 2g2f", "startpos moves 2g2f 3c3d 7g7f"
    assert parse_position(a).zobrist_hash() == parse_position(b).zobrist_hash()
    ev = Recording()
    search = Search(ev, SearchConfig(nn_cache_size=1000, root_mate_depth=0))
    _root_eval(search, a)
    _root_eval(search, b)
    assert len(ev.seen) == 2 and len(search.cache) == 2
    assert np.array_equal(ev.seen[0], encode_position(parse_position(a)))
    assert np.array_equal(ev.seen[1], encode_position(parse_position(b)))
    _root_eval(search, a)  # the very same input again: served from the cache
    assert len(ev.seen) == 2


def test_a_repeated_board_is_not_served_the_first_occurrences_output():
    first, again = "startpos moves 5i5h 5a5b", "startpos moves 5i5h 5a5b 5h5i 5b5a 5i5h 5a5b"
    ev = Recording()
    search = Search(ev, SearchConfig(nn_cache_size=1000, root_mate_depth=0))
    _root_eval(search, first)
    _root_eval(search, again)  # same board, same last move, but it occurred before (plane 77)
    assert len(ev.seen) == 2 and ev.seen[1][77].all() and not ev.seen[0][77].any()


def test_equal_keys_mean_equal_planes_over_random_games():
    from dlzero.encoding import input_key

    rng = random.Random(5)
    by_key: dict[tuple, np.ndarray] = {}
    by_planes: dict[bytes, tuple] = {}
    for _ in range(30):
        board = cshogi.Board()
        for _ in range(60):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            planes = encode_position(board)
            key = input_key(board)
            if key in by_key:
                assert np.array_equal(by_key[key], planes)
            by_key[key] = planes
            assert by_planes.setdefault(planes.tobytes(), key) == key
    assert len(by_key) > 1000


def test_the_cache_counts_the_bytes_it_holds():
    """Issue 40: `search.hash_mb` bounds the tree and the evaluation cache together, so the cache's count must be
    what its entries hold: tracemalloc sees at most that (the count adds the allocators' rounding), and not far
    below; replacing and dropping entries keeps it."""
    import tracemalloc

    from dlzero.encoding import input_key
    from dlzero.search.evalcache import EvalCache, entry_bytes

    rng = random.Random(3)
    boards = []
    for _ in range(40):
        board = cshogi.Board()
        for _ in range(60):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            boards.append(board.copy())
    cache = EvalCache()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        flat = np.zeros(sum(len(list(b.legal_moves)) for b in boards), np.float32)  # a batch's priors, as the search's
        start = 0
        for board in boards:
            k = len(list(board.legal_moves))
            cache.put(input_key(board), flat[start:start + k], (start % 7) / 7, capacity=10**6)
            start += k
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(cache) > 1000
    assert 0.75 < used / cache.memory < 1.0  # small objects: the rounding is a fifth of what they ask for
    first = input_key(boards[0])
    cache.put(first, np.zeros(3, np.float32), 0.5, capacity=10**6)  # replaced in place: its bytes are the new prior's
    cache.put(input_key(cshogi.Board()), np.zeros(5, np.float32), 0.5, capacity=100)  # drops all but 100
    assert len(cache) == 100 and cache.get(first) is None
    assert cache.memory == sum(entry_bytes(prior) for prior, _ in cache._entries.values())
    cache.clear()
    assert len(cache) == 0 and cache.memory == 0


def test_the_cache_gives_way_to_the_tree_under_the_memory_budget():
    """`search.hash_mb` bounds the tree and the cache together, and when the two reach it the cache's oldest entries
    go first: an entry saves one network call, a node holds visits nothing gives back. So the tree still fills the
    budget, as large as a search without the cache grows it, and the cache ends (nearly) empty."""
    budget = 1 << 20
    trees = {}
    for size in (10**6, 0):
        cfg = SearchConfig(nn_cache_size=size, root_mate_depth=0, leaf_mate_depth=0, hash_mb=1)
        search = Search(Recording(), cfg)
        tree = Tree(parse_position("startpos"))
        search.run([tree], 10**5, leaves_per_tree=8)
        assert search.tree_full(tree) and tree.nodes < cfg.node_limit
        trees[size] = (tree, search)
    tree, search = trees[10**6]
    assert tree.memory >= budget - budget // 16  # the budget went to the tree
    assert tree.memory + search.cache.memory >= budget and search.cache.memory < budget // 16
    assert abs(tree.nodes - trees[0][0].nodes) <= 0.05 * trees[0][0].nodes


def test_the_cache_keeps_its_entries_below_the_budget():
    """Far from the budget nothing is evicted: every evaluated input stays in the cache."""
    cfg = SearchConfig(nn_cache_size=10**6, root_mate_depth=0, leaf_mate_depth=0, hash_mb=64)
    search = Search(Recording(), cfg)
    tree = Tree(parse_position("startpos"))
    search.run([tree], 2000, leaves_per_tree=8)
    assert not search.tree_full(tree)
    assert len(search.cache) == search.stats.evaluations


def test_entry_bytes_is_the_sum_of_its_parts():
    """`entry_bytes` folds the fixed parts of an entry into one constant (it runs for every new leaf): the same
    count as the entry's parts summed one by one, for priors of every length a position can have."""
    from dlzero.search.evalcache import ENTRY_BYTES, array_bytes, entry_bytes

    for n in range(0, 600):
        prior = np.zeros(n, dtype=np.float32)
        assert entry_bytes(prior) == ENTRY_BYTES + array_bytes(prior.nbytes), n
