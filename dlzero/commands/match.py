"""`dlzero match`: play any two players (model files or 'random'): W-D-L, score, Elo."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args

MATCH_KEYS = {"games": "gate.max_games", "playouts": "gate.playouts", "parallel": "gate.games_in_parallel"}


def register(sub) -> None:
    m = sub.add_parser("match", help="play two models (or a model and 'random'): W-D-L, score, Elo")
    m.add_argument("model_a", help=".pt/.onnx model, or 'random'")
    m.add_argument("model_b", help=".pt/.onnx model, or 'random'")
    m.add_argument("--games", type=int, help="games to play (gate.max_games)")
    m.add_argument("--playouts", type=int, help="playouts per move (gate.playouts)")
    m.add_argument("--parallel", type=int, help="games played at once (gate.games_in_parallel)")
    m.add_argument("--csa-dir", help="write each game as a CSA record into this folder")
    m.add_argument("--seed", type=int, default=0, help="seed for the opening order and the random mover")
    add_config_args(m)
    add_inference_args(m)
    m.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.gating.arena import RANDOM, play_match
    from dlzero.inference import load_model

    cfg = config_from_args(args, MATCH_KEYS)
    names = (args.model_a, args.model_b)
    sides = [name if name == RANDOM else load_model(name, cfg.inference) for name in names]
    result = play_match(sides[0], sides[1], cfg.gate.max_games, cfg, parallel=cfg.gate.games_in_parallel,
                        seed=args.seed, record_dir=args.csa_dir, names=("A", "B"))
    elo, low, high = result.elo()
    print(f"A={args.model_a} vs B={args.model_b}: {result.n_games} games, "
          f"W-D-L {result.wins}-{result.draws}-{result.losses} (for A), "
          f"score {result.score:.3f}, Elo {elo:+.0f} [{low:+.0f}, {high:+.0f}] (95%)")
    for side in sides:
        if not isinstance(side, str):
            side.close()
    reasons = Counter(g.reason for g in result.games)
    print("game ends: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())), file=sys.stderr)
    return 0
