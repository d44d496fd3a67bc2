"""Held-out sets of supervised training that cannot flatter: whole games, never single positions.

Every position of a game shares the game's result, and its neighbours share most of its board. Held out
one position at a time (a hash of each position, the rule until issue 38), ~95 % of a held-out position's
game-mates were trained on: a student that had memorised its games scored a value loss of 0.305 held out
and 0.667 on games it never saw, and the held-out figures ranked two students the wrong way round. So
`dlzero train --hcpe` (and the warm start of `dlzero loop --init-from`) holds out whole games:

- hcpe3 files hold games: a game is held out when a seeded hash of its start position and moves falls
  below `train.holdout_fraction`. Its side depends on the game and `train.seed` alone, not on the file or
  its order, so a game found in two files, or kept when `dlzero teach` adds parts to its output, stays on
  its side.
- hcpe files have no game ids, but `dlzero import-records` and dlshogi's tools write a game's positions one
  after another: a record whose position is its predecessor's after the predecessor's bestMove16 continues
  that game, so the runs of such records are the games, held out the same way. A file whose records do not
  follow one another (shuffled, deduplicated) leaves runs of one record; the caller warns that a separate
  held-out file is then the only clean split.
- `train.val_files` (`dlzero train --val FILE`) names the held-out set outright, as dlshogi's trainer takes
  a test file; nothing is held out of the training files then.

A held-out position that is also a training position (the same position reached by the same move, the
inputs the network sees: the end of an opening line many games share, the start position) is not scored,
since its targets were trained on. With a fraction above 0 and two games or more, at least one game is
held out and at least one trained on, so a small file still gets a figure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import cshogi
import numpy as np

from dlzero.data.hcpe3 import Hcpe3Record
from dlzero.train.buffer import PositionBuffer


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise: every input bit moves every output bit (uint64 wraps on purpose)."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


def _row_hash(words: np.ndarray) -> np.ndarray:
    """One uint64 per row of an (n, k) uint64 array."""
    h = np.full(len(words), np.uint64(0x9E3779B97F4A7C15), dtype=np.uint64)
    for k in range(words.shape[1]):
        h = _mix(h ^ words[:, k])
    return h


def position_keys(buf: PositionBuffer) -> np.ndarray:
    """A uint64 per position of `buf` that tells apart what the network is given: the position before the
    last move and that move (two copies of a key are the same training input, up to history planes)."""
    words = buf.base_hcp.view(np.uint64).reshape(len(buf), 4)
    return _row_hash(np.column_stack([words, buf.last_move.astype(np.uint64)]))


def game_keys(games: list[Hcpe3Record]) -> np.ndarray:
    """A uint64 per game, from its start position and its moves (the same game gets the same key)."""
    keys = []
    for game in games:
        moves = np.fromiter((m.move16 for m in game.moves), np.uint16, len(game.moves))
        digest = hashlib.blake2b(game.start_hcp.tobytes() + moves.tobytes(), digest_size=8).digest()
        keys.append(int.from_bytes(digest, "little"))
    return np.array(keys, dtype=np.uint64)


def record_game_keys(records: np.ndarray) -> tuple[np.ndarray, int]:
    """(a uint64 per hcpe record: the key of the run of records it belongs to, the number of runs).

    A run (module docstring) is a game as an hcpe file holds it: each record's position is the one before
    it after that one's bestMove16. Its key hashes its positions and moves, so the same game in another
    file gets the same key. Records must be validated (every bestMove16 legal: `read_hcpe` does it).
    """
    n = len(records)
    if n == 0:
        return np.zeros(0, dtype=np.uint64), 0
    hcp = np.ascontiguousarray(records["hcp"])
    moves = records["bestMove16"].astype(np.int64)
    after = np.empty_like(hcp)
    board = cshogi.Board()
    for i, move in enumerate(moves.tolist()):
        board.set_hcp(hcp[i])
        board.push_move16(move)
        board.to_hcp(after[i])
    starts = np.ones(n, dtype=bool)
    starts[1:] = ~(after[:-1] == hcp[1:]).all(axis=1)
    per_record = _row_hash(np.column_stack([hcp.view(np.uint64).reshape(n, 4), moves.astype(np.uint64)]))
    first = np.flatnonzero(starts)
    with np.errstate(over="ignore"):
        run_keys = _mix(np.add.reduceat(per_record, first))
    return run_keys[np.cumsum(starts) - 1], len(first)


def _unit(keys: np.ndarray, seed: int) -> np.ndarray:
    """A seeded uniform number in [0, 1) per key."""
    with np.errstate(over="ignore"):
        salt = _mix(np.array([seed], dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1))
    return (_mix(keys ^ salt) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass
class GameSplit:
    """Which positions are held out, and of how many games."""

    held: np.ndarray  # bool per position
    games: int
    held_games: int


def split_games(keys: np.ndarray, fraction: float, seed: int) -> GameSplit:
    """Hold out about `fraction` of the games whose positions carry `keys` (one per position: its game's),
    each game whole (module docstring)."""
    games, inverse = np.unique(keys, return_inverse=True)
    u = _unit(games, seed)
    held = u < fraction
    if fraction > 0 and len(games) >= 2:
        if not held.any():
            held[np.argmin(u)] = True
        if held.all():
            held[np.argmax(u)] = False
    return GameSplit(held[inverse.reshape(-1)], len(games), int(held.sum()))


def unseen(held: PositionBuffer, train: PositionBuffer) -> np.ndarray:
    """Bool per position of `held`: not also a training position (module docstring)."""
    return ~np.isin(position_keys(held), position_keys(train))


@dataclass
class HoldoutReport:
    """What a supervised run held out, for its log line and report."""

    source: str  # "by game", or the held-out files
    games: int  # games (runs of records, for hcpe) the held-out set was drawn from
    held_games: int
    positions: int  # held-out positions scored
    unscored: int  # held-out positions left out: also training positions
    note: str = ""  # what makes the split less clean (records that are not games)

    def __str__(self) -> str:
        if self.source == "by game":
            head = f"held out: {self.held_games:,} of {self.games:,} games, {self.positions:,} positions, by game"
        else:
            head = f"held out: {self.source} ({self.held_games:,} games), {self.positions:,} positions"
        extra = [f"{self.unscored:,} more are also training positions, not scored"] if self.unscored else []
        return head + "".join(f"; {x}" for x in [*extra, *([self.note] if self.note else [])])
