"""hcpe3: dlshogi's self-play game records, one variable-length record per game.

Layout (little-endian; `shared/reference/dlshogi.md` 6.4), so dlshogi's tools read our shards and
we read theirs:

    header    hcp u8[32] (start position) | moveNum u16 | result u8 | opponent u8      36 bytes
    per ply   selectedMove16 u16 | eval s16 | candidateNum u16                        6 bytes
              candidateNum x (move16 u16 | visits u16)                               4 bytes each

`result` bits 0-1: 0 draw, 1 Black won, 2 White won; flags 0x4 repetition, 0x8 declaration
(nyugyoku), 0x10 max moves. `opponent`: 0 self-play, 1/2 an external engine played Black/White.
A ply with candidateNum 0 is kept for replay only and is not a training target.

Each shard has a JSON sidecar (`NAME.hcpe3.json`): its game and move counts, its size and the
sha256 of its bytes, and the writer's metadata. The shard is written first and the sidecar after
it, both atomically, so the sidecar is the commit record: a claim of N games never exists without
the complete shard that holds them. A kill (or a full disk) between the two writes leaves at most
a shard without a sidecar, which `list_shards` and `RunDir.shards` do not list (the games it holds
were not reported as saved, so a restarted worker plays them again). The writer removes it itself
when the sidecar write fails, the self-play parent when the writer's process died
(`discard_uncommitted`). Readers validate while reading and raise `DataError` naming the file and byte offset; they
never return half a file.

The checksum (sha256 rather than crc32: it detects any change, not only short bursts, and
`sha256sum` checks it by hand; at ~1.7 GB/s it costs a millisecond per megabyte, nothing beside the
replay that validates a shard) is checked by `read_hcpe3` whenever the sidecar has one. Shards
written before checksums existed (a sidecar without "sha256"), and dlshogi's shards, which have no
sidecar, still load, with the structural checks only.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import secrets
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import numpy as np

from dlzero.data.atomic import STORAGE_ERRNOS, TEMP_SUFFIX, atomic_write_bytes, atomic_write_text
from dlzero.data.hcpe import (
    HCP_SIZE,
    RESULT_MASK,
    bad_result_byte,
    find_bad_hcp,
    format_move16,
    legal_move16s,
    read_file_bytes,
)
from dlzero.data.regular import special_kind
from dlzero.errors import DataError, DlzeroError, PositionError

log = logging.getLogger(__name__)

RESULT_DRAW = 0
BLACK_WIN = 1
WHITE_WIN = 2
FLAG_REPETITION = 0x4
FLAG_NYUGYOKU = 0x8
FLAG_MAX_MOVES = 0x10

OPPONENT_SELF = 0
OPPONENT_USI_BLACK = 1
OPPONENT_USI_WHITE = 2

MAX_MOVES = 1024  # longer games are rejected as corrupt (dlshogi's own limit is 320 by default)
MAX_CANDIDATES = 593  # the most legal moves any shogi position has

_HEADER = struct.Struct("<32sHBB")
_MOVE_INFO = struct.Struct("<HhH")
_CANDIDATE_SIZE = 4
SHARD_SUFFIX = ".hcpe3"


class StorageError(DlzeroError):
    """The disk refuses writes (full, over quota, read-only). Self-play stops all its workers on it
    with this one message and does not restart them, since a restarted worker would only play
    games it cannot save."""


def storage_error(exc: BaseException, path: str | os.PathLike[str] | None = None) -> StorageError | None:
    """`exc` as a StorageError when it is one or an OSError of STORAGE_ERRNOS, else None; `path` names
    the file being written when the OSError does not (a failed write or fsync names none)."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        where = exc.filename or path
        return StorageError(f"cannot write{f' {where}' if where else ''}: {exc.strerror} "
                            f"({errno.errorcode[exc.errno]}); free space on that disk (or raise the quota, or make "
                            "it writable) and run again")
    return None


def _no_candidates() -> np.ndarray:
    return np.zeros((0, 2), np.uint16)


@dataclass(eq=False)
class MoveRecord:
    """One ply: the move played, its eval (cp-like, side to move), and root visit counts.

    `candidates` is a (k, 2) uint16 array of (move16, visits); k = 0 marks a ply that is kept for
    replay but is not a training target (random opening plies, forced moves, opponent moves).
    """

    move16: int
    eval: int = 0
    candidates: np.ndarray = field(default_factory=_no_candidates)

    @property
    def is_target(self) -> bool:
        return len(self.candidates) > 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MoveRecord):
            return NotImplemented
        return (self.move16, self.eval) == (other.move16, other.eval) and np.array_equal(
            self.candidates, other.candidates
        )


@dataclass(eq=False)
class Hcpe3Record:
    """One game as an hcpe3 file holds it: start position (hcp), result byte (winner bits plus flags),
    opponent, plies."""

    start_hcp: np.ndarray
    result: int = RESULT_DRAW
    opponent: int = OPPONENT_SELF
    moves: list[MoveRecord] = field(default_factory=list)

    @classmethod
    def from_board(cls, board: cshogi.Board, opponent: int = OPPONENT_SELF) -> Hcpe3Record:
        """An empty record starting at `board`'s position; append MoveRecords as the game goes."""
        hcp = np.zeros(HCP_SIZE, np.uint8)
        board.to_hcp(hcp)
        return cls(start_hcp=hcp, opponent=opponent)

    @property
    def winner(self) -> int:
        """RESULT_DRAW, BLACK_WIN or WHITE_WIN, without the flag bits."""
        return self.result & RESULT_MASK

    def start_board(self) -> cshogi.Board:
        """A cshogi Board at the start position (the hcp must be sound, as read_hcpe3 ensures)."""
        board = cshogi.Board()
        board.set_hcp(np.ascontiguousarray(self.start_hcp, dtype=np.uint8))
        return board

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hcpe3Record):
            return NotImplemented
        return (
            np.array_equal(self.start_hcp, other.start_hcp)
            and (self.result, self.opponent) == (other.result, other.opponent)
            and self.moves == other.moves
        )


@dataclass(frozen=True)
class TrainingPosition:
    """One ply of a game as a trainer sees it; `result` is from the side to move's point of view."""

    hcp: np.ndarray  # (32,) uint8, the position before `move16`
    move16: int
    eval: int
    candidates: np.ndarray  # (k, 2) uint16: move16, visits
    ply: int  # 0 for the start position
    turn: int  # cshogi.BLACK or cshogi.WHITE
    result: float  # 1.0 win, 0.0 loss, 0.5 draw for the side to move
    is_target: bool  # False when k == 0


# ---------------------------------------------------------------- encoding


def _check_uint16_pairs(candidates: np.ndarray) -> np.ndarray:
    """Candidates as (k, 2) little-endian u16, refusing values that would wrap silently."""
    cands = np.asarray(candidates)
    if cands.size == 0:
        return np.zeros((0, 2), "<u2")
    if cands.ndim != 2 or cands.shape[1] != 2:
        raise ValueError(f"candidates must have shape (k, 2), got {cands.shape}")
    if cands.min() < 0 or cands.max() > 0xFFFF:
        raise ValueError("candidate move16/visits must fit in u16 (0..65535); clip visit counts first")
    if len(cands) > MAX_CANDIDATES:
        raise ValueError(f"{len(cands)} candidates: no position has more than {MAX_CANDIDATES} legal moves")
    return cands.astype("<u2")


def encode_game(game: Hcpe3Record) -> bytes:
    """The hcpe3 bytes of one game. Raises ValueError for what read_hcpe3 would reject."""
    if not 1 <= len(game.moves) <= MAX_MOVES:
        raise ValueError(f"a game needs 1..{MAX_MOVES} moves, got {len(game.moves)}")
    if bad_result_byte(game.result) or not 0 <= game.result <= 0xFF:
        raise ValueError(f"invalid result byte {game.result:#x}")
    if game.opponent not in (OPPONENT_SELF, OPPONENT_USI_BLACK, OPPONENT_USI_WHITE):
        raise ValueError(f"opponent must be 0, 1 or 2, got {game.opponent}")
    hcp = np.ascontiguousarray(game.start_hcp, dtype=np.uint8)
    if hcp.shape != (HCP_SIZE,):
        raise ValueError(f"start_hcp must have shape (32,), got {hcp.shape}")
    parts = [_HEADER.pack(hcp.tobytes(), len(game.moves), game.result, game.opponent)]
    for ply, move in enumerate(game.moves):
        cands = _check_uint16_pairs(move.candidates)
        try:
            parts.append(_MOVE_INFO.pack(move.move16, move.eval, len(cands)))
        except struct.error as e:
            raise ValueError(f"ply {ply}: move16 {move.move16} must fit u16 and eval {move.eval} s16") from e
        parts.append(cands.tobytes())
    return b"".join(parts)


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """`NAME.hcpe3.json` beside a shard."""
    return Path(f"{os.fspath(path)}.json")


def shard_digest(data: bytes | bytearray) -> str:
    """The checksum a sidecar records for a shard's bytes (hex sha256)."""
    return hashlib.sha256(data).hexdigest()


def _write_shard(path: str | os.PathLike[str], encoded: list[bytes], n_moves: int, meta: dict | None) -> None:
    """The shard, then its sidecar, both atomic: a sidecar never exists without its complete shard.

    An old sidecar at this name goes first (it describes other bytes). If the sidecar cannot be
    written, the shard is removed again: it would hold games nobody counted as saved.
    """
    data = b"".join(encoded)
    sidecar = {"format": "hcpe3", "games": len(encoded), "moves": n_moves, "bytes": len(data),
               "sha256": shard_digest(data), "meta": meta or {}}
    claim = sidecar_path(path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(claim)
    atomic_write_bytes(path, data)
    try:
        atomic_write_text(claim, json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def write_hcpe3(path: str | os.PathLike[str], games: Iterable[Hcpe3Record], meta: dict | None = None) -> None:
    """Write `games` as one hcpe3 file plus its JSON sidecar (`meta` goes under "meta")."""
    games = list(games)
    encoded = [encode_game(g) for g in games]
    _write_shard(path, encoded, sum(len(g.moves) for g in games), meta)


def read_sidecar(path: str | os.PathLike[str]) -> dict:
    """The sidecar of a shard: {"format", "games", "moves", "meta"}, and "bytes" and "sha256" when
    it was written by a dlzero that checksums shards."""
    raw = read_file_bytes(sidecar_path(path))
    try:
        side = json.loads(raw)
    except ValueError as e:
        raise DataError(str(sidecar_path(path)), None, f"not valid JSON: {e}") from e
    if not isinstance(side, dict):
        raise DataError(str(sidecar_path(path)), None, f"not a JSON object but {type(side).__name__}")
    return side


def verify_shard(path: str | os.PathLike[str], data: bytes | bytearray) -> bool:
    """Check a shard's bytes against its sidecar's size and sha256; a DataError if they differ.

    Returns False when there is nothing to check against: no sidecar (dlshogi's shards, a shard
    not yet committed) or a sidecar written before shards had checksums.
    """
    if not sidecar_path(path).is_file():
        return False
    side = read_sidecar(path)
    if "sha256" not in side:
        return False
    if side.get("bytes") != len(data):
        raise DataError(str(path), None, f"{len(data)} bytes, but its sidecar says {side.get('bytes')}: "
                        "the shard was truncated or extended after it was written")
    digest = shard_digest(data)
    if digest != side["sha256"]:
        raise DataError(str(path), None, f"checksum mismatch: sha256 {digest[:16]}..., its sidecar says "
                        f"{str(side['sha256'])[:16]}...: the shard changed after it was written "
                        "(a flipped bit, a bad copy, an edit)")
    return True


# ---------------------------------------------------------------- decoding


def _parse_game(
    data: bytearray, offset: int, index: int
) -> tuple[Hcpe3Record | None, int, tuple[int, str] | None]:
    """Parse the game at `offset`: (game, offset after it, None), or (None, offset, (where, why))."""
    left = len(data) - offset
    if left < _HEADER.size:
        return None, offset, (offset, f"game {index}: truncated header ({left} bytes left, a header is 36)")
    hcp_bytes, move_num, result, opponent = _HEADER.unpack_from(data, offset)
    if move_num == 0 or move_num > MAX_MOVES:
        return None, offset, (offset, f"game {index}: moveNum {move_num} is not in 1..{MAX_MOVES}")
    if bad_result_byte(result):
        return None, offset, (offset, f"game {index}: invalid result byte {result:#04x}")
    if opponent > OPPONENT_USI_WHITE:
        return None, offset, (offset, f"game {index}: opponent byte {opponent} is not 0, 1 or 2")
    game = Hcpe3Record(np.frombuffer(hcp_bytes, np.uint8).copy(), result, opponent, [])
    pos = offset + _HEADER.size
    for ply in range(move_num):
        truncated = (offset, f"game {index}: truncated move list (ends inside ply {ply} of {move_num})")
        if len(data) - pos < _MOVE_INFO.size:
            return None, pos, truncated
        move16, evaluation, k = _MOVE_INFO.unpack_from(data, pos)
        if k > MAX_CANDIDATES:
            return None, pos, (pos, f"game {index}, ply {ply}: candidateNum {k} > {MAX_CANDIDATES}")
        end = pos + _MOVE_INFO.size + _CANDIDATE_SIZE * k
        if end > len(data):
            return None, pos, truncated
        cands = np.frombuffer(data, "<u2", count=2 * k, offset=pos + _MOVE_INFO.size).reshape(k, 2)
        game.moves.append(MoveRecord(move16, evaluation, cands))
        pos = end
    return game, pos, None


def _parse_all(data: bytearray) -> tuple[list[Hcpe3Record], list[int], tuple[int, str] | None]:
    """Every complete game with its offset, and the first structural error (None if none)."""
    games: list[Hcpe3Record] = []
    offsets: list[int] = []
    offset = 0
    while offset < len(data):
        game, end, error = _parse_game(data, offset, len(games))
        if error is not None:
            return games, offsets, error
        games.append(game)
        offsets.append(offset)
        offset = end
    return games, offsets, None


def _replay_error(game: Hcpe3Record, index: int, offset: int) -> tuple[int, str] | None:
    """First illegal selected or candidate move in a game with a sound hcp, as (offset, reason)."""
    board = game.start_board()
    pos = offset + _HEADER.size
    for ply, move in enumerate(game.moves):
        legal = legal_move16s(board)
        where = f"game {index}, ply {ply}"
        if move.move16 not in legal:
            return pos, f"{where}: selected move {format_move16(move.move16)} is not legal in {board.sfen()}"
        cands = move.candidates[:, 0].tolist()
        seen: set[int] = set()
        for j, cand in enumerate(cands):
            if cand not in legal or cand in seen:
                what = "is not legal" if cand not in legal else "is listed twice"
                return pos + _MOVE_INFO.size + _CANDIDATE_SIZE * j, (
                    f"{where}: candidate {j} {format_move16(cand)} {what} in {board.sfen()}"
                )
            seen.add(cand)
        board.push_move16(move.move16)
        pos += _MOVE_INFO.size + _CANDIDATE_SIZE * len(cands)
    return None


def read_hcpe3(path: str | os.PathLike[str], validate: bool = True) -> list[Hcpe3Record]:
    """All games of an hcpe3 file, or a DataError at the first problem; never part of a file.

    Always checked: complete headers and move lists (a truncation is reported at the offset of the
    incomplete game, so everything before it is intact), moveNum in 1..1024, result and opponent
    bytes, candidateNum <= 593, and that each start hcp decodes. With `validate`, every game is
    also replayed with cshogi: each selected move and each candidate must be legal (and candidates
    distinct) in its position. Other errors name the offset of the bad header, ply or candidate.
    Before any of this, the bytes are checked against the sidecar's sha256 when it has one
    (`verify_shard`): most flipped bits still parse as legal games, only the checksum sees them.
    """
    data = bytearray(read_file_bytes(path))
    verify_shard(path, data)
    games, offsets, error = _parse_all(data)
    errors = [error] if error else []
    if games:
        bad_hcp = find_bad_hcp(np.stack([g.start_hcp for g in games]))
        if bad_hcp is not None:
            index, reason = bad_hcp
            errors.append((offsets[index], f"game {index}: start hcp does not decode: {reason}"))
    if validate:
        first_bad = min(errors, default=(len(data), ""))[0]
        for index, (game, offset) in enumerate(zip(games, offsets, strict=True)):
            if offset >= first_bad:
                break
            replay = _replay_error(game, index, offset)
            if replay is not None:
                errors.append(replay)
                break
    if errors:
        offset, reason = min(errors)
        raise DataError(str(path), offset, reason)
    return games


def _side_result(winner: int, turn: int) -> float:
    if winner == RESULT_DRAW:
        return 0.5
    return 1.0 if (winner == BLACK_WIN) == (turn == cshogi.BLACK) else 0.0


def iter_training_positions(game: Hcpe3Record) -> Iterator[TrainingPosition]:
    """Replay `game` and yield every ply's position, move, eval, candidates and result.

    Plies without candidates are included with `is_target=False`, so a trainer can still count
    them (or use them for a value target) but knows they carry no policy target. Each move is
    checked against cshogi's legal moves, so a game read with validate=False cannot crash cshogi;
    an illegal move raises PositionError. `game.start_hcp` must be sound (read_hcpe3 checks it).
    """
    board = game.start_board()
    for ply, move in enumerate(game.moves):
        if move.move16 not in legal_move16s(board):
            move_text = format_move16(move.move16)
            raise PositionError(f"ply {ply}: move {move_text} is not legal in {board.sfen()}")
        hcp = np.zeros(HCP_SIZE, np.uint8)
        board.to_hcp(hcp)
        turn = board.turn
        yield TrainingPosition(
            hcp=hcp,
            move16=move.move16,
            eval=move.eval,
            candidates=move.candidates,
            ply=ply,
            turn=turn,
            result=_side_result(game.winner, turn),
            is_target=move.is_target,
        )
        board.push_move16(move.move16)


# ---------------------------------------------------------------- shards


class ShardWriter:
    """Collects games and writes them as hcpe3 shards of `games_per_shard` games each.

    A shard is written (atomically, then its sidecar) every `games_per_shard` games and by `flush`,
    `close` or leaving the `with` block (also on an exception: the pending games are complete).
    A killed process loses at most the games not yet flushed. A disk that refuses the write
    (STORAGE_ERRNOS) is a StorageError; the pending games are dropped and the writer is closed.
    Names are `{stem}-{seq:05d}.hcpe3` with `stem` = `{prefix}-{pid}-{start time}-{random}`: the
    random part keeps workers apart when pids repeat, as they do across containers or machines
    sharing one folder.
    """

    def __init__(
        self, directory: str | os.PathLike[str], prefix: str, games_per_shard: int, meta: dict | None = None
    ) -> None:
        if games_per_shard < 1:
            raise ValueError(f"games_per_shard must be >= 1, got {games_per_shard}")
        if not prefix or prefix.startswith(".") or os.sep in prefix or "/" in prefix:
            raise ValueError(f"invalid shard prefix {prefix!r}")
        self.meta = dict(meta or {})
        json.dumps(self.meta)  # fail now, not at the first flush, if meta cannot go in the sidecar
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.games_per_shard = games_per_shard
        self.written: list[Path] = []
        self.written_games: list[int] = []  # games in each written shard
        self.stem = f"{prefix}-{os.getpid()}-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self._pending: list[bytes] = []
        self._pending_moves = 0
        self._closed = False

    def add(self, game: Hcpe3Record) -> None:
        """Queue a finished game (encoded now, so a bad game fails here, not at flush time)."""
        if self._closed:
            raise ValueError("ShardWriter is closed")
        self._pending.append(encode_game(game))
        self._pending_moves += len(game.moves)
        if len(self._pending) >= self.games_per_shard:
            self.flush()

    def flush(self) -> Path | None:
        """Write the pending games as a shard now; returns its path (None if nothing was pending)."""
        if not self._pending:
            return None
        path = self.directory / f"{self.stem}-{len(self.written):05d}{SHARD_SUFFIX}"
        try:
            _write_shard(path, self._pending, self._pending_moves, self.meta)
        except OSError as exc:
            if exc.errno not in STORAGE_ERRNOS:
                raise
            lost = len(self._pending)  # dropped, and the writer closed: a second try would fail alike
            self._pending, self._pending_moves, self._closed = [], 0, True
            raise StorageError(
                f"cannot write shard {path}: {exc.strerror} ({errno.errorcode[exc.errno]}); the {lost} finished "
                f"game(s) it would hold are lost, no partial file is left. Free space on that disk (or raise "
                "the quota, or make it writable) and run again: the games already saved are intact") from exc
        self.written.append(path)
        self.written_games.append(len(self._pending))
        self._pending = []
        self._pending_moves = 0
        return path

    def close(self) -> None:
        """Write what is pending; later `add` calls raise."""
        self.flush()
        self._closed = True

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def discard_uncommitted(directory: str | os.PathLike[str], stem: str) -> list[Path]:
    """Remove what a dead ShardWriter (`stem`, in `directory`) left half done; returns the removed paths.

    That is: shards without a sidecar (their games were never counted as saved, so a restarted
    worker plays them again) and temp files of interrupted writes. Committed shards are not
    touched. Only for a writer whose process is gone: a live one may be between its two writes.
    """
    removed = []
    for path in Path(directory).glob(f"*{stem}-*"):
        name = path.name
        uncommitted = name.startswith(f"{stem}-") and name.endswith(SHARD_SUFFIX) and not is_committed(path)
        if uncommitted or (name.startswith(f".{stem}-") and name.endswith(TEMP_SUFFIX)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    return removed


def shard_glob(prefix: str | None = None) -> str:
    """Glob pattern of the shard names `ShardWriter(prefix=...)` writes (any prefix when None)."""
    return f"{prefix}-*{SHARD_SUFFIX}" if prefix else f"*{SHARD_SUFFIX}"


def is_committed(path: str | os.PathLike[str]) -> bool:
    """Whether a shard's sidecar exists: written after the shard, it is what makes the shard count."""
    return sidecar_path(path).is_file()


def is_listed(path: Path) -> bool:
    """Whether a shard name a glob found is listed: not a temp or hidden file, committed, and a regular
    file (a FIFO named like a shard hung its reader; a symlink loop failed the listing's sort). What is
    not a regular file is named in one logged line."""
    if path.name.startswith(".") or not is_committed(path):
        return False
    kind = special_kind(path)
    if kind is not None:
        log.warning("%s: %s, not a regular file: skipped", path, kind)
    return kind is None


def list_shards(directory: str | os.PathLike[str]) -> list[Path]:
    """Complete shards in `directory` (not recursive), oldest first by mtime, then by name.

    Complete means committed: a shard whose sidecar is missing (its writer died between the two,
    or it is someone else's hcpe3 file) is not listed; read such files with `read_hcpe3` directly.
    """
    found = []
    for path in Path(directory).glob(shard_glob()):
        if not is_listed(path):  # temp files, hidden files, uncommitted shards, FIFOs...
            continue
        try:
            found.append((path.stat().st_mtime, path.name, path))
        except FileNotFoundError:  # removed meanwhile, e.g. by a replay-window cleaner
            continue
    return [path for _, _, path in sorted(found)]
