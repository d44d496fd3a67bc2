"""Search throughput: simulations/s for a null evaluator and real backends, one tree and many.

For a real evaluator each row also gives `inference_only_per_s`, the pure Evaluator rate at the
same batch measured in the same run, so `search_vs_inference` = sims/s / inference-only rate is
the share of the network's speed the search keeps (the rest is Python and cshogi work).
`algorithms` measures each root search (puct, gumbel) on the same evaluator in the same run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

from dlzero.bench.infer import encoded_sample, make_evaluator, sample_boards
from dlzero.bench.timing import rate
from dlzero.config import Config
from dlzero.errors import ConfigError
from dlzero.inference import Evaluator, NullEvaluator
from dlzero.search import Search, Tree, split_leaves


def _search_rate(ev: Evaluator, cfg: Config, batch: int, trees: int, playouts: int) -> float:
    """Simulations per second: `trees` trees from mid-game positions, `batch` leaves per network call."""
    boards = sample_boards(trees, seed=1, min_ply=20, max_ply=40)
    per_tree = split_leaves(batch, trees)
    search = Search(ev, dataclasses.replace(cfg.search, leaves_per_tree=per_tree))
    forest = [Tree(b.copy()) for b in boards]
    search.run(forest[:1], 2 * per_tree, leaves_per_tree=per_tree)  # warm-up (session, caches)
    forest = [Tree(b.copy()) for b in boards]
    start = time.perf_counter()
    search.run(forest, playouts, leaves_per_tree=per_tree)
    elapsed = time.perf_counter() - start
    return sum(t.playouts for t in forest) / elapsed


def bench_search(evaluators: list[str], batches: list[int], model_path: str | None, cfg: Config,
                 playouts: int, many_trees: bool = True, algorithms: list[str] | None = None) -> Iterator[dict]:
    """Rows: evaluator, algorithm, batch, trees, sims_per_s (+ inference_only_per_s, search_vs_inference)."""
    for algorithm in algorithms or []:
        if algorithm not in ("puct", "gumbel"):
            raise ConfigError(f"--algorithms: unknown root search '{algorithm}' (known: puct, gumbel)")
    for name, algorithm in ((n, a) for n in evaluators for a in algorithms or [cfg.search.algorithm]):
        run_cfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, algorithm=algorithm))
        ev = NullEvaluator() if name == "null" else make_evaluator(name, model_path, cfg)
        for batch in batches:
            layouts = [(1, playouts)]
            if many_trees and batch > 1:
                layouts.append((batch, max(1, playouts // batch)))
            inference = None
            if name != "null":
                x = encoded_sample(batch)
                inference = rate(lambda x=x, ev=ev: (ev.evaluate(x), len(x))[1], 1.0)
            for trees, per_tree_playouts in layouts:
                sims = _search_rate(ev, run_cfg, batch, trees, per_tree_playouts)
                row = {"evaluator": name, "algorithm": algorithm, "batch": batch, "trees": trees,
                       "sims_per_s": round(sims, 1)}
                if inference is not None:
                    row["inference_only_per_s"] = round(inference, 1)
                    row["search_vs_inference"] = round(sims / inference, 3)
                yield row
        ev.close()

