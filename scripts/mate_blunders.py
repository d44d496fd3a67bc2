"""Where a rated player's lost games turned, by df-pn (a diagnosis, not a test).

    python scripts/mate_blunders.py runs/NAME/run/rating/*gpsshogi*.json --player gen-0000 --nodes 20000

For every game the player lost in the given `dlzero rate` batch files, after the opening: the first ply
where it had a mate df-pn proves (within `--nodes`) and did not start it, and the first where its move
handed the opponent a mate df-pn proves while another legal move did not (the move played, the mate's
length, a move that avoided it). It prints one line per game and the counts; the mate guard
(`search.mate_guard_nodes`) came from what this found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cshogi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.search.guard import DFPN_MAX_PLIES, opponent_mate  # noqa: E402


def first_turns(game: dict, player: str, dfpn: cshogi.DfPn) -> tuple[int | None, tuple | None]:
    """(ply of the first mate missed, (ply, move played, mate plies, an avoiding move) of the first
    mate handed over while another move avoided it); None where there was none."""
    me = cshogi.BLACK if game["black"] == player else cshogi.WHITE
    board = cshogi.Board(game["start_sfen"])
    missed = handed = None
    for ply, usi in enumerate(game["moves"].split()):
        if board.turn == me and ply >= game["opening_plies"]:
            if missed is None and opponent_mate(board, dfpn)[0]:  # the side to move (the player) mates
                mate = dfpn.get_move(board)
                if cshogi.move_to_usi(mate) != usi:
                    missed = ply
            if handed is None:
                board.push_usi(usi)
                plies = opponent_mate(board, dfpn)[0]
                board.pop()
                if plies:
                    for move in board.legal_moves:
                        board.push(move)
                        safe = not opponent_mate(board, dfpn)[0]
                        board.pop()
                        if safe:
                            handed = (ply, usi, plies, cshogi.move_to_usi(move))
                            break
        board.push_usi(usi)
    return missed, handed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path, help="rating batch files (JSON)")
    ap.add_argument("--player", default="gen-0000", help="the player whose losses are read")
    ap.add_argument("--nodes", type=int, default=20_000, help="df-pn nodes a position")
    args = ap.parse_args()
    dfpn = cshogi.DfPn(DFPN_MAX_PLIES, args.nodes)
    lost = missed_n = handed_n = 0
    for path in args.files:
        data = json.loads(path.read_text(encoding="utf-8"))
        for game in data["games"]:
            colour = "black" if game["black"] == args.player else "white" if game["white"] == args.player else None
            if colour is None or game["winner"] in (None, colour):
                continue
            lost += 1
            missed, handed = first_turns(game, args.player, dfpn)
            missed_n += missed is not None
            handed_n += handed is not None
            where = "-" if handed is None else \
                f"ply {handed[0]} {handed[1]} (mated in {handed[2]}; {handed[3]} avoids it)"
            print(f"{path.name} game {game['game']}: {game['plies']} plies; mate missed at ply {missed}; "
                  f"mate handed over: {where}", flush=True)
    print(f"{lost} lost games: a mate missed in {missed_n}, a mate handed over in {handed_n} "
          f"(df-pn {args.nodes} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
