"""`dlzero review RECORD`: analyse every position of a CSA/KIF/KI2 game into an annotated KIF (see `dlzero.review`)."""

from __future__ import annotations

import argparse

from dlzero.commands.common import MODEL_HELP, add_config_args, add_inference_args, config_from_args, model_choice

REVIEW_KEYS = {"playouts": "review.playouts", "blunder_threshold": "review.blunder_threshold",
               "positions_per_batch": "review.positions_per_batch"}


def register(sub) -> None:
    p = sub.add_parser("review", help="analyse a game record into an annotated KIF (and an evaluation graph)")
    p.add_argument("record", help="game record: .csa, .kif, .kifu or .ki2")
    p.add_argument("--model", help=MODEL_HELP)
    p.add_argument("--out", help="annotated record to write, .kif (Shift_JIS) or .kifu (UTF-8); "
                   "default: RECORD-review.kif beside the record")
    p.add_argument("--png", help="also draw the evaluation graph into this PNG file")
    p.add_argument("--playouts", type=int, help="playouts per position (review.playouts, default 400)")
    p.add_argument("--blunder-threshold", type=float,
                   help="win-rate drop that makes a move a blunder, 0..1 (review.blunder_threshold, default 0.2)")
    p.add_argument("--positions-per-batch", type=int, help="positions searched together (review.positions_per_batch)")
    p.add_argument("--game", type=int, default=1, help="which game of a multi-game CSA file (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from dlzero.analysis import AnalysisEngine
    from dlzero.data.records import read_games
    from dlzero.engine.layout import load_engine_model
    from dlzero.errors import ConfigError, DlzeroError
    from dlzero.review import default_out, plot_review, review_game, write_review

    cfg = config_from_args(args, REVIEW_KEYS)
    out = Path(args.out) if args.out else default_out(args.record)
    if out.suffix.lower() not in (".kif", ".kifu"):
        raise ConfigError(f"--out {out}: annotated records are KIF files (.kif or .kifu)")
    try:
        games = read_games(args.record)
    except ValueError as exc:
        raise DlzeroError(f"cannot read the record: {exc}") from None
    if not 1 <= args.game <= len(games):
        raise ConfigError(f"--game {args.game}: {args.record} holds {len(games)} game(s)")
    game = games[args.game - 1]
    for note in game.notes:
        print(f"dlzero review: {args.record}: {note}", file=sys.stderr)
    model = model_choice(args.model, cfg, "review")
    engine = AnalysisEngine(load_engine_model(model.path, cfg), cfg, cfg.review.playouts)
    review = review_game(engine, game, cfg.review.playouts, cfg.review.positions_per_batch,
                         cfg.review.blunder_threshold, progress=not args.no_progress)
    header = [f"dlzero review of {Path(args.record).name}: model {model.label()}, "
              f"{cfg.review.playouts} playouts per position"]
    write_review(review, out, header)
    print(f"{len(game.moves)} moves reviewed; annotated record: {out}")
    if args.png:
        plot_review(review, args.png, Path(args.record).name)
        print(f"evaluation graph: {args.png}")
    for b in review.blunders:
        print(f"  blunder at move {b.move_number}: {b.played} lost {100 * b.loss:.0f}% win rate (engine: {b.best})")
    return 0
