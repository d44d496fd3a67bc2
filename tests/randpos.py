"""Random positions for tests: cshogi random play with fixed seeds (reproducible, no files).

Captures are preferred with probability `capture_bias`, so hands fill up and positions with many
drops, promoted pieces and kings under attack turn up often, not only quiet openings.
"""

from __future__ import annotations

import random

import cshogi

# Positions where drops dominate the move list: bare kings plus full hands.
MANY_DROPS_SFENS = [
    "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1",
    "4k4/9/9/9/9/9/9/9/4K4 w 2R2B4G4S4N4L9P9p 1",
    "k8/9/9/9/9/9/9/9/8K b 2R2B4G4S4N4L18P 1",
    "8k/9/9/9/9/9/9/9/K8 w 2r2b4g4s4n4l18p 1",
    "ln5nl/1r3kgb1/p1pppp1pp/9/9/9/P1PPPP1PP/1B2KG1R1/LN5NL b GSPgsp 1",
]


def random_games(n_games: int, seed: int, max_ply: int = 160, capture_bias: float = 0.6):
    """Yield (board, moves) after each ply of `n_games` random games; `board` is live: copy what you keep."""
    rng = random.Random(seed)
    for _ in range(n_games):
        board = cshogi.Board()
        moves: list[int] = []
        for _ply in range(max_ply):
            legal = list(board.legal_moves)
            if not legal:
                break
            captures = [m for m in legal if cshogi.move_cap(m)]
            pool = captures if captures and rng.random() < capture_bias else legal
            move = rng.choice(pool)
            board.push(move)
            moves.append(move)
            yield board, moves


def random_sfens(n: int, seed: int, max_ply: int = 160, capture_bias: float = 0.6,
                 stride: int = 3) -> list[str]:
    """`n` SFENs taken every `stride` plies from random games (both sides to move, all game phases)."""
    out: list[str] = []
    rng = random.Random(seed + 1)
    while len(out) < n:
        for board, moves in random_games(1, rng.randrange(1 << 30), max_ply, capture_bias):
            if len(moves) % stride == rng.randrange(stride) and not board.is_game_over():
                out.append(board.sfen())
                if len(out) == n:
                    break
    return out


def random_histories(n: int, seed: int, max_ply: int = 160, capture_bias: float = 0.6) -> list[list[int]]:
    """`n` move lists from the start position (replay them to get boards with history)."""
    rng = random.Random(seed)
    out: list[list[int]] = []
    while len(out) < n:
        target = rng.randint(1, max_ply)
        for board, moves in random_games(1, rng.randrange(1 << 30), target, capture_bias):
            if len(moves) == target or not list(board.legal_moves):
                break
        out.append(list(moves))
    return out


def board_from_moves(moves: list[int]) -> cshogi.Board:
    """A cshogi Board from the start position with `moves` played (history kept)."""
    board = cshogi.Board()
    for m in moves:
        board.push(m)
    return board
