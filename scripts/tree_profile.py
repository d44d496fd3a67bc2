"""Where one search's time goes, part by part: the tree's own steps against the network.

    python scripts/tree_profile.py [--model runs/NAME/models/gen-0001.pt] [--precision int8] [--playouts 5000]

One tree from a mid-game position, batch 32, pipeline off (so that the network's time and the tree's
do not overlap), every part wrapped in a timer: microseconds per simulation of each, the total, and
the tree's share (total less network). The timers cost about 0.15 us a call, so the parts called per
leaf read a little high. Without --model the network is the null one (uniform priors, value 0),
whose trees are shallow and wide: a trained network's are what the engine searches.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import dlzero.encoding.features as features
import dlzero.search.arena as arena
import dlzero.search.mcts as mcts
from dlzero.bench.infer import make_evaluator, sample_boards
from dlzero.commands.common import resolve_config_path
from dlzero.config import load_config
from dlzero.inference import NullEvaluator
from dlzero.search import Search, Tree

SPENT: dict[str, int] = defaultdict(int)


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter_ns() - start
    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help=".pt model (default: the null network)")
    parser.add_argument("--precision", default="int8", choices=["fp32", "int8"])
    parser.add_argument("--playouts", type=int, default=5000)
    parser.add_argument("--config", default="tiny")
    args = parser.parse_args()
    cfg = load_config(resolve_config_path(args.config))
    cfg = dataclasses.replace(cfg, inference=dataclasses.replace(cfg.inference, threads=1, precision=args.precision))
    if args.model:
        evaluator = make_evaluator("onnx-int8" if args.precision == "int8" else "onnx", args.model, cfg)
    else:
        evaluator = NullEvaluator()
    evaluator.evaluate = timed("network", evaluator.evaluate)
    for name in ("leaf_proof", "legal_moves_and_labels", "repetition_count", "softmax_rows_into"):
        setattr(mcts, name, timed(name, getattr(mcts, name)))
    walk = "C" if arena.COMPILED else "numpy"
    arena.Arena.descend = timed(f"descend ({walk})", arena.Arena.descend)
    arena.Arena.backup = timed(f"backup ({walk})", arena.Arena.backup)
    features.Encoder.add = timed("encoder add", features.Encoder.add)
    features.Encoder.finish = timed("encoder finish", features.Encoder.finish)
    board = sample_boards(1, seed=1, min_ply=20, max_ply=40)[0]
    search = Search(evaluator, dataclasses.replace(cfg.search, leaves_per_tree=32, pipeline=False))
    search.run([Tree(board.copy())], 200)  # warm-up (sessions, caches)
    SPENT.clear()
    tree = Tree(board.copy())
    start = time.perf_counter_ns()
    search.run([tree], args.playouts)
    total = time.perf_counter_ns() - start
    n = tree.playouts_done
    print(f"compiled tree: {arena.COMPILED}, compiled planes: {features.COMPILED_PLANES}, "
          f"{n} simulations, {tree.nodes} nodes")
    print(f"{'total':24s} {total / n / 1e3:7.1f} us/simulation")
    print(f"{'tree (total - network)':24s} {(total - SPENT.get('network', 0)) / n / 1e3:7.1f}")
    for name, ns in sorted(SPENT.items(), key=lambda kv: -kv[1]):
        print(f"  {name:22s} {ns / n / 1e3:7.1f}")


if __name__ == "__main__":
    main()
