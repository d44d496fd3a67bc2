"""`dlzero doctor --run DIR`: check a whole run (shards, sidecars, models, best.json, CSVs, state files).

Prints what is wrong and the command that repairs each thing; exits 0 on a healthy run, 1 when
anything is wrong (2, as every command, when DIR is not a run at all). It changes nothing itself.
"""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check a run directory: shards and their checksums, models, best.json, "
                                      "CSVs, loop state; say how to repair what is wrong")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory to check")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.doctor import check_run

    report = check_run(args.run)
    print("\n".join(report.lines()), flush=True)
    return 0 if report.healthy else 1
