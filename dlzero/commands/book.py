"""`dlzero book make`: an opening book in YaneuraOu's format (see `dlzero.data.book`), from game records
or from the network's own search (`dlzero.engine.book`); the USI engine plays it with USI_OwnBook."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from dlzero.commands.common import MODEL_HELP, add_config_args, add_inference_args, config_from_args, model_choice

if TYPE_CHECKING:
    from dlzero.config import Config

BOOK_KEYS = {"max_ply": "book.max_ply", "min_count": "book.min_count", "playouts": "book.playouts",
             "share": "book.share", "positions": "book.positions", "save_every": "book.save_every"}


def register(sub) -> None:
    p = sub.add_parser("book", help="make an opening book (YaneuraOu .db format) for USI_OwnBook")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    make = actions.add_parser(
        "make",
        help="build a book from game records or by the network's search",
        description=(
            "Write a YaneuraOu-format book (.db), which dlzero, YaneuraOu and dlshogi load. --records: the "
            "moves CSA/KIF/KI2 games played up to --max-ply, counted per position. --think: the lines the "
            "network's search reaches from the start position, breadth first: each position's best move and "
            "the moves with at least --share of the visits, valued by the search; positions already in --out "
            "are kept and not searched again, and the book is written every --save-every searches, so an "
            "interrupted run resumes where it stopped."
        ),
    )
    source = make.add_mutually_exclusive_group(required=True)
    source.add_argument("--records", nargs="+", metavar="PATH", help="record files or directories (searched "
                        "recursively for *.csa, *.kif, *.kifu, *.ki2)")
    source.add_argument("--think", action="store_true", help="search with the network (--model)")
    make.add_argument("--out", required=True, help="the book file (written atomically; --think extends it)")
    make.add_argument("--model", help=MODEL_HELP + " (with --think)")
    make.add_argument("--max-ply", type=int, help="book.max_ply: positions up to this ply (start position: 1)")
    make.add_argument("--min-count", type=int, help="book.min_count (--records): leave out rarer moves")
    make.add_argument("--playouts", type=int, help="book.playouts (--think): playouts per position")
    make.add_argument("--share", type=float, help="book.share (--think): visit share that books an alternative")
    make.add_argument("--positions", type=int, help="book.positions (--think): most positions searched this run")
    make.add_argument("--save-every", type=int, help="book.save_every (--think): searches between writes")
    make.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_args(make)
    add_inference_args(make)
    make.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.errors import ConfigError

    cfg = config_from_args(args, BOOK_KEYS)
    if args.records and args.model:
        raise ConfigError("--model goes with --think; a book from --records counts moves, it searches nothing")
    if os.path.isdir(args.out):
        raise ConfigError(f"--out {args.out} is a directory; give a book file name (book.db)")
    return _think(args, cfg) if args.think else _records(args, cfg)


def _records(args: argparse.Namespace, cfg: Config) -> int:
    from dlzero.data.book import book_from_records, write_book
    from dlzero.data.record_import import find_record_files

    files = find_record_files(args.records)
    book, report = book_from_records(files, cfg.book.max_ply, cfg.book.min_count, progress=not args.quiet)
    for path, reason in report.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    if not len(book):
        print(f"dlzero book make: no book move from {len(files)} files ({report.games} games); nothing written",
              file=sys.stderr)
        return 1
    write_book(args.out, book)
    print(f"wrote {args.out}: {len(book)} positions from {report.games} games in {len(files)} "
          f"files (plies 1-{cfg.book.max_ply}, moves played at least {cfg.book.min_count} times)", file=sys.stderr)
    return 0


def _think(args: argparse.Namespace, cfg: Config) -> int:
    from dlzero.engine import Engine
    from dlzero.engine.book import existing_book, make_think_book

    book = existing_book(args.out)
    engine = Engine.load(model_choice(args.model, cfg, "book make").path, cfg)
    report = make_think_book(engine.player, book, args.out, cfg.book, progress=not args.quiet)
    print(f"wrote {args.out}: {report.positions} positions ({report.searched} searched this run, "
          f"{cfg.book.playouts} playouts each, plies 1-{cfg.book.max_ply})", file=sys.stderr)
    return 0
