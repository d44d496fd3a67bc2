"""Refit stored W-D-L tables and print what the games say (not a test; for benchmark write-ups).

    python scripts/refit_scores.py docs/benchmarks/learning-2h.csv docs/benchmarks/ladder.csv --priors 2,1,0.1

Reads CSV files of pairings, either `player,opponent,wins,draws,losses` (ladder.csv) or
`arm,minutes,generation,opponent,wins,draws,losses` (learning-2h.csv: the player is `ARM@MINUTES`), and
prints, for each prior (`--priors`, virtual draws per pairing), `dlzero.gating.elo_fit.report_lines`: every
pairing's W-D-L with its Wilson interval, then an Elo only for players that informative pairings (neither
side swept) connect, named by its prior and its zero. `--joint` also prints the old joint fit (random
pinned, every pairing counted, sweeps included) so a reader sees how far the prior moved a headline.
A component without the pin is measured from `--zero`. `--diff A,B` prints the Elo of B minus A in each
fit that rates both in one component.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.gating.elo_fit import GameResult, fit_connected, fit_ratings, report_lines  # noqa: E402


def read_games(path: Path) -> list[GameResult]:
    """Every game of a pairing table, as single results (wins 1, draws 1/2, losses 0, from the player's side)."""
    games: list[GameResult] = []
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            player = row["player"] if "player" in row else f"{row['arm']}@{row['minutes']}"
            for column, score in (("wins", 1.0), ("draws", 0.5), ("losses", 0.0)):
                games += [GameResult(player, row["opponent"], score)] * int(row[column] or 0)
    return games


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="+", type=Path, help="pairing tables")
    parser.add_argument("--priors", default="1", help="virtual draws per pairing, comma list (default 1)")
    parser.add_argument("--pin", default="random", help="the player at 0 where it is connected")
    parser.add_argument("--zero", default="alphabeta:1",
                        help="the player at 0 of a component that the pin is not in (default alphabeta:1)")
    parser.add_argument("--joint", action="store_true", help="also the joint fit of every game (the old report)")
    parser.add_argument("--diff", action="append", default=[], metavar="A,B", help="Elo of B minus A")
    args = parser.parse_args()
    games = [g for path in args.csv for g in read_games(path)]
    for prior in (float(p) for p in args.priors.split(",")):
        fit = fit_connected(games, args.pin, prior, order=[args.zero])
        print(f"== {prior:g} virtual draw(s) per pairing: by informative pairings ==")
        print("\n".join(report_lines(fit)))
        fits = [("connected", fit)]
        if args.joint:
            joint = fit_ratings(games, args.pin, prior)
            print(f"\n-- joint fit, every game ({joint.label(args.pin)}) --")
            for r in joint.ratings:
                print(f"{r.player:<44} {r.elo:>+7.0f}   [{r.elo_low:+.0f}, {r.elo_high:+.0f}]")
            fits.append(("joint", joint))
        for pair in args.diff:
            a, b = pair.split(",")
            for kind, f in fits:
                rated = f.by_player()
                if a in rated and b in rated and rated[a].reference == rated[b].reference:
                    print(f"{kind}: {b} - {a} = {rated[b].elo - rated[a].elo:+.0f}")
                else:
                    print(f"{kind}: {a} and {b} are not rated on one scale")
        print()


if __name__ == "__main__":
    main()
