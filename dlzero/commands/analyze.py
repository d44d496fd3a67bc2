"""`dlzero analyze`: JSON-lines analysis engine on stdin/stdout, KataGo's analysis protocol (see `dlzero.analysis`)."""

from __future__ import annotations

import argparse
import sys

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args

FLAG_KEYS = {"max_line_bytes": "analysis.max_line_bytes"}


def register(sub) -> None:
    p = sub.add_parser("analyze", help="answer JSON analysis queries from stdin, one per line "
                       "(KataGo's protocol; docs/analysis.md)")
    p.add_argument("--model", required=True, help="model file (.pt or .onnx)")
    p.add_argument("--playouts", type=int, default=800, help="playouts of a query that gives no maxVisits/playouts")
    p.add_argument("--max-batch", type=int, default=64,
                   help="most turns searched together, highest priority first (default 64)")
    p.add_argument("--max-line-bytes", type=int,
                   help="longest query line read; a longer one is answered with an error and skipped "
                        "(analysis.max_line_bytes, default 1 MiB)")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.analysis import AnalysisEngine, serve
    from dlzero.engine.layout import load_engine_model
    from dlzero.errors import ConfigError

    if args.playouts < 1 or args.max_batch < 1:
        raise ConfigError("--playouts and --max-batch must be at least 1")
    cfg = config_from_args(args, FLAG_KEYS)
    engine = AnalysisEngine(load_engine_model(args.model, cfg), cfg, args.playouts)
    sys.stdout.reconfigure(encoding="utf-8")  # the protocol is UTF-8 JSON lines, whatever the locale
    # bytes in: the engine decodes them itself, so a line that is not UTF-8 is one error answer
    serve(engine, sys.stdin.buffer, sys.stdout, args.max_batch, cfg.analysis.max_line_bytes)
    return 0
