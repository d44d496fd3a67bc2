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

Every flag sets its key of the config's `teach:` section (`--teacher` is `teach.teacher`,
`--sample-plies` is `teach.sample_plies`, ...), so a config file can hold the whole command:
`dlzero teach --config tiny --out teacher.hcpe3`. The teacher's games follow the rules of dlzero's
self-play: `search.entering_king_rule`, and unless `teach.max_moves` and `teach.sample_plies` say
otherwise (-1, the default), `selfplay.max_moves` and `selfplay.random_plies` moves drawn from the
teacher's policy at the start of each game.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from dlzero.commands.common import add_config_args, config_from_args

if TYPE_CHECKING:
    from dlzero.config import Config
    from dlzero.teacher import PlaySettings

FLAG_KEYS = {"teacher": "teach.teacher", "positions": "teach.positions", "out": "teach.out",
             "workers": "teach.workers", "source": "teach.source", "openings": "teach.openings",
             "sample_plies": "teach.sample_plies", "max_moves": "teach.max_moves",
             "part_games": "teach.part_games", "seed": "teach.seed",
             "allow_rating_openings": "teach.allow_rating_openings"}


def _yaml_text(text: str) -> str:
    """A text flag as the YAML scalar its override carries: quoted, so a spec's ':', ';' or '#' stays text."""
    return json.dumps(text)


class _YamlList(argparse.Action):
    """`--source A B ...` as the YAML list `teach.source` takes (each path quoted, as `_yaml_text`)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, "[" + ", ".join(_yaml_text(str(v)) for v in values) + "]")


def register(sub) -> None:
    p = sub.add_parser("teach", help="label positions with a teacher (USI engine, miniosl) into hcpe3",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--teacher", type=_yaml_text, metavar="SPEC",
                   help="usi:COMMAND[;Option=value...] or onnx:miniosl[;key=value...] (or miniosl) "
                        "(teach.teacher; needed unless the config sets it)")
    p.add_argument("--positions", type=int, help="positions to label, whole parts: a few more (teach.positions, "
                                                 "default 100000)")
    p.add_argument("--out", type=_yaml_text, help="output .hcpe3 file; its parts go to OUT.parts/ (teach.out; "
                                                  "needed unless the config sets it)")
    p.add_argument("--workers", type=int, help="teacher processes in parallel (teach.workers, default 1)")
    p.add_argument("--source", nargs="+", action=_YamlList, metavar="PATH",
                   help="relabel these games (hcpe3 files, run directories, CSA/KIF/KI2 records, folders) "
                        "instead of letting the teacher play itself (teach.source)")
    p.add_argument("--openings", type=_yaml_text,
                   help="suite for the teacher's own games (teach.openings; default: configs/openings/gate.txt; "
                        "'startpos': the start position)")
    p.add_argument("--allow-rating-openings", action="store_const", const="true",
                   help="let --openings hold start positions of the rating suite configs/openings/rating.txt "
                        "(teach.allow_rating_openings; refused by default: students would learn the positions "
                        "they are rated from)")
    p.add_argument("--sample-plies", type=int, help="teacher moves per game drawn from its policy "
                                                    "(teach.sample_plies; default selfplay.random_plies)")
    p.add_argument("--max-moves", type=int, help="move number at which a game is a draw (teach.max_moves; "
                                                 "default selfplay.max_moves)")
    p.add_argument("--part-games", type=int, help="games per part, the unit of resumption (teach.part_games, "
                                                  "default 32)")
    p.add_argument("--seed", type=int, help="seed of openings, sampled moves and source order (teach.seed, "
                                            "default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (a log line per part instead)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dlzero.errors import ConfigError

    cfg = config_from_args(args, FLAG_KEYS)
    t = cfg.teach
    if not t.teacher or not t.out:
        raise ConfigError("dlzero teach needs a teacher and an output file: --teacher SPEC and --out FILE "
                          "(or teach.teacher and teach.out in the config)")
    from dlzero.teacher import TeachSettings, teach

    if t.source and t.openings:
        print("dlzero teach: --openings is for the teacher's own games; ignored with --source", file=sys.stderr)
    settings = TeachSettings(teacher=t.teacher, positions=t.positions, out=Path(t.out), workers=t.workers,
                             sources=tuple(t.source), openings=None if t.source else t.openings or None,
                             allow_rating_openings=t.allow_rating_openings,
                             play=play_settings(cfg), part_games=t.part_games, seed=t.seed)
    report = teach(settings, progress=not args.quiet)
    print(f"wrote {report.out}: {report.positions:,} positions in {report.games:,} games "
          f"({report.parts} parts, {report.reused_parts} from an earlier run); labelled {report.labelled:,} "
          f"in {report.seconds:.1f} s ({report.rate:.1f} positions/s)", file=sys.stderr)
    return 0


def play_settings(cfg: Config) -> PlaySettings:
    """The rules of the teacher's own games: `teach.*`, where -1 takes self-play's value."""
    from dlzero.teacher import PlaySettings

    t = cfg.teach
    return PlaySettings(sample_plies=cfg.selfplay.random_plies if t.sample_plies == -1 else t.sample_plies,
                        max_moves=cfg.selfplay.max_moves if t.max_moves == -1 else t.max_moves,
                        declaration=cfg.search.entering_king_rule)
