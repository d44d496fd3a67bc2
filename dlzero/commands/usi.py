"""`dlzero usi`: run as a USI engine for a shogi GUI or a match runner."""

from __future__ import annotations

import argparse

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args


def register(sub) -> None:
    p = sub.add_parser("usi", help="USI engine on stdin/stdout (for GUIs and match runners)")
    p.add_argument("--model", help="model file (.pt or .onnx) or a network's name (`dlzero networks list`); or "
                   "later `setoption name ModelPath`; default: the default network")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.usi import main

    return main(config_from_args(args), args.model)
