"""`dlzero rate`: rate a run's models on the anchored scale (random mover = 0) and print the list.

The run's config.yaml is the base and the flags are saved back into it (see `run_from_args`), so
the `rate.*` settings that defined the stored games' players stay with the run.
"""

from __future__ import annotations

import argparse
import json
import sys

from dlzero.commands.common import add_config_args, add_inference_args, run_from_args

RATE_KEYS = {"games": "rate.games", "playouts": "rate.playouts", "models": "rate.models", "sample": "rate.sample",
             "parallel": "rate.parallel", "anchors": "rate.anchors"}


def _anchor_list(text: str) -> str:
    """`--anchors a,b,c` as the YAML list `rate.anchors` takes (names hold ':' and '=', so quoted)."""
    return "[" + ", ".join(f'"{name.strip()}"' for name in text.split(",") if name.strip()) + "]"


def register(sub) -> None:
    p = sub.add_parser("rate", help="rate a run's models against fixed anchors (random = 0, alpha-beta rungs, "
                       "generation 0, GPS Shogi, Fairy-Stockfish, USI engines); games accumulate in "
                       "runs/NAME/rating/")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--games", type=int, help="games per pairing to top up to (rate.games; raise it to add games)")
    p.add_argument("--playouts", type=int, help="playouts per move of the models (rate.playouts)")
    p.add_argument("--models", choices=["promoted", "all"], help="which generations (rate.models)")
    p.add_argument("--sample", type=int, help="at most this many generations, evenly spread (rate.sample)")
    p.add_argument("--generations", help="comma-separated generations to rate instead (e.g. 0,5,12)")
    p.add_argument("--anchors", type=_anchor_list, metavar="A,B,...",
                   help="anchor pool, weakest first (rate.anchors), e.g. random,alphabeta:100,"
                   "fairy-stockfish:skill=0:byoyomi=100,gpsshogi:depth=4 (docs/benchmarks/ladder.md)")
    p.add_argument("--engine", action="append", default=[], metavar="NAME=COMMAND",
                   help="outside USI engine joining the anchor pool (repeatable; adds to rate.engines)")
    p.add_argument("--parallel", type=int, help="games of a pairing played at once (rate.parallel)")
    p.add_argument("--fit-only", action="store_true", help="play nothing: refit the stored games and print")
    p.add_argument("--json", action="store_true", help="one JSON object per player instead of a table")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def _generations(text: str) -> list[int]:
    from dlzero.errors import ConfigError

    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--generations '{text}' must be comma-separated integers") from None


def run(args: argparse.Namespace) -> int:
    from dlzero.gating.rating import fit_run, rate, select_generations

    rd, cfg = run_from_args(args, RATE_KEYS, "dlzero rate", create=False)
    if args.fit_only:
        from dlzero.gating.rating import engines_from

        report = fit_run(rd, cfg, engines_from(cfg, args.engine))
    else:
        gens = _generations(args.generations) if args.generations else select_generations(rd, cfg)
        missing = [g for g in gens if not rd.model_path(g).is_file()]
        if missing:
            from dlzero.errors import RunDirError

            raise RunDirError(f"{rd.root}: no model file for generation(s) {missing}")
        report = rate(rd, cfg, gens, args.engine, progress=not args.no_progress)
    for line in report.problems:
        print(f"dlzero rate: warning: {line}", file=sys.stderr)
    if report.left_out:
        print(f"dlzero rate: {report.left_out} stored games at other settings (playouts, search settings, "
              "engine go) left out", file=sys.stderr)
    if report.ratings is None:
        print("dlzero rate: no games against 'random' yet: nothing to fit", file=sys.stderr)
        return 1
    rows = report.ratings.ratings
    if args.json:
        for r in rows:
            print(json.dumps({"player": r.player, "elo": round(r.elo, 1), "elo_low": round(r.elo_low, 1),
                              "elo_high": round(r.elo_high, 1), "games": r.games}))
        return 0
    print(f"{'player':<16} {'elo':>7}   {'95% interval':<17} {'games':>6} {'score':>6}")
    for r in rows:
        interval = "(pinned)" if r.player == report.ratings.pin else f"[{r.elo_low:+.0f}, {r.elo_high:+.0f}]"
        print(f"{r.player:<16} {r.elo:>+7.0f}   {interval:<17} {r.games:>6} {r.score:>6.3f}")
    print(f"{report.played} games played now; {rd.elo_csv.name}: {rd.elo_csv}", file=sys.stderr)
    return 0
