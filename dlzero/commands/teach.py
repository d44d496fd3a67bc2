"""`dlzero teach`: label positions with a teacher (a USI engine, miniosl's network) into an hcpe3 file.

    dlzero teach --teacher miniosl --positions 100000 --out teacher.hcpe3 --workers 2
    dlzero teach --teacher "usi:/usr/games/gpsusi;LimitDepth=4" --positions 20000 --out gps.hcpe3
    dlzero teach --teacher miniosl --source runs/NAME/data --positions 50000 --out relabelled.hcpe3

Without `--source` the teacher plays itself from the lines of an opening suite (`--openings`); with
it, the games of hcpe3 files (a run's self-play shards) and CSA/KIF/KI2 records are relabelled ply by
ply. Teacher specs: `usi:COMMAND[;Option=value...]` (engine options, plus our keys `go`, `eval_scale`,
`temperature`, `timeout`; MultiPV or GPS Shogi's MultiPVWidth give a soft policy) and `onnx:miniosl`
(`miniosl` for short; keys `batch`, `threads`, `temperature`, `model`; needs `pip install -e
'.[teacher]'`). The output is written in parts beside OUT (`OUT.parts/`); rerun the same command to
resume. Train on it with `dlzero train --hcpe OUT --out m.pt` or start a run from it with
`dlzero loop --run runs/NAME --init-from OUT`.

The teacher's games follow the rules of dlzero's self-play: `selfplay.max_moves`,
`search.entering_king_rule`, and `selfplay.random_plies` (`--sample-plies`) moves drawn from the
teacher's policy at the start of each game.
"""

from __future__ import annotations

import argparse
import sys

from dlzero.commands.common import add_config_args, config_from_args

FLAG_KEYS = {"sample_plies": "selfplay.random_plies", "max_moves": "selfplay.max_moves"}


def register(sub) -> None:
    p = sub.add_parser("teach", help="label positions with a teacher (USI engine, miniosl) into hcpe3",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", required=True, metavar="SPEC",
                   help="usi:COMMAND[;Option=value...] or onnx:miniosl[;key=value...] (or miniosl)")
    p.add_argument("--positions", type=int, required=True, help="positions to label (whole parts: a few more)")
    p.add_argument("--out", required=True, help="output .hcpe3 file; its parts go to OUT.parts/")
    p.add_argument("--workers", type=int, default=1, help="teacher processes in parallel (default 1)")
    p.add_argument("--source", nargs="+", metavar="PATH",
                   help="relabel these games (hcpe3 files, run directories, CSA/KIF/KI2 records, folders) "
                        "instead of letting the teacher play itself")
    p.add_argument("--openings", help="suite for the teacher's own games (default: configs/openings/gate.txt; "
                                      "'startpos': the start position)")
    p.add_argument("--sample-plies", type=int, help="teacher moves per game drawn from its policy "
                                                    "(selfplay.random_plies)")
    p.add_argument("--max-moves", type=int, help="move number at which a game is a draw (selfplay.max_moves)")
    p.add_argument("--part-games", type=int, default=32, help="games per part, the unit of resumption (32)")
    p.add_argument("--seed", type=int, default=1, help="seed of openings, sampled moves and source order")
    p.add_argument("--quiet", action="store_true", help="no progress bar (a log line per part instead)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dlzero.teacher import PlaySettings, TeachSettings, teach

    if args.source and args.openings:
        print("dlzero teach: --openings is for the teacher's own games; ignored with --source", file=sys.stderr)
    cfg = config_from_args(args, FLAG_KEYS)
    play = PlaySettings(sample_plies=cfg.selfplay.random_plies, max_moves=cfg.selfplay.max_moves,
                        declaration=cfg.search.entering_king_rule)
    settings = TeachSettings(teacher=args.teacher, positions=args.positions, out=Path(args.out),
                             workers=args.workers, sources=tuple(args.source or ()),
                             openings=None if args.source else args.openings,
                             play=play, part_games=args.part_games, seed=args.seed)
    report = teach(settings, progress=not args.quiet)
    print(f"wrote {report.out}: {report.positions:,} positions in {report.games:,} games "
          f"({report.parts} parts, {report.reused_parts} from an earlier run); labelled {report.labelled:,} "
          f"in {report.seconds:.1f} s ({report.rate:.1f} positions/s)", file=sys.stderr)
    return 0
