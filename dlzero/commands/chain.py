"""`dlzero chain save`: a run's best weights, newest self-play and ledger row into a chain folder (dlzero.chain)."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    p = sub.add_parser("chain", help="carry a loop run to another machine: its best weights and newest self-play "
                       "in a folder git can hold (then `dlzero loop --init-from FOLDER`)")
    actions = p.add_subparsers(dest="action", required=True)
    save = actions.add_parser("save", help="write the run's link of the chain (weights, replay, ledger row)")
    save.add_argument("--run", required=True, help="the run directory (dlzero loop --run)")
    save.add_argument("--to", required=True, metavar="FOLDER", help="the chain folder (created if missing)")
    save.add_argument("--games", type=int, default=1024,
                      help="newest self-play games kept as xz-compressed replay (0: weights and ledger only)")
    save.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dlzero.chain import save_chain
    from dlzero.errors import ConfigError
    from dlzero.rundir import RunDir

    if args.games < 0:
        raise ConfigError(f"--games {args.games}: give a count of games, 0 or more")
    link = save_chain(RunDir.open(args.run), Path(args.to), args.games)
    print(json.dumps(link, indent=1))
    return 0
