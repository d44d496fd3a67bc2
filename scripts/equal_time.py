"""A shipped network at equal time against fixed opponents (not a test; issue 39's measurement).

    python scripts/equal_time.py --network default --opponents gpsshogi:depth=4,miniosl:sample=0 --games 40 \
        --work runs/equal-time --csv docs/benchmarks/networks.csv

dlzero plays as a USI engine (`dlzero usi --model NETWORK`) at `--byoyomi` ms a move with `Threads 1` and
`EvalStreams 1`: one core's worth of search, the way a user's GUI runs it. Each opponent is a `rate.anchors`
name (GPS Shogi, Fairy-Stockfish, miniosl, alpha-beta, another `usi:` engine). Games come in colour-swapped pairs
from the rating suite (configs/openings/rating.txt, which no teacher or self-play game starts from),
`--parallel` games at once (2 on a 2-core machine: each game has one engine thinking at a time). The games are
kept in WORK as `dlzero rate` batches, so a rerun tops a pairing up to `--games` and plays nothing else.
Prints each pairing's W-D-L and score with its 95 % Wilson interval, its games lost on time by each side, and
the CPU's flags; with `--csv`, sets the rows of this network in that file (`network, opponent, time_control,
wins, draws, losses`). The clock is enforced: a move of an engine given a byoyomi (dlzero's always) that takes
longer than the byoyomi plus `--tolerance` ms (rate.clock_tolerance_ms) loses the game on time, and each game
keeps its moves' times (`move_ms` in the batch files).

`--sprt ELO0,ELO1` makes each pairing the match fixed in advance that decides whether a candidate replaces the
shipped network: games come `--step` at a time and stop once Wald's SPRT (independent games, `--alpha`,
`--beta`) accepts or rejects; at `--games` without a decision it is truncated and decided by the sign of the
LLR (positive: H1). The verdict line says which of the three ended it.

    DLZERO_NETWORKS_DIR=staging python scripts/equal_time.py --network CANDIDATE \
        --opponents "usi:dlzero usi --model SHIPPED;Threads=1;EvalStreams=1;byoyomi=1000" \
        --sprt 0,50 --games 40 --step 10
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.commands.common import resolve_config_path  # noqa: E402
from dlzero.commands.match import usi_player  # noqa: E402
from dlzero.config import load_config  # noqa: E402
from dlzero.cpu import cpu_flags  # noqa: E402
from dlzero.gating.elo_fit import score_interval  # noqa: E402
from dlzero.gating.rating import load_batches, pair_tally, rate  # noqa: E402
from dlzero.gating.sprt import truncated_verdict  # noqa: E402
from dlzero.networks import default_network, find_network, load_networks  # noqa: E402
from dlzero.player_names import parse_anchor  # noqa: E402
from dlzero.rundir import RunDir  # noqa: E402

COLUMNS = ["network", "opponent", "time_control", "wins", "draws", "losses", "records"]  # records: `dlzero match`'s


def tally(rd: RunDir, me: str, opponent: str) -> tuple[int, int, int, int, int]:
    """`me`'s wins, draws and losses against `opponent` over every stored game, and the games lost on time
    by `me` and by `opponent`."""
    return pair_tally(load_batches(rd)[0], me, opponent)


def write_rows(path: Path, network: str, rows: list[dict]) -> None:
    """Replace `network`'s rows of `path` (other networks' rows are kept)."""
    kept = []
    if path.is_file():
        with path.open(newline="", encoding="utf-8") as f:
            kept = [r for r in csv.DictReader(f) if not (r["network"] == network and
                                                         any(r["opponent"] == x["opponent"] and
                                                             r["time_control"] == x["time_control"] for x in rows))]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept + rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--network", default="default", help="a shipped network's name, or default")
    parser.add_argument("--opponents", required=True, help="comma list of anchor names")
    parser.add_argument("--games", type=int, default=40, help="games per pairing (even)")
    parser.add_argument("--byoyomi", type=int, default=1000, help="ms a move for dlzero")
    parser.add_argument("--parallel", type=int, default=2, help="games played at once")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "equal-time", help="where the games are kept")
    parser.add_argument("--csv", type=Path, help="set this network's rows in this CSV")
    parser.add_argument("--sprt", metavar="ELO0,ELO1", help="stop each pairing by SPRT at these Elo bounds")
    parser.add_argument("--alpha", type=float, default=0.1, help="SPRT's false-H1 rate")
    parser.add_argument("--beta", type=float, default=0.1, help="SPRT's false-H0 rate")
    parser.add_argument("--step", type=int, default=10, help="with --sprt: games between looks (even)")
    parser.add_argument("--tolerance", type=int, help="ms past its byoyomi before a move loses on time "
                        "(rate.clock_tolerance_ms; default: the config's)")
    args = parser.parse_args()
    bounds = None
    if args.sprt:
        try:
            elo0, elo1 = (float(x) for x in args.sprt.split(","))
        except ValueError:
            sys.exit(f"equal_time.py: --sprt wants ELO0,ELO1, not {args.sprt!r}")
        if not elo0 < elo1 or args.step < 2 or args.step % 2:
            sys.exit("equal_time.py: --sprt wants ELO0 < ELO1 and an even --step >= 2")
        bounds = (elo0, elo1)
    networks = load_networks()
    net = default_network(networks) if args.network == "default" else find_network(args.network, networks)
    if net is None:
        sys.exit("equal_time.py: no network ships")
    me = usi_player(net.name, args.byoyomi)
    opponents = args.opponents.split(",")
    for name in [me, *opponents]:
        try:
            parse_anchor(name)
        except ValueError as exc:
            sys.exit(f"equal_time.py: {exc}")
    overrides = [f"rate.games={args.games}", f"rate.parallel={args.parallel}"]
    if args.tolerance is not None:
        overrides.append(f"rate.clock_tolerance_ms={args.tolerance}")
    cfg = load_config(resolve_config_path("tiny"), overrides)
    rd = RunDir.open(args.work) if (args.work / "config.yaml").exists() else RunDir.create(args.work, cfg)
    print(f"{net.name} at byoyomi {args.byoyomi} ms, Threads 1, EvalStreams 1, a move later than "
          f"{args.byoyomi + cfg.rate.clock_tolerance_ms} ms loses on time; cpu: {cpu_flags()}", flush=True)
    control = f"byoyomi {args.byoyomi} ms, Threads 1, EvalStreams 1"
    rows = []
    for opponent in opponents:
        targets = range(args.step, args.games + args.step, args.step) if bounds else [args.games]
        for target in targets:
            target = min(target, args.games)
            one = dataclasses.replace(cfg, rate=dataclasses.replace(cfg.rate, anchors=[opponent, me], games=target))
            rate(rd, one, [], progress=sys.stderr.isatty())
            w, d, lo, my_flags, their_flags = tally(rd, me, opponent)
            if bounds and (verdict := truncated_verdict(w, d, lo, bounds, args.alpha, args.beta, target >= args.games,
                                                        ("replace", "keep the shipped network"))):
                print(f"{net.name} vs {opponent}: SPRT({bounds[0]:g}, {bounds[1]:g}, alpha {args.alpha:g}, "
                      f"beta {args.beta:g}): {verdict}", flush=True)
                break
        s, low, high = score_interval(w, d, lo)
        print(f"{net.name} vs {opponent}: {w}-{d}-{lo}, score {s:.3f} [{low:.3f}, {high:.3f}]; lost on time: "
              f"{my_flags} by {net.name}, {their_flags} by the opponent", flush=True)
        rows.append({"network": net.name, "opponent": opponent, "time_control": control,
                     "wins": w, "draws": d, "losses": lo})
    if args.csv:
        write_rows(args.csv, net.name, rows)


if __name__ == "__main__":
    main()
