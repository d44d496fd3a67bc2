"""`dlzero gate`: gate a candidate generation against a run's best; `dlzero match`: any two players."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args
from dlzero.errors import RunDirError

GATE_KEYS = {"games": "gate.max_games", "playouts": "gate.playouts"}


def register(sub) -> None:
    p = sub.add_parser("gate", help="gate a candidate generation against the best; promote it on a win")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--candidate", type=int, help="generation to gate (default: the newest above the best)")
    p.add_argument("--games", type=int, help="most games of the match (gate.max_games)")
    p.add_argument("--playouts", type=int, help="playouts per move (gate.playouts)")
    p.add_argument("--parallel", type=int, default=16, help="games played at once (one batch/side/step)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run_gate)

    m = sub.add_parser("match", help="play two models (or a model and 'random'): W-D-L, score, Elo")
    m.add_argument("model_a", help=".pt/.onnx model, or 'random'")
    m.add_argument("model_b", help=".pt/.onnx model, or 'random'")
    m.add_argument("--games", type=int, help="games to play (gate.max_games)")
    m.add_argument("--playouts", type=int, help="playouts per move (gate.playouts)")
    m.add_argument("--parallel", type=int, default=16, help="games played at once")
    m.add_argument("--csa-dir", help="write each game as a CSA record into this folder")
    m.add_argument("--seed", type=int, default=0, help="seed for the opening order and the random mover")
    add_config_args(m)
    add_inference_args(m)
    m.set_defaults(func=run_match)


def run_gate(args: argparse.Namespace) -> int:
    from dlzero.gating.promotion import gate_and_promote
    from dlzero.rundir import RunDir

    rd = RunDir.open(args.run)
    if args.config is None:
        args.config = str(rd.config_path)
    cfg = config_from_args(args, GATE_KEYS)
    candidate = args.candidate
    if candidate is None:
        best = rd.best()
        newer = [g for g in rd.generations() if best is None or g > best.generation]
        if not newer:
            raise RunDirError(f"{rd.root}: no generation newer than the best to gate")
        candidate = newer[-1]
    result = gate_and_promote(rd, cfg, candidate, progress=not args.no_progress,
                              parallel=args.parallel, report=False)
    print(result.summary())
    return 0


def run_match(args: argparse.Namespace) -> int:
    from dlzero.gating.arena import RANDOM, play_match
    from dlzero.inference import load_model

    cfg = config_from_args(args, GATE_KEYS)
    names = (args.model_a, args.model_b)
    sides = [name if name == RANDOM else load_model(name, cfg.inference) for name in names]
    result = play_match(sides[0], sides[1], cfg.gate.max_games, cfg, parallel=args.parallel, seed=args.seed,
                        record_dir=args.csa_dir, names=("A", "B"))
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
