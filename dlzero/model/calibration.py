"""Positions to calibrate an int8 model on, and other positions to check it on.

Static quantization fixes each activation's range from sample inputs, so the samples should be
the positions the model will meet: a run's own recent self-play first, else positions from
records or from any hcpe/hcpe3 file, else (a tiny fallback) positions from random games made on
the spot. Positions are encoded with the project's `Encoder` from a board replayed from its
game's start, so history planes (repetitions, last move) are exactly what search would feed.

The gate's positions come from *other games* than the calibration ones (games, not positions,
are split), so the gate measures how the quantized model generalises, not how it fits. They are
kept as boards too, so that the search gate (`dlzero.engine.int8_gate`) can search them.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import numpy as np

from dlzero.data.hcpe import read_hcpe
from dlzero.data.hcpe3 import list_shards, read_hcpe3
from dlzero.encoding import Encoder, new_batch_buffer
from dlzero.encoding.labels import legal_label_mask
from dlzero.errors import DataError

RECORD_SUFFIXES = (".csa", ".kif", ".kifu")


@dataclass
class CalibrationSet:
    """Encoded calibration positions, held-out positions with their legal-move masks, and their source."""

    calibration: np.ndarray  # (n, planes, 9, 9) float32
    holdout: np.ndarray  # (m, planes, 9, 9) float32
    holdout_legal: np.ndarray  # (m, NUM_LABELS) bool
    source: str  # one line: where the positions came from
    # the m held-out positions as boards with their game history (what `holdout` encodes), for the search gate
    holdout_boards: list[cshogi.Board] = field(default_factory=list)


def _encode(boards: list[cshogi.Board]) -> tuple[np.ndarray, np.ndarray]:
    planes = new_batch_buffer(len(boards))
    Encoder().encode_batch(boards, planes)
    return planes, np.stack([legal_label_mask(b) for b in boards]) if boards else np.zeros((0, 0), bool)


def _split_games(games: list, n_cal: int, n_hold: int, seed: int) -> tuple[list, list]:
    """Games shuffled, then dealt into a calibration and a hold-out group in proportion n_cal : n_hold."""
    order = list(range(len(games)))
    random.Random(seed).shuffle(order)
    cal, hold = [], []
    for i in order:
        # deal to the group that is furthest behind its share
        (cal if len(cal) * (n_cal + n_hold) <= len(cal + hold) * n_cal else hold).append(games[i])
    return cal, hold


def _sample_plies(lengths: list[int], n: int, rng: random.Random) -> dict[int, set[int]]:
    """`n` (game, ply) picks spread uniformly over all plies of the games; game index -> plies."""
    total = sum(lengths)
    picks = rng.sample(range(total), min(n, total))
    starts = np.cumsum([0, *lengths])
    chosen: dict[int, set[int]] = {}
    for flat in picks:
        g = int(np.searchsorted(starts, flat, side="right") - 1)
        chosen.setdefault(g, set()).add(flat - int(starts[g]))
    return chosen


def _boards_from_hcpe3_games(games: list, n: int, rng: random.Random) -> list[cshogi.Board]:
    chosen = _sample_plies([len(g.moves) for g in games], n, rng)
    boards = []
    for g, plies in sorted(chosen.items()):
        board = games[g].start_board()
        for ply, move in enumerate(games[g].moves):
            if ply in plies:
                boards.append(board.copy())  # cshogi's copy keeps the history
            board.push_move16(move.move16)
    return boards


def from_shards(paths: Iterable[Path], n_cal: int, n_hold: int, seed: int = 0) -> CalibrationSet:
    """Positions from hcpe3 shards (self-play games), calibration and hold-out from different games."""
    paths = list(paths)
    games = [g for p in paths for g in read_hcpe3(p) if g.moves]
    if len(games) < 2:
        raise DataError(str(paths[0].parent if paths else "<no shards>"), None,
                        f"{len(paths)} shard(s) hold {len(games)} game(s): too few to calibrate and check on "
                        "separate games")
    cal_games, hold_games = _split_games(games, n_cal, n_hold, seed)
    rng = random.Random(seed)
    cal, _ = _encode(_boards_from_hcpe3_games(cal_games, n_cal, rng))
    hold_boards = _boards_from_hcpe3_games(hold_games, n_hold, rng)
    hold, legal = _encode(hold_boards)
    where = paths[0].parent if len({p.parent for p in paths}) == 1 else "several folders"
    return CalibrationSet(cal, hold, legal, f"self-play: {len(games)} games in {len(paths)} shard(s) of {where}",
                          hold_boards)


def from_hcpe(path: Path, n_cal: int, n_hold: int, seed: int = 0, label: str = "") -> CalibrationSet:
    """Positions from an hcpe file (imported records): single positions, so no history planes.

    hcpe keeps no game boundaries, so the split is by contiguous halves of the file (records are
    written game after game, so the two halves share at most one game).
    """
    records = read_hcpe(path)
    if len(records) < 2:
        raise DataError(str(path), None, f"{len(records)} position(s), too few to calibrate and check")
    cut = len(records) * n_cal // (n_cal + n_hold)
    rng = np.random.default_rng(seed)

    def boards(part: np.ndarray, n: int) -> list[cshogi.Board]:
        out = []
        for rec in part[rng.choice(len(part), size=min(n, len(part)), replace=False)]:
            board = cshogi.Board()
            board.set_hcp(np.ascontiguousarray(rec["hcp"]))
            out.append(board)
        return out

    cal, _ = _encode(boards(records[:max(cut, 1)], n_cal))
    hold_boards = boards(records[max(cut, 1):], n_hold)
    hold, legal = _encode(hold_boards)
    return CalibrationSet(cal, hold, legal, label or f"hcpe: {len(records)} positions in {path}", hold_boards)


def from_records(folder: Path, n_cal: int, n_hold: int, seed: int = 0) -> CalibrationSet:
    """Positions from CSA/KIF records under `folder` (imported with `import_records`, crash-isolated)."""
    from dlzero.data.record_import import import_records

    with tempfile.TemporaryDirectory(prefix="dlzero-calib-") as tmp:
        out = Path(tmp) / "records.hcpe"
        report = import_records([str(folder)], str(out), progress=False)
        if not out.is_file():
            raise DataError(str(folder), None, "no usable game record (CSA/KIF) found to calibrate on")
        return from_hcpe(out, n_cal, n_hold, seed,
                         label=f"records: {report.positions} positions from {len(report.imported)} file(s) "
                               f"under {folder}")


def random_boards(n: int, seed: int = 0, min_ply: int = 10, max_ply: int = 80) -> list[cshogi.Board]:
    """Positions from random play, with their move history (as search would see them)."""
    rng = random.Random(seed)
    boards: list[cshogi.Board] = []
    while len(boards) < n:
        board = cshogi.Board()
        for _ in range(rng.randint(min_ply, max_ply)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if not board.is_game_over():
            boards.append(board)
    return boards


def from_random_games(n_cal: int, n_hold: int, seed: int = 0) -> CalibrationSet:
    """The fallback: one position from each of many random games (different seeds for the two sets)."""
    cal, _ = _encode(random_boards(n_cal, seed))
    hold_boards = random_boards(n_hold, seed + 1)
    hold, legal = _encode(hold_boards)
    return CalibrationSet(cal, hold, legal, f"random games: {n_cal + n_hold} positions (no run data given)",
                          hold_boards)


def from_path(path: str | Path, n_cal: int, n_hold: int, seed: int = 0) -> CalibrationSet:
    """Positions from a user-given file or folder: an hcpe3 shard, an hcpe file, or a folder of either
    shards or CSA/KIF records."""
    p = Path(path)
    if p.is_dir():
        shards = list_shards(p) or sorted(p.rglob("*.hcpe3"))
        if shards:
            return from_shards(shards, n_cal, n_hold, seed)
        if any(q.suffix.lower() in RECORD_SUFFIXES for q in p.rglob("*")):
            return from_records(p, n_cal, n_hold, seed)
        raise DataError(str(p), None, "calibration folder holds no .hcpe3 shard and no CSA/KIF record")
    if not p.is_file():
        raise DataError(str(p), None, "calibration data does not exist")
    if p.suffix == ".hcpe3":
        return from_shards([p], n_cal, n_hold, seed)
    if p.suffix == ".hcpe":
        return from_hcpe(p, n_cal, n_hold, seed)
    if p.suffix.lower() in RECORD_SUFFIXES:
        return from_records(p, n_cal, n_hold, seed)
    raise DataError(str(p), None, "calibration data must be an .hcpe3 shard, an .hcpe file, a CSA/KIF record "
                    "or a folder of them")
