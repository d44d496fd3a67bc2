"""Batched PUCT search over many trees at once.

Each step collects leaves from every active tree (several per tree, kept apart by virtual loss),
encodes them into one preallocated buffer, makes **one** Evaluator call for all of them, then
expands and backs up. A single tree with `leaves_per_tree = 64` and 64 games with one leaf each
both give the network batches of 64; self-play uses the second, the USI engine the first.

Selection is dlshogi's PUCT, a pure function over a node's arrays in `dlzero.search.select`;
with `search.algorithm: gumbel` the root instead follows Gumbel AlphaZero's Sequential Halving
(`dlzero.search.gumbel`, one `GumbelRoot` per tree and search) and PUCT runs below it.
Values are win rates in [0, 1]; the network's tanh value v maps to (v + 1) / 2. The trees are
`dlzero.search.tree.Tree`s; after their playouts the mate guard (`search.mate_guard_nodes`,
`dlzero.search.guard`) may prove root moves lost before one is played.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import cshogi
import numpy as np

from dlzero.config import SearchConfig
from dlzero.encoding import Encoder, input_key, legal_moves_and_labels, new_batch_buffer, repetition_count
from dlzero.inference.base import Evaluator
from dlzero.search.evalcache import EvalCache
from dlzero.search.guard import guard_root
from dlzero.search.gumbel import GumbelParams, GumbelRoot
from dlzero.search.heap import HeapTrimmer, trim_slack
from dlzero.search.mate import MateSolver
from dlzero.search.rules import leaf_proof
from dlzero.search.tree import Tree

try:  # the priors compiled (dlzero/search/_puct.c); absent where the install found no C compiler
    from dlzero.search._puct import softmax_rows as _compiled_softmax_rows
except ImportError:
    _compiled_softmax_rows = None

# While a pipelined search runs, the interpreter hands the GIL over every 50 us instead of every 5 ms.
# The tree holds the GIL almost all the time; the helper thread needs it for a few short stretches per
# network call (waking up, the call's Python wrapper, its outputs) and waited up to 5 ms each time,
# so a one-thread int8 network next to a busy Python thread ran at half speed (5.6k -> 2.6k positions/s;
# 5.8k at 50 us). One pipelined tree gained 8-12 % with int8 and 2-10 % with fp32 (medians of 4
# interleaved rounds, batch 32).
PIPELINE_SWITCH_INTERVAL = 50e-6
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


@contextlib.contextmanager
def quick_gil_handoff() -> Iterator[None]:
    """`sys.setswitchinterval(PIPELINE_SWITCH_INTERVAL)` while any pipelined search runs in this process,
    the interpreter's own interval again when the last one ends."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, PIPELINE_SWITCH_INTERVAL))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


@dataclass(slots=True)
class _Leaf:
    """A leaf queued for the network: where it hangs, and what its expansion needs."""

    tree: Tree
    path: list[int]  # [node, slot, node, slot, ...] (dlzero.search.arena)
    node: int
    moves: np.ndarray
    labels: np.ndarray
    key: tuple | None  # the evaluation cache's key (None: not cached: cache off, or moves filtered)


class _Done:
    """An already computed result with the `Future.result()` interface."""

    def __init__(self, value: tuple[np.ndarray, np.ndarray]) -> None:
        self.value = value

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        return self.value


@dataclass
class SearchStats:
    """Counters for benchmarks and `info` lines."""

    playouts: int = 0
    evaluations: int = 0
    batches: int = 0
    eval_seconds: float = 0.0
    total_seconds: float = 0.0
    guarded: int = 0  # root moves the mate guard proved lost (`search.mate_guard_nodes`)


# A batch's priors in one C pass (`_puct.softmax_rows`) rather than numpy's calls; a switch of its own, since
# its float64 exp may differ from numpy's in the last bit (tests compare the two within float32 rounding).
COMPILED_PRIORS = _compiled_softmax_rows is not None


def split_leaves(total: int, n_trees: int) -> int:
    """Leaves per tree when a total leaf budget per network call is shared by `n_trees` trees (>= 1)."""
    return max(1, total // max(1, n_trees))


def softmax_priors(logits: np.ndarray, labels: np.ndarray, temperature: float) -> np.ndarray:
    """Priors of the legal moves: softmax of their policy logits divided by the temperature."""
    x = logits[labels].astype(np.float64) / temperature
    x -= x.max()
    np.exp(x, out=x)
    x /= x.sum()
    return x.astype(np.float32)


def softmax_rows_into(logits: np.ndarray, labels: Sequence[np.ndarray], temperature: float, out: np.ndarray) -> None:
    """`softmax_priors` of row j of `logits` at `labels[j]` for every j, written one after the other into `out`
    (float32, as long as all of `labels` together; `split_rows` cuts it), in a fixed number of numpy calls (a
    batch's leaves at once; each list must be non-empty), or in one C pass where it is built. Equal to the
    one-row function up to the summation order of the normaliser (float64, then rounded to float32 as there)."""
    if COMPILED_PRIORS:
        _compiled_softmax_rows(np.ascontiguousarray(logits, dtype=np.float32), list(labels), float(temperature), out)
        return
    lens = np.fromiter((len(x) for x in labels), dtype=np.int64, count=len(labels))
    starts = np.zeros(len(labels), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    x = logits[np.repeat(np.arange(len(labels)), lens), np.concatenate(labels)].astype(np.float64)
    x /= temperature
    x -= np.repeat(np.maximum.reduceat(x, starts), lens)
    np.exp(x, out=x)
    x /= np.repeat(np.add.reduceat(x, starts), lens)
    out[:] = x


def split_rows(flat: np.ndarray, labels: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`flat` cut into views as long as each of `labels`, in order."""
    bounds = [0, *itertools.accumulate(map(len, labels))]
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class Search:
    """PUCT search driver: owns the encoder, the batch buffer and the evaluation cache."""

    def __init__(self, evaluator: Evaluator, cfg: SearchConfig, rng: np.random.Generator | None = None) -> None:
        self.evaluator = evaluator
        self.cfg = cfg
        self.rng = rng or np.random.default_rng()
        self.encoder = Encoder()
        self.buffers = [new_batch_buffer(max(cfg.leaves_per_tree, 1)) for _ in range(2)]  # two for pipelining
        self.stats = SearchStats()
        # keyed on everything the network sees (`input_key`), not the position alone
        self.cache = EvalCache()
        self.heap = HeapTrimmer()  # keeps the process's resident memory near what the trees and cache hold
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0

    @property
    def cfg(self) -> SearchConfig:
        return self._cfg

    @cfg.setter
    def cfg(self, cfg: SearchConfig) -> None:
        """Setting the config also fixes the PUCT constants the walk passes to the rule (`Arena.descend`)."""
        self._cfg = cfg
        self._puct_args = (cfg.c_init, cfg.c_base, cfg.fpu_reduction)  # (c_init, c_base, fpu_reduction): `Arena`'s
        self._puct_root_args = (cfg.c_init_root, cfg.c_base_root, cfg.fpu_reduction_root)
        self._gumbel = GumbelParams(cfg.gumbel_c_visit, cfg.gumbel_c_scale) if cfg.algorithm == "gumbel" else None

    # -- public ---------------------------------------------------------------------------------
    def run(self, trees: Sequence[Tree], playouts: int | Sequence[int], leaves_per_tree: int | None = None,
            should_stop: Callable[[], bool] | None = None, on_step: Callable[[], None] | None = None,
            resume: bool = False, guard: bool = True, guard_solver: MateSolver | None = None,
            guard_stop: Callable[[], bool] | None = None) -> None:
        """Search every tree until it has done its playouts (or `should_stop()` says so).

        `leaves_per_tree` (how many leaves each tree adds to one network call) defaults to the
        config's `leaves_per_tree`; it is never divided among the trees (see `split_leaves`).
        With `pipeline` on, the network evaluates batches in helper threads while this thread
        collects the next, so tree work hides behind inference (leaves of a batch in flight count
        as collisions until it returns). `eval_streams` batches may be in flight at once: on a
        CPU, several single-threaded network calls side by side use the cores better than one
        call split over them.

        A search cut into slices (the analysis engine's) calls `run` once a slice: with `resume` the
        trees go on with the search they began (`playouts`: those left), so each keeps its Gumbel
        root instead of restarting Sequential Halving on what is left; with `guard` off the mate
        guard waits for the last slice (`guard_roots`), as it would run once on an unsliced search.
        `guard_solver` and `guard_stop` are `guard_roots`' `solver` and `stop`: not `should_stop`, which
        turns true when the clock ends the search, right before the guard is wanted.
        """
        wanted = [playouts] * len(trees) if isinstance(playouts, int) else list(playouts)
        for tree, n in zip(trees, wanted, strict=True):
            tree.playouts_done, tree.playouts_wanted, tree.collisions, tree.inflight = 0, n, 0, 0
            if not resume:
                tree.gumbel = None
            self.start_gumbel(tree)  # a reused root is already expanded; a new one starts in `_expand`
        per_tree = leaves_per_tree or self.cfg.leaves_per_tree
        capacity = len(trees) * per_tree
        # a handoff per batch costs ~0.1 ms: worth it only when batches carry several leaves
        pipelined = self.cfg.pipeline and self.evaluator.backend != "null" and capacity >= 4
        # 0 (laid out by the engine, `dlzero.engine.layout`) means one stream for the searches it does not lay out
        streams = (self.cfg.eval_streams or 1) if pipelined else 0
        # a buffer per batch in flight and one being filled: batches go out and come back in order,
        # so the next buffer round the ring is always the free one
        if len(self.buffers) < streams + 1 or self.buffers[0].shape[0] < capacity:
            size = max(capacity, self.buffers[0].shape[0])
            self.buffers = [new_batch_buffer(size) for _ in range(max(streams + 1, 2))]
        buffers = self.buffers
        self.heap.begin(self._tracked_bytes(trees), trim_slack(self.cfg.hash_mb << 20))
        start = time.perf_counter()
        with quick_gil_handoff() if streams else contextlib.nullcontext():
            self._loop(trees, per_tree, streams, buffers, should_stop, on_step)
        if guard:
            self.guard_roots(trees, guard_solver, guard_stop)
        self.stats.total_seconds += time.perf_counter() - start

    def guard_roots(self, trees: Sequence[Tree], solver: MateSolver | None = None,
                    stop: Callable[[], bool] | None = None) -> None:
        """The mate guard (`search.mate_guard_nodes`; off at 0) on each tree's searched root: its df-pn
        in `solver`'s helper process when given (an engine that answers while it thinks), which
        `stop()` ends at once (`dlzero.search.guard`)."""
        if self.cfg.mate_guard_nodes:
            for tree in trees:
                self.stats.guarded += guard_root(tree, self.cfg.mate_guard_nodes, solver, stop)

    def _loop(self, trees: Sequence[Tree], per_tree: int, streams: int, buffers: list[np.ndarray],
              should_stop: Callable[[], bool] | None, on_step: Callable[[], None] | None) -> None:
        """Collect, evaluate (in helper threads when `streams`), expand and back up until every tree is done."""
        active = [t for t in trees if not t.done]
        in_flight: deque[tuple[Future, list[_Leaf], float]] = deque()
        slot = 0
        while active or in_flight:
            leaves = self._collect(active, per_tree, buffers[slot]) if active else []
            # a full queue (or nothing new to send) waits for its oldest batch; any others already back
            # are applied too, before the next leaves are chosen
            back = []
            if in_flight and (len(in_flight) >= streams or not leaves):
                in_flight[0][0].result()
                back.append(in_flight.popleft())
            while in_flight and in_flight[0][0].done():
                back.append(in_flight.popleft())
            if leaves:
                batch = buffers[slot][: len(leaves)]
                labels = [leaf.labels for leaf in leaves]
                # the outputs' arrays are made here, in the search's thread (see `_evaluate`)
                outputs = (np.empty(sum(map(len, labels)), dtype=np.float32),
                           np.empty(len(leaves), dtype=np.float32))
                t0 = time.perf_counter()
                if streams:
                    in_flight.append((self._executor(streams).submit(self._evaluate, batch, labels, *outputs),
                                      leaves, t0))
                    slot = (slot + 1) % (streams + 1)
                else:
                    self._finish(_Done(self._evaluate(batch, labels, *outputs)), leaves, t0)
            # The new batch is already out (its leaves never depend on the batches that came back), so the
            # network works while the returned ones are expanded and backed up: with one stream it used to
            # stand idle for that whole stretch (about a fifth of the tree's time in a null-network profile).
            for returned in back:
                self._finish(*returned)
            if self.heap.due():
                self.heap.check(self._tracked_bytes(trees))
            if on_step:
                on_step()
            if should_stop and should_stop():
                active = []
                continue
            active = [t for t in active if not t.done and not self.tree_full(t)]

    def tree_full(self, tree: Tree) -> bool:
        """The tree reached `search.node_limit` nodes, or it and the evaluation cache reached the `search.hash_mb`
        memory budget even after the cache gave way: it may not grow any more (its search stops).

        The cache yields first (its least recently used entries go, a sixteenth of the budget at once, so that
        not every new leaf evicts one): an entry saves one network call, while a node holds visits no call
        gives back. So with the cache on, a search still fills the whole budget with its tree."""
        budget = self.cfg.hash_mb << 20
        if tree.nodes >= self.cfg.node_limit:
            return True
        if budget <= 0 or tree.memory + self.cache.memory < budget:
            return False
        self.cache.shrink(budget - budget // 16 - tree.memory)
        return tree.memory + self.cache.memory >= budget

    def _tracked_bytes(self, trees: Sequence[Tree]) -> int:
        """What the search holds and counts: its trees and the evaluation cache."""
        return sum(tree.memory for tree in trees) + self.cache.memory

    def _executor(self, streams: int) -> ThreadPoolExecutor:
        if self._pool is not None and self._pool_size != streams:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=streams, thread_name_prefix="dlzero-eval")
            self._pool_size = streams
        return self._pool

    # -- one batch ------------------------------------------------------------------------------
    def _collect(self, trees: Sequence[Tree], per_tree: int, buffer: np.ndarray) -> list[_Leaf]:
        """Descend each tree up to `per_tree` times; new leaves are encoded into `buffer`."""
        leaves: list[_Leaf] = []
        self.encoder.begin(buffer)
        for tree in trees:
            want = min(per_tree, tree.playouts_wanted - tree.playouts_done - tree.inflight)
            misses = 0
            while want > 0 and misses <= want:
                outcome = self._descend(tree, leaves)
                if outcome is None:
                    misses += 1
                    tree.collisions += 1
                else:
                    want -= 1
        self.encoder.finish()
        for leaf in leaves:
            leaf.tree.inflight += 1
        return leaves

    def _descend(self, tree: Tree, leaves: list[_Leaf]) -> bool | None:
        """One playout from the root. True: queued or finished; None: collided with a pending leaf."""
        board, arena = tree.board, tree.arena
        path: list[int] = []
        node = self._walk(tree, path)
        terminal = arena.terminal(node)
        if terminal is not None:
            self._backup(tree, path, node, terminal)
        elif arena.pending(node):
            arena.undo_virtual_loss(path, self.cfg.virtual_loss)
            if tree.gumbel is not None and path:
                tree.gumbel.undo(path[1])
            self._unwind(board, path)
            return None
        elif not self._reach_leaf(tree, board, node, path, leaves):
            self._backup(tree, path, node, arena.terminal(node))
        self._unwind(board, path)
        return True

    def _walk(self, tree: Tree, path: list[int]) -> int:
        """From the root down through expanded, unproven nodes by the selection rule (the Gumbel root's step at
        the root, PUCT below: `Arena.descend`, compiled where built), adding virtual loss and pushing the moves
        on the tree's board; returns the first node that is proven or not expanded."""
        arena, node, root_args, vl = tree.arena, tree.root_index, self._puct_root_args, self.cfg.virtual_loss
        if tree.gumbel is not None and arena.terminal(node) is None and arena.expanded(node):
            i = tree.gumbel.select(arena.edge_n(node), arena.edge_w(node))
            node, _ = arena.step(node, i, vl, tree.board, path)
            root_args = None  # the walk goes on below the root: PUCT's own constants from there
        return arena.descend(node, tree.board, path, root_args, self._puct_args, vl)[0]

    def _reach_leaf(self, tree: Tree, board: cshogi.Board, node: int, path: list[int], leaves: list[_Leaf]) -> bool:
        """First visit of a node: settle it by the rules, from the cache, or queue it for the network."""
        arena = tree.arena
        moves, labels = legal_moves_and_labels(board)
        proof = leaf_proof(board, self.cfg, len(moves)) if path else ((0.0, 0) if len(moves) == 0 else None)
        if proof is not None:
            terminal, plies = proof
            arena.set_proof(node, terminal, plies)
            if terminal == 0.0 and len(path) > 2:  # the mover (not the root) has a winning move: it is proven won
                arena.set_proof(path[-2], 1.0, None if plies is None else plies + 1)
            return False
        # A filtered node's priors cover only some moves: it must not share the cache with full nodes.
        keep = tree.move_filter(board, len(path), moves) if tree.move_filter is not None else None
        if keep is not None:
            moves, labels = moves[keep], labels[keep]
        reps = repetition_count(board)
        key = input_key(board, reps) if self.cfg.nn_cache_size and keep is None else None
        cached = self.cache.get(key) if key is not None else None
        if cached is not None:
            prior, value = cached
            arena.set_nn_value(node, value)  # before `_expand`: a Gumbel root needs it
            self._expand(tree, node, moves, prior)
            self._backup(tree, path, node, value)
            return True
        arena.set_pending(node, True)
        self.encoder.add(board, reps)  # row len(leaves) of the batch; finished once per network call
        leaves.append(_Leaf(tree, list(path), node, moves, labels, key))
        return True

    def _evaluate(self, batch: np.ndarray, labels: list[np.ndarray], priors: np.ndarray,
                  values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The network on `batch`: the priors at `labels` (`softmax_rows_into`) written into `priors`, its values
        into `values`; returns the two.

        Pipelined, this runs in a helper thread, and everything the network returns is dropped here, in the
        thread that made it, while the search's thread gets only arrays it made itself. When the search's
        thread freed the network's outputs, glibc put their small blocks (tensor objects, array shapes) in
        that thread's cache, and the tree's next arrays took them: tree blocks scattered in the helper's
        heap split its free space, so each call's megabytes of temporaries needed new pages. A search as the
        USI engine runs it (random 5x64 under torch, two calls in flight) grew the process by 13.6-15.9 KB a
        node where the tree held 2.0 KB; with this, by 2.0-2.3 KB (measured in-process; tests/test_usi_hash.py
        checks the ratio).
        """
        logits, raw = self.evaluator.evaluate(batch)
        softmax_rows_into(logits, labels, self.cfg.softmax_temperature, priors)
        values[:] = raw
        return priors, values

    def _finish(self, result: Future | _Done, leaves: list[_Leaf], t0: float) -> None:
        """Wait for a batch's priors and values (`_evaluate`), then expand its leaves and back up their values."""
        flat, values = result.result()
        self.stats.eval_seconds += time.perf_counter() - t0
        self.stats.evaluations += len(leaves)
        self.stats.batches += 1
        priors = split_rows(flat, [leaf.labels for leaf in leaves])
        correction = 1.0 - self.cfg.virtual_loss
        for j, leaf in enumerate(leaves):
            prior = priors[j]
            value = (float(values[j]) + 1.0) * 0.5
            tree, node = leaf.tree, leaf.node
            tree.inflight -= 1
            if leaf.key is not None:
                self.cache.put(leaf.key, prior, value, self.cfg.nn_cache_size)
            if node != tree.root_index:  # pending off, value, expansion and backup in one call
                tree.arena.settle(node, leaf.moves, prior, value, leaf.path, correction)
                tree.playouts_done += 1
                self.stats.playouts += 1
                continue
            tree.arena.set_pending(node, False)
            tree.arena.set_nn_value(node, value)  # before `_expand`: a Gumbel root needs it
            self._expand(tree, node, leaf.moves, prior)  # the root's noise or Gumbel root begins here
            self._backup(tree, leaf.path, node, value)

    def close(self) -> None:
        """Stop the helper thread (a Search is reusable until closed)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _expand(self, tree: Tree, node: int, moves: np.ndarray, prior: np.ndarray) -> None:
        tree.arena.expand(node, moves, prior)
        if node == tree.root_index:
            self.add_root_noise(tree)
            self.start_gumbel(tree, spent=1)

    def start_gumbel(self, tree: Tree, spent: int = 0) -> None:
        """Begin the Gumbel root of this search (gumbel algorithm, expanded root, not yet begun).

        Its budget is the playouts left: a fresh root's own evaluation (`spent`) is one of them,
        so the halving schedule sums exactly to the visits its moves will get.

        The Gumbel sample is the exploration: drawn for trees that ask for noise (self-play's full
        searches), zero otherwise (engine, gate, cheap searches), as mctx's gumbel_scale = 0.
        """
        root = tree.root
        if self._gumbel is None or tree.gumbel is not None or not root.expanded or len(root.moves) == 0:
            return
        cfg = self.cfg
        value = root.nn_value if root.nn_value is not None else root.q()  # v of v_mix
        budget = max(1, tree.playouts_wanted - tree.playouts_done - spent)
        tree.gumbel = GumbelRoot(root.prior, cfg.softmax_temperature, value, budget,
                                 cfg.gumbel_considered, self.rng if tree.noise else None, self._gumbel)

    def add_root_noise(self, tree: Tree) -> None:
        """Mix Dirichlet noise into the root priors once per search (if the tree asks; never with Gumbel,
        whose sample is the exploration)."""
        root = tree.root
        if self._gumbel is not None or not tree.noise or tree.noised or not root.expanded or len(root.moves) < 2:
            return
        noise = self.rng.dirichlet([self.cfg.dirichlet_alpha] * len(root.moves))
        eps = self.cfg.dirichlet_epsilon
        tree.clean_prior = prior = root.prior
        root.prior = ((1.0 - eps) * prior + eps * noise).astype(np.float32)
        tree.noised = True

    # -- backup ---------------------------------------------------------------------------------
    def _backup(self, tree: Tree, path: list[int], leaf: int, value: float) -> None:
        """Add `value` (win rate for the leaf's side to move) up the path, removing virtual loss."""
        tree.arena.backup(path, leaf, value, 1.0 - self.cfg.virtual_loss)
        tree.playouts_done += 1
        self.stats.playouts += 1

    @staticmethod
    def _unwind(board: cshogi.Board, path: list[int]) -> None:
        for _ in range(len(path) // 2):
            board.pop()
