"""`dlzero analyze`: JSON-lines analysis engine on stdin/stdout, KataGo's analysis protocol (see `dlzero.analysis`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import NoReturn

from dlzero.commands.common import MODEL_HELP, add_config_args, add_inference_args, config_from_args, model_choice

FLAG_KEYS = {"max_line_bytes": "analysis.max_line_bytes", "playouts": "search.playouts"}
MAX_BATCH = 4096  # --max-batch: turns searched together; each adds its leaves to one network batch


def register(sub) -> None:
    p = sub.add_parser("analyze", help="answer JSON analysis queries from stdin, one per line "
                       "(KataGo's protocol; docs/analysis.md)")
    p.add_argument("--model", help=MODEL_HELP)
    p.add_argument("--playouts", type=int, help="playouts of a query that gives no maxVisits/playouts "
                   "(search.playouts, default 800)")
    p.add_argument("--max-batch", type=int, default=64,
                   help=f"most turns searched together, highest priority first (1..{MAX_BATCH}, default 64)")
    p.add_argument("--max-line-bytes", type=int,
                   help="longest query line read; a longer one is answered with an error and skipped "
                        "(analysis.max_line_bytes, default 1 MiB)")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.analysis import AnalysisEngine, serve
    from dlzero.engine.layout import load_engine_model
    from dlzero.engine.player import MAX_PLAYOUTS
    from dlzero.errors import ConfigError

    # every numeric flag is checked here or by its config key (analysis.max_line_bytes, inference.threads),
    # before the model loads: one line naming it, never a traceback from where the number ends up
    if not 1 <= args.max_batch <= MAX_BATCH:
        raise ConfigError(f"--max-batch must be between 1 and {MAX_BATCH}, got {args.max_batch}")
    if args.playouts is not None and not 1 <= args.playouts <= MAX_PLAYOUTS:
        raise ConfigError(f"--playouts must be between 1 and {MAX_PLAYOUTS:,}, got {args.playouts}")
    cfg = config_from_args(args, FLAG_KEYS)
    engine = AnalysisEngine(load_engine_model(model_choice(args.model, cfg, "analyze").path, cfg), cfg)
    sys.stdout.reconfigure(encoding="utf-8")  # the protocol is UTF-8 JSON lines, whatever the locale
    # bytes in: the engine decodes them itself, so a line that is not UTF-8 is one error answer
    try:
        serve(engine, sys.stdin.buffer, sys.stdout, args.max_batch, cfg.analysis.max_line_bytes)
    except BrokenPipeError:
        reader_gone()
    return 0


def reader_gone() -> NoReturn:
    """The reader of stdout left (`dlzero analyze | head`): end quietly, as a pipeline's tools do, with
    the status of a process ended by SIGPIPE (141). Without the interpreter's teardown: the thread
    reading stdin may be blocked in it, and the teardown would abort on its lock (SIGABRT)."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(128 + signal.SIGPIPE)
