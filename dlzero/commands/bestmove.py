"""`dlzero bestmove`: search one position and print the move (or the whole analysis as JSON)."""

from __future__ import annotations

import argparse
import json

from dlzero.commands.common import (
    MODEL_HELP,
    add_config_args,
    add_inference_args,
    config_from_args,
    int_range,
    model_choice,
)
from dlzero.config import MAX_LEAVES_PER_TREE

FLAG_KEYS = {"playouts": "search.playouts", "batch": "search.leaves_per_tree"}


def register(sub) -> None:
    p = sub.add_parser("bestmove", help="print the best move of one position")
    p.add_argument("--model", help=MODEL_HELP)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--sfen", help="the position as an SFEN string")
    where.add_argument("--position", help="as in USI: 'startpos moves 7g7f ...' or 'sfen ... moves ...'")
    p.add_argument("--playouts", type=int, help="playouts to search (search.playouts, default 800)")
    p.add_argument("--batch", type=int_range(1, MAX_LEAVES_PER_TREE),
                   help=f"leaves a network call, 1 to {MAX_LEAVES_PER_TREE} (search.leaves_per_tree; USI BatchSize)")
    p.add_argument("--json", action="store_true", help="print the full analysis as one JSON object")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.engine import Engine
    from dlzero.position import parse_position

    position = f"sfen {args.sfen}" if args.sfen is not None else args.position
    parse_position(position)  # a bad position fails before the model is loaded
    cfg = config_from_args(args, FLAG_KEYS)
    engine = Engine.load(model_choice(args.model, cfg, "bestmove").path, cfg)
    analysis = engine.analyze(position)
    if args.json:
        print(json.dumps({"position": position, **analysis.to_dict(engine.cfg.usi.multipv)}))
    else:
        print(analysis.bestmove)
    return 0
