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
The games are played on dlzero's driver by the rules every game of dlzero goes by (`dlzero.play.play_rules`:
sennichite at the fourth occurrence, perpetual check lost by the side giving it, mate, the entering-king
declaration, a draw past `--max-plies`), and their results stored as self-play stores them
(`dlzero.play.record`), so a perpetual check or a declaration is scored here as in training data.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cshogi
import numpy as np

from dlzero.config import SearchConfig
from dlzero.data.hcpe3 import Hcpe3Record, MoveRecord, write_hcpe3
from dlzero.game_end import END_DECLARATION, Verdict
from dlzero.play import Game, play_lockstep, play_rules
from dlzero.play.record import opening_record, result_byte
from dlzero.play.usi_client import Go, UsiClient
from dlzero.teacher.usi import score_cp


def _last_score(infos: list[str]) -> int:
    """The last `score` of a search's info lines in cp from the mover's side (mates as the teacher scores them)."""
    scores = [cp for line in infos if (cp := score_cp(line.split())) is not None]
    return scores[-1] if scores else 0


@dataclass(eq=False, kw_only=True)
class ValidationGame(Game):
    """A game in progress (`dlzero.play.Game`) and its hcpe3 record so far, the opening's plies replay-only."""

    record: Hcpe3Record


class EnginePlayer:
    """The engine on both sides of the games (a `dlzero.play.MoveChooser`), each of its plies recorded as a
    target before the move is played: the engine's move as the single candidate, its last score as the eval.

    `bestmove resign` resigns; `bestmove win` is a declaration win for the mover, as the teacher takes it (the
    rules end a game the project's rule lets the mover declare before the engine is asked). An illegal move
    stops the run: a validation set must not hold a game the engine did not really play."""

    name = "engine"

    def __init__(self, engine: UsiClient, limits: Go) -> None:
        self.engine = engine
        self.limits = limits

    def choose(self, games: Sequence[ValidationGame]) -> list[int | None]:
        return [self._move(game) for game in games]

    def _move(self, game: ValidationGame) -> int | None:
        board = game.board
        infos, reply = self.engine.search(board, self.limits)
        best = reply[1] if len(reply) > 1 else ""
        if best == "win":
            game.end = Verdict(board.turn, END_DECLARATION)
        if best in ("resign", "win"):
            return None
        move = board.move_from_usi(best)
        if not board.is_legal(move):
            raise RuntimeError(f"engine played an illegal move {best} in {board.sfen()}")
        m16 = cshogi.move16(move)
        game.record.moves.append(MoveRecord(m16, _last_score(infos), np.array([[m16, 1]], np.uint16)))
        return move


def opening_board(opening: list[str], rng: random.Random) -> cshogi.Board:
    """The start position after `opening`'s USI moves and two random plies (fewer where the game ends)."""
    board = cshogi.Board()
    for usi in opening:
        board.push_usi(usi)
    for _ in range(2):
        legal = list(board.legal_moves)
        if not legal:
            break
        board.push(rng.choice(legal))
    return board


def play_game(engine: UsiClient, board: cshogi.Board, max_plies: int, nodes: int,
              declaration: str = SearchConfig.entering_king_rule) -> Hcpe3Record:
    """One game of the engine against itself from `board` (its history stored as replay-only plies), played
    on dlzero's driver by the rules every game of dlzero goes by (`dlzero.play.play_rules`: sennichite at the
    fourth occurrence, perpetual check lost by the checker, mate, the `declaration` rule, a draw past
    `max_plies`), its result stored as self-play stores one (`dlzero.play.record.result_byte`)."""
    engine.new_game()
    # GPS Shogi takes no `go nodes`/`go depth`; it stops at its LimitDepth (the byoyomi only guards a hang)
    limits = Go(nodes=nodes) if nodes else Go(byoyomi_ms=1000)
    game = ValidationGame(board, opening_plies=len(board.history), record=opening_record(board))
    pending = [game]
    play_lockstep([EnginePlayer(engine, limits)], lambda: pending.pop() if pending else None, lambda _: None,
                  play_rules(max_plies, declaration), parallel=1, reuse_trees=False)
    assert game.end is not None, "the driver returns only when its games are over"
    game.record.result = result_byte(game.end)
    return game.record


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
            games.append(play_game(engine, opening_board(opening, rng), args.max_plies, nodes))
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
