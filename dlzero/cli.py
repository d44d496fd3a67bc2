"""`dlzero <command>`: the one entry point that wires the layers together.

Commands live in `dlzero.commands.<name>`; they keep heavy imports (torch, onnxruntime) inside
`run`, so `dlzero --help` starts quickly. Errors caused by input (`DlzeroError`) print as one line, exit code 2,
and so does a disk that refuses a write (full, over quota, read-only: ENOSPC, EDQUOT, EROFS), naming the file.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from dlzero.commands import COMMAND_MODULES
from dlzero.commands.common import error_status
from dlzero.errors import DlzeroError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlzero",
        description="AlphaZero / dlshogi-style shogi engine: self-play, training, gating, USI.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"dlzero.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args) or 0)
    # bad input, or a full, over-quota or read-only disk under any write: one line, not a traceback
    except (DlzeroError, OSError, KeyboardInterrupt) as exc:
        status = error_status(args.command, exc)
        if status is None:
            raise
        return status


if __name__ == "__main__":
    sys.exit(main())
