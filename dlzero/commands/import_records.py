"""`dlzero import-records`: CSA / KIF game records to one hcpe file for supervised training."""

from __future__ import annotations

import argparse
import sys

MAX_LISTED_NOTES = 30


def register(sub) -> None:
    p = sub.add_parser(
        "import-records",
        help="convert CSA/KIF game records to an hcpe file",
        description=(
            "Convert CSA and KIF game records into one hcpe file (one record per move: the position "
            "before it, the move, eval 0, the game result). Directories are searched recursively for "
            "*.csa, *.kif and *.kifu. Files that cannot be read, or that crash cshogi's parser, are "
            "skipped with a reason; a game is cut at its first illegal move; games without a known "
            "winner are imported as draws (gameResult 0) and listed in the notes."
        ),
    )
    p.add_argument("files", nargs="+", help="record files or directories")
    p.add_argument("--out", required=True, help="output .hcpe file (written atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.data.record_import import import_records

    report = import_records(args.files, args.out, progress=not args.quiet)
    print(f"imported {len(report.imported)} files / {report.positions} positions", end="", file=sys.stderr)
    print(f" into {report.out}" if report.imported else " (nothing written)", file=sys.stderr)
    if report.skipped:
        print(f"skipped {len(report.skipped)} files:", file=sys.stderr)
        for path, reason in report.skipped:
            print(f"  {path}: {reason}", file=sys.stderr)
    if report.notes:
        print(f"notes ({len(report.notes)}):", file=sys.stderr)
        for path, note in report.notes[:MAX_LISTED_NOTES]:
            print(f"  {path}: {note}", file=sys.stderr)
        if len(report.notes) > MAX_LISTED_NOTES:
            print(f"  ... and {len(report.notes) - MAX_LISTED_NOTES} more", file=sys.stderr)
    return 0 if report.imported else 1
