"""Search throughput: simulations/s for a null evaluator and real backends, one tree and many.

For a real evaluator each row also gives `inference_only_per_s`, the pure Evaluator rate at the
same batch measured in the same run, so `search_vs_inference` = sims/s / inference-only rate is
the share of the network's speed the search keeps (the rest is Python and cshogi work). The network
is timed for a second just before and just after every search, and the search is divided by the mean
of the two: on a shared machine whose speed drifts by a third from one minute to the next, a rate
measured once per run made that share swing from 0.8 to 1.0 between identical runs. `rounds` repeats
each measurement and reports medians.
`algorithms` measures each root search (puct, gumbel) on the same evaluator in the same run, and
`layouts` each way of spending the cores on the network: inference threads per call x calls in
flight (`search.eval_streams`), e.g. 2x1 (one call using two threads) against 1x2 (two one-thread
calls side by side while the tree thread collects the next batch).
Every row also gives the search's memory a node: `tree_bytes_per_node`, the bytes its trees hold as counted
against `search.hash_mb` (`Tree.memory`, dlzero.search.arena) over their nodes, and `rss_bytes_per_node`, the
growth of the process's resident memory over the timed search (after a warm-up at the same batch) over the
nodes it added: the figure the memory budget has to bound.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Iterator

from dlzero.bench.infer import encoded_sample, make_evaluator, sample_boards
from dlzero.bench.timing import rate
from dlzero.config import Config
from dlzero.engine.layout import engine_inference, engine_streams
from dlzero.errors import ConfigError
from dlzero.inference import Evaluator, NullEvaluator
from dlzero.search import Search, Tree, split_leaves
from dlzero.search.heap import rss_bytes, trim_heap


@dataclasses.dataclass
class _Measured:
    """One timed search: its speed and its memory a node."""

    sims_per_s: float
    tree_bytes_per_node: float
    rss_bytes_per_node: float | None  # None where the resident size cannot be read (not Linux)


def _search_rate(ev: Evaluator, cfg: Config, batch: int, trees: int, playouts: int, keep: list[Tree]) -> _Measured:
    """Simulations per second and bytes a node: `trees` trees from mid-game positions, `batch` leaves per network
    call. The searched trees go to `keep`, which the caller holds to the end: freed, their Python objects would
    leave CPython's allocator with resident free space that the next measurement's tree filled without growing
    the process (its RSS growth fell to half its tree's bytes)."""
    boards = sample_boards(trees, seed=1, min_ply=20, max_ply=40)
    per_tree = split_leaves(batch, trees)
    search = Search(ev, dataclasses.replace(cfg.search, leaves_per_tree=per_tree))
    forest = [Tree(b.copy()) for b in boards]
    # free pages left by the rows before go back first, so that the growth is this search's own; the warm-up
    # then brings the network's working set back, which is not the tree's
    trim_heap()
    search.run(forest, 2 * per_tree, leaves_per_tree=per_tree)  # warm-up (session, caches) at the full batch
    forest = [Tree(b.copy()) for b in boards]
    before = rss_bytes()
    start = time.perf_counter()
    search.run(forest, playouts, leaves_per_tree=per_tree)
    elapsed = time.perf_counter() - start
    after = rss_bytes()
    search.close()
    keep.extend(forest)
    nodes = sum(t.nodes for t in forest)
    grown = None if before is None or after is None else (after - before) / max(nodes - len(forest), 1)
    return _Measured(sum(t.playouts_done for t in forest) / elapsed, sum(t.memory for t in forest) / nodes, grown)


def _inference_rate(ev: Evaluator, batch: int, streams: int, seconds: float = 1.0) -> float:
    """Positions per second of pure network calls at `batch`, `streams` threads calling at once."""
    if streams == 1:
        x = encoded_sample(batch)
        return rate(lambda: (ev.evaluate(x), len(x))[1], seconds)
    counts = [0] * streams
    gate = threading.Barrier(streams + 1)
    stop = threading.Event()

    def caller(i: int) -> None:
        x = encoded_sample(batch)
        for _ in range(2):  # warm-up
            ev.evaluate(x)
        gate.wait()
        while not stop.is_set():
            ev.evaluate(x)
            counts[i] += len(x)

    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(streams)]
    for t in threads:
        t.start()
    gate.wait()
    begin = time.perf_counter()
    time.sleep(seconds)
    done = sum(counts)
    elapsed = time.perf_counter() - begin
    stop.set()
    for t in threads:
        t.join()
    return done / elapsed


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """"2x1,1x2" -> [(2, 1), (1, 2)]: inference threads x evaluation streams."""
    out = []
    for item in (x for x in text.split(",") if x):
        try:
            threads, streams = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise ConfigError(f"--layouts: '{item}' is not THREADSxSTREAMS (e.g. 2x1 or 1x2)") from None
        if threads < 0 or streams < 1:
            raise ConfigError(f"--layouts: '{item}': threads >= 0 (0: the backend's default), streams >= 1")
        out.append((threads, streams))
    return out


def _with_layout(cfg: Config, algorithm: str, threads: int, streams: int) -> Config:
    return dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, algorithm=algorithm, eval_streams=streams),
                               inference=dataclasses.replace(cfg.inference, threads=threads))


def _use_threads(ev: Evaluator, threads: int) -> None:
    """torch's CPU thread count is process-wide: set it again for the layout being measured."""
    if ev.backend == "torch" and threads > 0:
        import torch

        torch.set_num_threads(threads)


def bench_search(evaluators: list[str], batches: list[int], model_path: str | None, cfg: Config,
                 playouts: int, many_trees: bool = True, algorithms: list[str] | None = None,
                 layouts: list[tuple[int, int]] | None = None, rounds: int = 1) -> Iterator[dict]:
    """Rows: evaluator, algorithm, batch, trees, layout, sims_per_s (+ inference_only_per_s,
    search_vs_inference, vs_best_inference), tree_bytes_per_node, rss_bytes_per_node, medians over `rounds`;
    each round measures every row once, in alternating order.

    A layout is inference threads x evaluation streams (`search.eval_streams` batches in flight at
    once). `inference_only_per_s` is the pure network rate in the same layout (timed around each
    search); `search_vs_inference` the median over rounds of the search's rate over the mean of the
    network's rates just before and after it; `vs_best_inference` divides by the best pure rate of all
    rows at that batch (any layout): the share of what the machine's cores can evaluate that the search
    keeps.
    """
    if rounds < 1:
        raise ConfigError(f"--rounds must be at least 1, not {rounds}")
    for algorithm in algorithms or []:
        if algorithm not in ("puct", "gumbel"):
            raise ConfigError(f"--algorithms: unknown root search '{algorithm}' (known: puct, gumbel)")
    algorithms = algorithms or [cfg.search.algorithm]
    # default: the engine's own layout (`dlzero.engine.layout`; streams 0 are resolved once the network is loaded)
    layouts = layouts or [(engine_inference(cfg).inference.threads, cfg.search.eval_streams)]
    searched: list[Tree] = []  # every measured tree, kept to the end (see `_search_rate`)
    for name in evaluators:
        mine = [layouts[0]] if name == "null" else layouts
        evs = {lay: NullEvaluator() if name == "null" else make_evaluator(name, model_path,
                                                                            _with_layout(cfg, "puct", *lay))
               for lay in mine}
        evs = {(lay[0], lay[1] or engine_streams(_with_layout(cfg, "puct", *lay), ev)): ev for lay, ev in evs.items()}
        mine = list(evs)
        for batch in batches:
            trees_list = [(1, playouts)]
            if many_trees and batch > 1:
                trees_list.append((batch, max(1, playouts // batch)))
            # rounds outermost, the layouts in alternating order within them: on a machine whose speed drifts
            # from one minute to the next, every layout meets the same minutes
            runs = [(lay, algorithm, trees, per_tree) for lay in mine for algorithm in algorithms
                    for trees, per_tree in trees_list]
            sims: dict[tuple, list[float]] = {run: [] for run in runs}
            memory: dict[tuple, list[_Measured]] = {run: [] for run in runs}
            shares: dict[tuple, list[float]] = {run: [] for run in runs}
            timed: dict[tuple, list[float]] = {run: [] for run in runs}
            for r in range(rounds):
                for run in runs if r % 2 == 0 else runs[::-1]:
                    lay, algorithm, trees, per_tree = run
                    ev = evs[lay]
                    _use_threads(ev, lay[0])
                    before = _inference_rate(ev, batch, lay[1]) if name != "null" else 0.0
                    measured = _search_rate(ev, _with_layout(cfg, algorithm, *lay), batch, trees, per_tree, searched)
                    sims[run].append(measured.sims_per_s)
                    memory[run].append(measured)
                    if name != "null":
                        after = _inference_rate(ev, batch, lay[1])
                        timed[run] += [before, after]
                        shares[run].append(sims[run][-1] / ((before + after) / 2))
            rows = []
            for run in runs:
                lay, algorithm, trees, _ = run
                row = {"evaluator": name, "algorithm": algorithm, "batch": batch, "trees": trees,
                       "layout": f"{lay[0]}x{lay[1]}", "sims_per_s": round(statistics.median(sims[run]), 1)}
                if name != "null":
                    row["inference_only_per_s"] = round(statistics.median(timed[run]), 1)
                    row["search_vs_inference"] = round(statistics.median(shares[run]), 3)
                row["tree_bytes_per_node"] = round(statistics.median(m.tree_bytes_per_node for m in memory[run]))
                grown = [m.rss_bytes_per_node for m in memory[run] if m.rss_bytes_per_node is not None]
                if grown:
                    row["rss_bytes_per_node"] = round(statistics.median(grown))
                rows.append(row)
            best = max((row.get("inference_only_per_s", 0.0) for row in rows), default=0.0)
            for row in rows:
                if best:
                    row["vs_best_inference"] = round(row["sims_per_s"] / best, 3)
                yield row
        for ev in evs.values():
            ev.close()
