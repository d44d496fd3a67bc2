"""Import CSA, KIF and KI2 game records into one hcpe file for supervised training.

Each game (read by dlzero.data.records, in a child process: dlzero.data.isolated) gives one hcpe
record per move: the position before the move (hcp), the move as bestMove16, eval 0 (records have
no engine eval) and gameResult from the record. Decisions:

- A game with no known winner (中断, %CHUDAN, no result at all) is still imported, as gameResult 0,
  because its moves are good policy targets; a note says so, so a value-sensitive user can leave
  such files out. The hcpe2 flag bits are not set, so plain hcpe readers (dlshogi's among them)
  read the file unchanged.
- Illegal moves. Every move is checked against cshogi's legal moves while replaying. At the first
  illegal (or unreadable) move the game is cut: the moves before it are imported with the
  record's result, and a note names the move. A file that yields no position at all is skipped.
- Positions hcp cannot hold (no king, as in tsume problems) are skipped with the reason.
- A file that crashes the parser or takes longer than `timeout_s` is skipped with that reason
  ("parser crashed (signal 11, SIGSEGV)"); the import goes on with the rest.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import cshogi
import numpy as np
from tqdm import tqdm

from dlzero.data.hcpe import HCPE_DTYPE, find_bad_hcp, write_hcpe
from dlzero.data.hcpe3 import RESULT_DRAW
from dlzero.data.isolated import DEFAULT_TIMEOUT_S, run_isolated
from dlzero.data.records import RECORD_SUFFIXES, ParsedRecord, legal_prefix, parse_record_file

# ---------------------------------------------------------------- replay


def _replay(game: ParsedRecord) -> tuple[np.ndarray, list[str]]:
    """hcpe records for the legal prefix of a game, and notes about what was cut or assumed."""
    notes = list(game.notes)
    moves, stop = legal_prefix(game)
    count = len(moves)
    if not count and stop is not None:  # the board may not even be one cshogi takes (a refused start)
        return np.zeros(0, HCPE_DTYPE), notes + [f"{stop}; no moves imported"]
    board = cshogi.Board(game.sfen)
    records = np.zeros(count, HCPE_DTYPE)
    for i, move in enumerate(moves):
        board.to_hcp(records["hcp"][i])
        records["bestMove16"][i] = cshogi.move16(move)
        board.push(move)
    if stop is not None:
        notes.append(f"{stop} in {board.sfen()}; imported the {count} moves before it")
    bad = find_bad_hcp(records["hcp"]) if count else None
    if bad is not None:
        return records[:0], [f"position cannot be stored as hcp: {bad[1]}"]
    if count and game.winner is None:
        notes.append(f"no winner known ({game.ending}): imported with gameResult 0 (draw)")
    records["gameResult"] = game.winner or RESULT_DRAW
    return records, notes


class _FileResult(NamedTuple):
    """What the child process sends back for one file: records, or the reason it was skipped."""

    path: str
    records: np.ndarray | None
    reason: str | None
    notes: list[str]


def convert_file(path: str) -> _FileResult:
    """Parse and replay one record file; runs in the child process, where a crash is survivable
    (an exception, from cshogi or decoding, becomes the file's reason there: see isolated.py)."""
    games = parse_record_file(path)
    chunks: list[np.ndarray] = []
    notes: list[str] = []
    for index, game in enumerate(games):
        records, game_notes = _replay(game)
        prefix = f"game {index + 1}: " if len(games) > 1 else ""
        notes.extend(prefix + note for note in game_notes)
        chunks.append(records)
    if sum(len(c) for c in chunks) == 0:
        return _FileResult(path, None, "; ".join(notes) or "no moves", [])
    return _FileResult(path, np.concatenate(chunks), None, notes)


# ---------------------------------------------------------------- public API


@dataclass
class ImportReport:
    """What `import_records` did: (path, positions) imported, (path, reason) skipped, notes."""

    out: str
    imported: list[tuple[str, int]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def positions(self) -> int:
        return sum(n for _, n in self.imported)


def find_record_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files as given, and *.csa / *.kif / *.kifu found recursively (sorted) under directories."""
    found: list[str] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(
                str(p) for p in sorted(path.rglob("*")) if p.is_file() and p.suffix.lower() in RECORD_SUFFIXES
            )
        else:
            found.append(str(path))
    return found


def import_records(
    paths: list[str], out: str, progress: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S
) -> ImportReport:
    """Convert record files (or directories of them) into one hcpe file at `out`.

    Every file ends up in `report.imported` or `report.skipped`; nothing a file contains can stop
    the import. `out` is written atomically, and only if at least one position was imported.
    """
    files = find_record_files(paths)
    report = ImportReport(out=str(out))
    chunks: list[np.ndarray] = []
    with tqdm(total=len(files), file=sys.stderr, disable=not progress, unit="file", desc="import") as bar:
        for outcome in run_isolated("dlzero.data.record_import:convert_file", files, timeout_s):
            bar.update(1)
            result = outcome.value if outcome.error is None else _FileResult(outcome.path, None, outcome.error, [])
            if result.records is None:
                report.skipped.append((result.path, result.reason or "unknown"))
            else:
                chunks.append(result.records)
                report.imported.append((result.path, len(result.records)))
            report.notes.extend((result.path, note) for note in result.notes)
    if chunks:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_hcpe(out, np.concatenate(chunks))
    return report
