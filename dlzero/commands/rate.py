"""`dlzero rate`: rate a run's models against the anchors and print what the games say.

The table gives every pairing's W-D-L and score (95 % Wilson interval) first, then the Elo of each
group of players connected by informative pairings, named by its prior and its zero (random mover = 0
where connected to it), then the players of no informative pairing, with their W-D-L and no Elo
(`dlzero.gating.elo_fit`).

The games start from the rating suite (`--openings`, `rate.openings`; default configs/openings/rating.txt),
which no teacher or self-play game starts from: a model is not rated on positions it trained on. Games
stored from another suite (older runs played from gate.txt) are left out of the fit and counted.

The run's config.yaml is the base and the flags are saved back into it (see `run_from_args`), so
the `rate.*` settings that defined the stored games' players stay with the run.
"""

from __future__ import annotations

import argparse
import json
import sys

from dlzero.commands.common import add_config_args, add_inference_args, run_from_args

RATE_KEYS = {"games": "rate.games", "playouts": "rate.playouts", "models": "rate.models", "sample": "rate.sample",
             "parallel": "rate.parallel", "anchors": "rate.anchors", "openings": "rate.openings"}


def _anchor_list(text: str) -> str:
    """`--anchors a,b,c` as the YAML list `rate.anchors` takes (names hold ':' and '=', so quoted)."""
    return "[" + ", ".join(f'"{name.strip()}"' for name in text.split(",") if name.strip()) + "]"


def register(sub) -> None:
    p = sub.add_parser("rate", help="rate a run's models against fixed anchors (random, alpha-beta rungs, "
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
    p.add_argument("--openings", type=json.dumps, metavar="FILE",
                   help="opening suite of the games (rate.openings; default: the shipped configs/openings/rating.txt)")
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
    from dlzero.gating.elo_fit import report_lines
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
        print(f"dlzero rate: {report.left_out} stored games at other settings (opening suite, playouts, search "
              "settings, engine go) left out", file=sys.stderr)
    if report.ratings is None:
        print("dlzero rate: no stored games yet: nothing to fit", file=sys.stderr)
        return 1
    fit = report.ratings
    if args.json:
        # one object per player; "elo" is null for a player of no informative pairing
        for player in [*fit.by_player(), *fit.unrated]:
            r = fit.by_player().get(player)
            w, d, lo = fit.record(player)
            elo = {} if r is None else {"elo": round(r.elo, 1), "elo_low": round(r.elo_low, 1),
                                        "elo_high": round(r.elo_high, 1)}
            print(json.dumps({"player": player, "games": w + d + lo, "wins": w, "draws": d, "losses": lo,
                              "elo": None, "elo_low": None, "elo_high": None, **elo,
                              "relative_to": None if r is None else r.reference, "prior_draws": fit.prior_draws}))
        return 0
    print("\n".join(report_lines(fit)))
    print(f"{report.played} games played now; {rd.elo_csv.name}: {rd.elo_csv}", file=sys.stderr)
    return 0
