"""hcpe3: exact round trips, replay for training, rejection of corrupt shards, crash-safe writing."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cshogi
import numpy as np
import pytest
from randpos import MANY_DROPS_SFENS, random_histories

from dlzero.data.atomic import atomic_open, atomic_write_text
from dlzero.data.hcpe import legal_move16s
from dlzero.data.hcpe3 import (
    BLACK_WIN,
    FLAG_MAX_MOVES,
    FLAG_NYUGYOKU,
    FLAG_REPETITION,
    RESULT_DRAW,
    WHITE_WIN,
    Hcpe3Record,
    MoveRecord,
    ShardWriter,
    discard_uncommitted,
    encode_game,
    iter_training_positions,
    list_shards,
    read_hcpe3,
    read_sidecar,
    write_hcpe3,
)
from dlzero.errors import DataError, PositionError

REPO = Path(__file__).resolve().parents[1]
RESULTS = [RESULT_DRAW | FLAG_REPETITION, BLACK_WIN, WHITE_WIN | FLAG_NYUGYOKU, RESULT_DRAW | FLAG_MAX_MOVES]


def make_game(sfen: str, moves: list[int] | None, rng: np.random.Generator, plies: int = 8) -> Hcpe3Record:
    """A game from `sfen` along `moves` (random moves if None) with random evals and visit counts."""
    board = cshogi.Board(sfen)
    game = Hcpe3Record.from_board(board, opponent=int(rng.integers(0, 3)))
    game.result = int(rng.choice(RESULTS))
    for ply in range(len(moves) if moves is not None else plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = moves[ply] if moves is not None else legal[rng.integers(len(legal))]
        k = 0 if rng.random() < 0.2 else int(rng.integers(1, min(len(legal), 30) + 1))
        picked = rng.choice(len(legal), size=k, replace=False)
        cands = np.array([[cshogi.move16(legal[i]), rng.integers(1, 65536)] for i in picked], np.uint16)
        evaluation = int(rng.integers(-32768, 32768))
        game.moves.append(MoveRecord(cshogi.move16(move), evaluation, cands.reshape(k, 2)))
        board.push(move)
    return game


def make_games(n: int, seed: int) -> list[Hcpe3Record]:
    rng = np.random.default_rng(seed)
    games = [make_game(cshogi.STARTING_SFEN, moves, rng) for moves in random_histories(n, seed, max_ply=100)]
    games += [make_game(sfen, None, rng) for sfen in MANY_DROPS_SFENS]  # drops, non-start positions
    return [g for g in games if g.moves]


@pytest.fixture(scope="module")
def games() -> list[Hcpe3Record]:
    games = make_games(10, seed=11)
    moves = np.array([m.move16 for g in games for m in g.moves], np.int64)
    assert ((moves >> 7) & 0x7F >= 81).any() and (moves & 0x4000).any(), "want drops and promotions"
    return games


def game_offsets(path: Path) -> list[int]:
    """Byte offset of every game, found by walking the raw layout independently of the reader."""
    data, offsets, pos = path.read_bytes(), [], 0
    while pos < len(data):
        offsets.append(pos)
        (n,) = struct.unpack_from("<H", data, pos + 32)
        pos += 36
        for _ in range(n):
            (k,) = struct.unpack_from("<H", data, pos + 4)
            pos += 6 + 4 * k
    return offsets


def test_round_trip_is_exact(tmp_path, games):
    path = tmp_path / "g.hcpe3"
    write_hcpe3(path, games, meta={"generation": 3})
    back = read_hcpe3(path)
    assert back == games
    assert [len(g.moves) for g in back] == [len(g.moves) for g in games]
    assert [m.candidates.tolist() for m in back[0].moves] == [m.candidates.tolist() for m in games[0].moves]
    side = read_sidecar(path)
    data = path.read_bytes()
    assert side == {"format": "hcpe3", "games": len(games), "moves": sum(len(g.moves) for g in games),
                    "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                    "meta": {"generation": 3}}  # fmt: skip


def test_encoding_follows_the_dlshogi_layout():
    board = cshogi.Board()
    seven_six, three_four = board.move_from_usi("7g7f"), board.move_from_usi("2g2f")
    cands = np.array([[cshogi.move16(seven_six), 700], [cshogi.move16(three_four), 300]], np.uint16)
    game = Hcpe3Record.from_board(board, opponent=2)
    game.result = BLACK_WIN | FLAG_NYUGYOKU
    game.moves = [MoveRecord(cshogi.move16(seven_six), -123, cands)]
    data = encode_game(game)
    hcp = np.zeros(32, np.uint8)
    board.to_hcp(hcp)
    assert len(data) == 36 + 6 + 2 * 4
    assert data[:32] == hcp.tobytes()
    assert struct.unpack_from("<HBB", data, 32) == (1, 0x9, 2)
    assert struct.unpack_from("<HhH", data, 36) == (cshogi.move16(seven_six), -123, 2)
    assert struct.unpack_from("<4H", data, 42) == (cands[0, 0], 700, cands[1, 0], 300)


def test_encode_refuses_what_the_reader_rejects():
    game = Hcpe3Record.from_board(cshogi.Board())
    with pytest.raises(ValueError, match="moves"):
        encode_game(game)
    move = cshogi.move16(cshogi.Board().move_from_usi("7g7f"))
    game.moves = [MoveRecord(move, 0, np.array([[move, 70000]]))]
    with pytest.raises(ValueError, match="u16"):
        encode_game(game)
    game.moves = [MoveRecord(move)]
    game.result = 3
    with pytest.raises(ValueError, match="result"):
        encode_game(game)


def test_iter_training_positions_replays_the_game(games):
    game = next(g for g in games if g.winner == WHITE_WIN)
    board = game.start_board()
    positions = list(iter_training_positions(game))
    assert len(positions) == len(game.moves)
    for pos, move in zip(positions, game.moves, strict=True):
        hcp = np.zeros(32, np.uint8)
        board.to_hcp(hcp)
        assert np.array_equal(pos.hcp, hcp)
        assert pos.move16 == move.move16 and pos.eval == move.eval and pos.turn == board.turn
        assert pos.is_target == (len(move.candidates) > 0)
        assert np.array_equal(pos.candidates, move.candidates)
        assert pos.result == (1.0 if board.turn == cshogi.WHITE else 0.0)
        board.push_move16(move.move16)
    assert [p.ply for p in positions] == list(range(len(positions)))
    drawn = next(g for g in games if g.winner == RESULT_DRAW)
    assert {p.result for p in iter_training_positions(drawn)} == {0.5}


def test_iter_training_positions_rejects_an_illegal_move(games):
    game = Hcpe3Record(games[0].start_hcp, BLACK_WIN, 0, [MoveRecord(0x7FFF)])
    with pytest.raises(PositionError, match="ply 0"):
        list(iter_training_positions(game))


def write_and_offsets(tmp_path: Path, games: list[Hcpe3Record]) -> tuple[Path, list[int]]:
    """A shard without a sidecar, as dlshogi writes them: what the structural checks alone catch
    (with the sidecar, its checksum would refuse every edit below before they ran)."""
    path = tmp_path / "g.hcpe3"
    write_hcpe3(path, games[:3])
    Path(f"{path}.json").unlink()
    return path, game_offsets(path)


def expect_error(path: Path, offset: int, pattern: str, validate: bool = True) -> None:
    with pytest.raises(DataError, match=pattern) as err:
        read_hcpe3(path, validate=validate)
    assert err.value.offset == offset
    assert str(path) in str(err.value)


def test_truncation_is_reported_at_the_incomplete_game(tmp_path, games):
    path, offsets = write_and_offsets(tmp_path, games)
    data = path.read_bytes()
    cuts = {
        offsets[1] + 10: (offsets[1], "truncated header"),  # inside game 1's header
        offsets[1] + 36 + 3: (offsets[1], "truncated move list"),  # inside its first MoveInfo
        offsets[2] - 2: (offsets[1], "truncated move list"),  # inside its last candidates
        len(data) - 1: (offsets[2], "truncated move list"),
    }
    for size, (offset, reason) in cuts.items():
        path.write_bytes(data[:size])
        expect_error(path, offset, reason)
        expect_error(path, offset, reason, validate=False)


def patched(path: Path, offset: int, fmt: str, *values) -> Path:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, *values)
    out = path.with_name(f"patched-{offset}.hcpe3")
    out.write_bytes(bytes(data))
    return out


def test_corrupt_headers_are_rejected(tmp_path, games):
    path, offsets = write_and_offsets(tmp_path, games)
    g1 = offsets[1]
    expect_error(patched(path, g1 + 32, "<H", 0), g1, "moveNum 0")
    expect_error(patched(path, g1 + 32, "<H", 5000), g1, "moveNum 5000")
    expect_error(patched(path, g1 + 34, "<B", 3), g1, "result")
    expect_error(patched(path, g1 + 34, "<B", 0x21), g1, "result")
    expect_error(patched(path, g1 + 35, "<B", 7), g1, "opponent")
    expect_error(patched(path, g1 + 36 + 4, "<H", 1000), g1 + 36, "candidateNum 1000")
    expect_error(patched(path, g1, "<B", games[1].start_hcp[0] ^ 0x80), g1, "start hcp", validate=False)


def test_illegal_moves_are_rejected_at_their_ply(tmp_path, games):
    game = next(g for g in games[:3] if len(g.moves) > 2 and g.moves[1].is_target)
    index = games.index(game)
    path, offsets = write_and_offsets(tmp_path, games)
    ply1 = offsets[index] + 36 + 6 + 4 * len(game.moves[0].candidates)
    board = game.start_board()
    board.push_move16(game.moves[0].move16)
    legal = legal_move16s(board)
    illegal = next(m for m in range(1 << 14) if m not in legal and (m >> 7) < 81 and (m & 0x7F) < 81)
    expect_error(patched(path, ply1, "<H", illegal), ply1, f"game {index}, ply 1: selected move")
    assert len(read_hcpe3(patched(path, ply1, "<H", illegal), validate=False)) == 3
    expect_error(patched(path, ply1 + 6, "<H", illegal), ply1 + 6, "candidate 0 .* not legal")
    if len(game.moves[1].candidates) > 1:
        duplicate = int(game.moves[1].candidates[0, 0])
        expect_error(patched(path, ply1 + 10, "<H", duplicate), ply1 + 10, "candidate 1 .* listed twice")


def test_first_problem_in_file_order_wins(tmp_path, games):
    path, offsets = write_and_offsets(tmp_path, games)
    bad = patched(path, offsets[0] + 36, "<H", 0x7FFF)  # illegal move in game 0 ...
    data = bad.read_bytes()
    bad.write_bytes(data[: offsets[2] + 5])  # ... and a truncated game 2
    expect_error(bad, offsets[0] + 36, "game 0, ply 0")


def test_garbage_is_rejected(tmp_path):
    path = tmp_path / "garbage.hcpe3"
    for seed in range(5):
        path.write_bytes(np.random.default_rng(seed).integers(0, 256, 4000, dtype=np.uint8).tobytes())
        with pytest.raises(DataError):
            read_hcpe3(path, validate=False)


def test_empty_file_has_no_games(tmp_path):
    write_hcpe3(tmp_path / "e.hcpe3", [])
    assert read_hcpe3(tmp_path / "e.hcpe3") == []


def test_read_and_validate_1000_games_is_quick(tmp_path, games):
    path = tmp_path / "big.hcpe3"
    many = (games * (1000 // len(games) + 1))[:1000]
    write_hcpe3(path, many)
    start = time.perf_counter()
    back = read_hcpe3(path)
    elapsed = time.perf_counter() - start
    plies = sum(len(g.moves) for g in back)
    assert len(back) == 1000 and plies > 30000
    assert elapsed < 15, f"reading+validating 1000 games ({plies} plies) took {elapsed:.1f} s"


# ---------------------------------------------------------------- atomic writes and shards


def test_atomic_open_failure_leaves_target_and_no_temp_file(tmp_path):
    target = tmp_path / "best.json"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_open(target, "w") as f:
        f.write("new, half written")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain open() would, not mkstemp's 0600


KILL_INSIDE_WRITE = textwrap.dedent(
    """
    import os, sys
    from dlzero.data.atomic import atomic_open
    with atomic_open(sys.argv[1], "wb") as f:
        f.write(b"partial")
        f.flush()
        os.kill(os.getpid(), 9)
    """
)


def test_killed_writer_leaves_only_a_hidden_temp_file(tmp_path, games):
    shard = tmp_path / "a.hcpe3"
    write_hcpe3(shard, games[:2])
    before = shard.read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILL_INSIDE_WRITE, str(shard)], cwd=REPO, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    temps = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].name.startswith(".a.hcpe3.")
    assert shard.read_bytes() == before
    assert list_shards(tmp_path) == [shard]


def test_shard_writer_writes_every_n_games_and_on_close(tmp_path, games):
    with ShardWriter(tmp_path / "data", "sp", games_per_shard=2, meta={"model": "gen-0001"}) as writer:
        for game in games[:5]:
            writer.add(game)
        assert len(writer.written) == 2
    assert len(writer.written) == 3
    for path in writer.written:
        assert re.fullmatch(rf"sp-{os.getpid()}-\d{{8}}T\d{{6}}-[0-9a-f]{{6}}-\d{{5}}\.hcpe3", path.name)
        assert read_sidecar(path)["meta"] == {"model": "gen-0001"}
    shards = list_shards(tmp_path / "data")
    assert sorted(shards) == sorted(writer.written)
    assert [g for path in writer.written for g in read_hcpe3(path)] == games[:5]
    with pytest.raises(ValueError, match="closed"):
        writer.add(games[0])


SHARD_LOOP = textwrap.dedent(
    """
    import sys
    from dlzero.data.hcpe3 import ShardWriter, read_hcpe3
    games = read_hcpe3(sys.argv[1])
    writer = ShardWriter(sys.argv[2], "sp", games_per_shard=1)
    i = 0
    while True:
        writer.add(games[i % len(games)])
        i += 1
    """
)


def test_shard_writer_killed_mid_run_leaves_only_complete_shards(tmp_path, games):
    source = tmp_path / "source.hcpe3"
    write_hcpe3(source, games)
    out = tmp_path / "shards"
    proc = subprocess.Popen([sys.executable, "-c", SHARD_LOOP, str(source), str(out)], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while len(list(out.glob("*.hcpe3.json"))) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    shards = list_shards(out)
    assert len(shards) >= 40
    # the shard being written at the kill may lack its sidecar (it is then not listed); no sidecar lacks its shard
    assert len([p for p in out.iterdir() if p.name.endswith(".hcpe3") and p not in shards]) <= 1
    assert sorted(p for p in out.glob("*.hcpe3.json")) == sorted(Path(f"{p}.json") for p in shards)
    known = {encode_game(g) for g in games}
    for shard in shards:
        (game,) = read_hcpe3(shard)
        assert encode_game(game) in known
        assert json.loads(Path(f"{shard}.json").read_text())["games"] == 1


# ---------------------------------------------------------------- checksums and the commit order


def test_every_single_bit_flip_in_a_shard_is_refused(tmp_path, games):
    """Each of the shard's bits flipped in turn: the sidecar's sha256 refuses every one. Without the
    checksum (the same bytes, no sidecar) many flips in a sample of 70 still parse and replay as legal
    games: 36 of 70 loaded silently before checksums."""
    path = tmp_path / "s.hcpe3"
    game = next(g for g in games if 4 <= len(g.moves) <= 8)
    write_hcpe3(path, [game])
    data = path.read_bytes()

    def flipped(bit: int) -> bytes:
        out = bytearray(data)
        out[bit // 8] ^= 1 << (bit % 8)
        return bytes(out)

    for bit in range(8 * len(data)):
        path.write_bytes(flipped(bit))
        with pytest.raises(DataError, match="checksum mismatch"):
            read_hcpe3(path, validate=True)
    bare = tmp_path / "bare.hcpe3"
    silent = 0
    for bit in np.linspace(0, 8 * len(data) - 1, 70).astype(int):
        bare.write_bytes(flipped(int(bit)))
        try:
            read_hcpe3(bare, validate=True)
            silent += 1
        except DataError:
            pass
    assert silent >= 10, f"only {silent} of 70 flips load without a checksum: the sample shows nothing"
    path.write_bytes(data)
    assert read_hcpe3(path) == [game]


def test_a_shard_of_another_size_is_refused_and_old_sidecars_still_load(tmp_path, games):
    path = tmp_path / "s.hcpe3"
    write_hcpe3(path, games[:2])
    data = path.read_bytes()
    path.write_bytes(data + data[:36])
    with pytest.raises(DataError, match="sidecar says"):
        read_hcpe3(path)
    # a sidecar from before checksums (no "bytes", no "sha256"): the shard loads, checked structurally
    path.write_bytes(data)
    side = read_sidecar(path)
    del side["bytes"], side["sha256"]
    Path(f"{path}.json").write_text(json.dumps(side))
    assert read_hcpe3(path) == games[:2]
    assert list_shards(tmp_path) == [path]


def test_a_failed_shard_write_leaves_no_sidecar(tmp_path, games):
    """The shard is written before its sidecar: when the shard cannot be written (here its name is
    taken by a folder, so the final rename fails), no sidecar claims its games, and no temp file stays."""
    path = tmp_path / "s.hcpe3"
    path.mkdir()
    with pytest.raises(IsADirectoryError):
        write_hcpe3(path, games[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.hcpe3"]


def test_a_shard_without_its_sidecar_is_not_listed(tmp_path, games):
    """A writer killed between the shard and its sidecar leaves an uncommitted shard: not listed, so
    not trained on and not counted as saved (its games are played again), but still readable."""
    write_hcpe3(tmp_path / "a.hcpe3", games[:1])
    write_hcpe3(tmp_path / "b.hcpe3", games[1:2])
    Path(f"{tmp_path / 'b.hcpe3'}.json").unlink()
    assert list_shards(tmp_path) == [tmp_path / "a.hcpe3"]
    assert read_hcpe3(tmp_path / "b.hcpe3") == games[1:2]


def test_discard_uncommitted_removes_only_a_dead_writers_half_written_files(tmp_path, games):
    writer = ShardWriter(tmp_path, "sp", games_per_shard=1)
    writer.add(games[0])
    writer.add(games[1])
    committed, uncommitted = writer.written
    Path(f"{uncommitted}.json").unlink()  # killed between the shard and its sidecar
    temp = tmp_path / f".{writer.stem}-00002.hcpe3.0123abcd.tmp"  # killed inside a write
    temp.write_bytes(b"half")
    other = tmp_path / "sp-1-20250101T000000-abcdef-00000.hcpe3"  # another writer's, maybe still writing
    other.write_bytes(uncommitted.read_bytes())
    assert sorted(discard_uncommitted(tmp_path, writer.stem)) == sorted([uncommitted, temp])
    assert sorted(tmp_path.iterdir()) == sorted([committed, Path(f"{committed}.json"), other])
