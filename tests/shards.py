"""Self-play-like hcpe3 games for tests: random legal play with fixed seeds, written by dlzero's own writer."""

from __future__ import annotations

import cshogi
import numpy as np

from dlzero.data.hcpe import HCPE_DTYPE
from dlzero.data.hcpe3 import BLACK_WIN, WHITE_WIN, Hcpe3Record, MoveRecord


def selfplay_games(n: int, plies: int, seed: int) -> list[Hcpe3Record]:
    """`n` random legal games; every ply after the second carries three candidates' visit counts (so it is a
    training target, as a full search's ply), the first two none (as self-play's random opening plies)."""
    rng = np.random.default_rng(seed)
    games = []
    for g in range(n):
        board = cshogi.Board()
        game = Hcpe3Record.from_board(board)
        for ply in range(plies):
            legal = [m & 0xFFFF for m in board.legal_moves]
            picks = rng.choice(legal, size=min(3, len(legal)), replace=False)
            cands = (np.zeros((0, 2), np.uint16) if ply < 2 else
                     np.array([[m, c] for m, c in zip(picks, (60, 30, 10), strict=False)], np.uint16))
            game.moves.append(MoveRecord(int(picks[0]), int(rng.integers(-500, 500)), cands))
            board.push_move16(int(picks[0]))
        game.result = BLACK_WIN if g % 2 else WHITE_WIN
        games.append(game)
    return games


def hcpe_records(games: list[Hcpe3Record]) -> np.ndarray:
    """hcpe records of `games`, one per ply, a game's records one after another (as import-records writes)."""
    rows = []
    for game in games:
        board = game.start_board()
        for move in game.moves:
            hcp = np.zeros(32, np.uint8)
            board.to_hcp(hcp)
            rows.append((hcp, move.eval, move.move16, game.result, 0))
            board.push_move16(move.move16)
    return np.array(rows, dtype=HCPE_DTYPE)

