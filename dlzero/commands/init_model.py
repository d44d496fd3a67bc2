"""`dlzero init-model`: write a randomly initialised model file."""

from __future__ import annotations

import argparse
import sys

from dlzero.commands.common import add_config_args, config_from_args


def register(sub) -> None:
    p = sub.add_parser("init-model", help="write a randomly initialised model (.pt)")
    add_config_args(p)
    p.add_argument("--out", required=True, help="output .pt file")
    p.add_argument("--seed", type=int, default=None, help="random seed for the weights")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.model import ModelMetadata, count_parameters, model_name, new_model, save_model

    cfg = config_from_args(args)
    model = new_model(cfg.model, seed=args.seed)
    path = save_model(model, args.out, ModelMetadata(generation=0, name=model_name(cfg.model)))
    print(f"wrote {path}: {model_name(cfg.model)}, {count_parameters(model):,} parameters", file=sys.stderr)
    return 0
