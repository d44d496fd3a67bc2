"""A teacher's win rate for a rated player through its lost games (a diagnosis, not a test).

    python scripts/judge_losses.py runs/NAME/run/rating/*gpsshogi*.json --player gen-0000 \\
        --judge "usi:/usr/games/gpsusi;LimitDepth=6" --games 8

For each game the player lost in the given `dlzero rate` batch files (the first `--games` of each file),
after the opening: the judge's win rate for the player after each of its moves (any `dlzero teach`
teacher spec: a USI engine, miniosl), every third one printed, and the three moves that cost most. A slow
slide says the player is outplayed move by move; one large drop says a tactic it did not see (what a
mate search or the mate guard, scripts/mate_blunders.py, can catch).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cshogi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.teacher.base import Query  # noqa: E402
from dlzero.teacher.spec import open_teacher  # noqa: E402


def trajectory(game: dict, player: str, judge) -> list[tuple[int, str, float]]:
    """(ply, move, the judge's win rate for the player after it) for each of the player's moves."""
    me = cshogi.BLACK if game["black"] == player else cshogi.WHITE
    board = cshogi.Board(game["start_sfen"])
    out = []
    for ply, usi in enumerate(game["moves"].split()):
        mine = board.turn == me
        board.push_usi(usi)
        if mine and ply >= game["opening_plies"] and not board.is_game_over():
            opponent = judge.label([Query(game["start_sfen"], board.copy())])[0].winrate
            out.append((ply, usi, 1.0 - opponent))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="rating batch files (JSON)")
    ap.add_argument("--player", default="gen-0000", help="the player whose losses are read")
    ap.add_argument("--judge", default="miniosl", help="a teacher spec (dlzero teach --teacher)")
    ap.add_argument("--games", type=int, default=8, help="games read from each file")
    args = ap.parse_args()
    judge = open_teacher(args.judge)
    try:
        for path in args.files:
            for game in json.loads(path.read_text(encoding="utf-8"))["games"][: args.games]:
                colour = "black" if game["black"] == args.player else "white" if game["white"] == args.player else None
                if colour is None or game["winner"] in (None, colour):
                    continue
                seq = trajectory(game, args.player, judge)
                if not seq:
                    continue
                print(f"{path.name} game {game['game']} ({game['plies']} plies): "
                      + " ".join(f"{w:.2f}" for _, _, w in seq[::3]), flush=True)
                drops = sorted(((a[2] - b[2], b) for a, b in zip(seq, seq[1:], strict=False)),
                               reverse=True)[:3]
                for cost, (ply, usi, w) in drops:
                    print(f"    ply {ply} {usi}: -{cost:.2f}, now {w:.2f}")
    finally:
        judge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
