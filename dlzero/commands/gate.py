"""`dlzero gate`: gate a candidate generation against a run's best, promote it if it wins.

The run's config.yaml is the base (see `run_from_args`); `dlzero match` plays any two players.
"""

from __future__ import annotations

import argparse

from dlzero.commands.common import add_config_args, add_inference_args, run_from_args
from dlzero.errors import RunDirError

GATE_KEYS = {"games": "gate.max_games", "playouts": "gate.playouts", "parallel": "gate.games_in_parallel"}


def register(sub) -> None:
    p = sub.add_parser("gate", help="gate a candidate generation against the best; promote it on a win")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--candidate", type=int, help="generation to gate (default: the newest above the best)")
    p.add_argument("--games", type=int, help="most games of the match (gate.max_games)")
    p.add_argument("--playouts", type=int, help="playouts per move (gate.playouts)")
    p.add_argument("--parallel", type=int, help="games played at once, one batch per side and step "
                   "(gate.games_in_parallel)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run_gate)


def run_gate(args: argparse.Namespace) -> int:
    from dlzero.gating.promotion import gate_and_promote
    from dlzero.runlock import hold

    with hold(args.run, ("gate",)):  # one gate at a time: best.json, games/ and ratings.csv have one writer
        rd, cfg = run_from_args(args, GATE_KEYS, "dlzero gate", create=False)
        candidate = args.candidate
        if candidate is None:
            best = rd.best()
            newer = [g for g in rd.generations() if best is None or g > best.generation]
            if not newer:
                raise RunDirError(f"{rd.root}: no generation newer than the best to gate")
            candidate = newer[-1]
        result = gate_and_promote(rd, cfg, candidate, progress=not args.no_progress, report=False)
    print(result.summary())
    return 0
