"""Make the fixed validation set: a real engine playing itself, written as hcpe3 games.

    python scripts/make_validation_set.py --games 96 --out configs/validation/fairy-stockfish-n20k.hcpe3

Why a fixed set: the held-out games of a run come from that run's own (weak, changing) model, so
their curves cannot be compared between runs. Games that no run trains on, played by a real engine,
give one yardstick for every run: policy top-1 against the engine's move, value loss against the
result of its game. Each game starts from a line of the gate's opening suite plus two random plies
(so no two games are alike) and is played to its end by the engine at a fixed budget: Fairy-Stockfish
at `go nodes N` by default (about 40 ms a move at 20,000 nodes), or GPS Shogi at a `LimitDepth`
(`--engine /usr/games/gpsusi`; about 0.4 s a move at depth 4 on this machine, ten times slower).
The opening plies are stored for replay only (no candidates); every later ply is a target
whose single candidate is the engine's move and whose eval is the engine's score (cp, mover's view).
A game that reaches `--max-plies` is stored as a draw by move cap, as self-play stores one.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import cshogi
import numpy as np

from dlzero.data.hcpe3 import (
    BLACK_WIN,
    FLAG_MAX_MOVES,
    FLAG_REPETITION,
    RESULT_DRAW,
    WHITE_WIN,
    Hcpe3Record,
    MoveRecord,
    write_hcpe3,
)
from dlzero.play.usi_client import Go, UsiClient
from dlzero.teacher.usi import score_cp


def _last_score(infos: list[str]) -> int:
    """The last `score` of a search's info lines in cp from the mover's side (mates as the teacher scores them)."""
    scores = [cp for line in infos if (cp := score_cp(line.split())) is not None]
    return scores[-1] if scores else 0


def play_game(engine: UsiClient, opening: list[str], rng: random.Random, max_plies: int, nodes: int) -> Hcpe3Record:
    """One game from `opening` plus two random plies, then the engine on both sides."""
    board = cshogi.Board()
    record = Hcpe3Record.from_board(board)
    for usi in opening:
        move = board.move_from_usi(usi)
        record.moves.append(MoveRecord(cshogi.move16(move)))
        board.push(move)
    for _ in range(2):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        record.moves.append(MoveRecord(cshogi.move16(move)))
        board.push(move)
    engine.new_game()
    # GPS Shogi takes no `go nodes`/`go depth`; it stops at its LimitDepth (the byoyomi only guards a hang)
    limits = Go(nodes=nodes) if nodes else Go(byoyomi_ms=1000)
    while True:
        if board.is_game_over():
            record.result = WHITE_WIN if board.turn == cshogi.BLACK else BLACK_WIN
            return record
        if board.is_draw() == cshogi.REPETITION_DRAW:
            record.result = RESULT_DRAW | FLAG_REPETITION
            return record
        if board.move_number > max_plies:
            record.result = RESULT_DRAW | FLAG_MAX_MOVES
            return record
        infos, reply = engine.search(board, limits)
        best = reply[1] if len(reply) > 1 else ""
        if best == "resign" or best == "win":
            loser_black = (board.turn == cshogi.BLACK) == (best == "resign")
            record.result = WHITE_WIN if loser_black else BLACK_WIN
            return record
        move = board.move_from_usi(best)
        if not board.is_legal(move):
            raise RuntimeError(f"engine played an illegal move {best} in {board.sfen()}")
        m16 = cshogi.move16(move)
        record.moves.append(MoveRecord(m16, _last_score(infos), np.array([[m16, 1]], np.uint16)))
        board.push(move)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=int, default=96)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--engine", default="/usr/games/fairy-stockfish")
    p.add_argument("--nodes", type=int, default=20000, help="go nodes N (0: byoyomi 1000, for GPS Shogi)")
    p.add_argument("--depth", type=int, default=4, help="GPS Shogi's LimitDepth (gpsusi only)")
    p.add_argument("--openings", type=Path, default=Path(__file__).resolve().parents[1] / "configs" / "openings"
                   / "gate.txt")
    p.add_argument("--max-plies", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    lines = [ln.split() for ln in args.openings.read_text().splitlines() if ln.startswith("startpos")]
    gps = "gpsusi" in args.engine
    options = {"LimitDepth": args.depth, "BookDepth": 0} if gps else {}
    engine = UsiClient(args.engine, options=options)
    nodes = 0 if gps else args.nodes
    source = (f"{args.engine} LimitDepth={args.depth} BookDepth=0" if gps else f"{args.engine} go nodes {nodes}")
    games: list[Hcpe3Record] = []
    t0 = time.perf_counter()
    try:
        for g in range(args.games):
            line = rng.choice(lines)
            opening = line[2:] if len(line) > 2 and line[1] == "moves" else []
            games.append(play_game(engine, opening, rng, args.max_plies, nodes))
            plies = sum(len(x.moves) for x in games)
            print(f"game {g + 1}/{args.games}: {len(games[-1].moves)} plies, result {games[-1].result}, "
                  f"{plies} plies in all, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    finally:
        engine.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_hcpe3(args.out, games, {"source": f"{source}, self-play",
                                  "openings": args.openings.name, "seed": args.seed})
    print(f"wrote {len(games)} games to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
