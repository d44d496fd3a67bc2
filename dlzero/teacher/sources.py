"""Where the positions to label come from, always with the history that led to them.

- The teacher's own games (dlshogi's way): each starts from a line of an opening suite (the shipped
  `configs/openings/gate.txt`, or `--openings FILE` with one `startpos moves ...` / `sfen ...` line
  each; `startpos` for the start position alone). The suite's moves are kept as replay-only plies.
  A suite holding start positions of the rating suite (`configs/openings/rating.txt`) is refused
  unless allowed: ratings are played from there, so no student may learn them.
- Existing games, relabelled ply by ply with their own moves and results kept: hcpe3 files (a run's
  self-play shards, i.e. on-policy positions; give the run directory and its shards are found) and
  CSA / KIF / KI2 records (read through `dlzero.data.records`, in a child process as
  `dlzero import-records` does). Folders are searched recursively. hcpe files are not a source:
  they hold positions without their history.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import cshogi

from dlzero.data.hcpe3 import RESULT_DRAW, SHARD_SUFFIX, Hcpe3Record, read_hcpe3
from dlzero.data.records import RECORD_SUFFIXES, read_games
from dlzero.errors import DataError
from dlzero.play.openings import load_openings, refuse_rating_openings
from dlzero.teacher.base import TeacherError

log = logging.getLogger(__name__)

GAME_SUFFIXES = (SHARD_SUFFIX, *RECORD_SUFFIXES)


@dataclass(frozen=True)
class SourceRecord:
    """A game to relabel: its start, every move played (move16), and its hcpe3 result byte."""

    start_sfen: str
    moves: tuple[int, ...]
    result: int


def source_record(game: Hcpe3Record) -> SourceRecord:
    """An hcpe3 game (a self-play shard's) as a game to relabel."""
    return SourceRecord(game.start_board().sfen(), tuple(m.move16 for m in game.moves), game.result)


def opening_lines(path: str | None, allow_rating: bool = False) -> list[str]:
    """The start lines of the teacher's own games: a suite file, the shipped suite (None), or `startpos`;
    one that starts rating games is refused unless `allow_rating`."""
    lines = ["startpos"] if path == "startpos" else load_openings(path)
    if not allow_rating:
        refuse_rating_openings(lines, path or "the shipped gate suite",
                               "--allow-rating-openings (teach.allow_rating_openings)")
    return lines


def find_game_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """hcpe3 and record files among `paths`, folders searched recursively, sorted, hidden files skipped."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found |= {f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(GAME_SUFFIXES)
                      and not f.name.startswith(".")}
        elif p.is_file() and p.name.lower().endswith(GAME_SUFFIXES):
            found.add(p)
        else:
            raise TeacherError(f"source '{p}': not a folder, an hcpe3 file or a CSA/KIF/KI2 record")
    return sorted(found)


def read_source_games(paths: Iterable[str | os.PathLike[str]]) -> list[SourceRecord]:
    """Every game of the source files, in file order; unreadable files are skipped with a warning."""
    games: list[SourceRecord] = []
    for path in find_game_files(paths):
        try:
            if path.name.lower().endswith(SHARD_SUFFIX):
                games += [source_record(g) for g in read_hcpe3(path)]
            else:
                for r in read_games(path):
                    if r.moves:
                        result = RESULT_DRAW if r.winner is None else r.winner
                        games.append(SourceRecord(r.sfen, tuple(cshogi.move16(m) for m in r.moves), result))
        except (DataError, ValueError) as exc:
            log.warning("skipping %s: %s", path, exc)
    return games
