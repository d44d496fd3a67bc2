"""A match played in parts (`dlzero match --resume`): kept games read back exactly as they were written, only the
missing pairs played, from their own openings, and a folder of another match refused."""

from __future__ import annotations

import csv

import cshogi
import pytest

from dlzero.cli import main
from dlzero.commands.match import append_csv
from dlzero.errors import DataError
from dlzero.gating.match import MatchRecord, read_record
from dlzero.gating.recount import recount
from dlzero.gating.resume import missing_chunks
from dlzero.play.game import END_TIME

HEADER = ["A: default (some network)", "B: gpsshogi:depth=10:byoyomi=1000", "time control: byoyomi 1000 ms"]


def _game(board_moves: int, reason: str, winner: int | None, *, a_is_black: bool, late: int | None = None,
          start: str = cshogi.STARTING_SFEN) -> MatchRecord:
    board = cshogi.Board(start)
    moves = []
    for _ in range(board_moves):
        move = sorted(board.legal_moves)[0]
        moves.append(move)
        board.push(move)
    ms = [None if ply < 2 else 900 + ply for ply in range(board_moves)] + ([late] if late is not None else [])
    nodes = [None if ply < 2 or ply % 3 == 0 else 4000 + ply for ply in range(board_moves)]
    nodes += [None] * (len(ms) - board_moves)  # a late answer's nodes are not written
    return MatchRecord(7, a_is_black, start, 2, moves, winner, reason, ms, nodes)


# after 9 plies White is to move: it resigns, runs out of time; Black, who moved last, gave the perpetual check
@pytest.mark.parametrize(("reason", "winner", "late"), [("resign", cshogi.BLACK, None),
                                                         (END_TIME, cshogi.BLACK, 1234),
                                                         ("max_moves", None, None),
                                                         ("perpetual_check", cshogi.WHITE, None)])
def test_a_kept_game_reads_back_as_it_was(reason, winner, late):
    for a_is_black in (True, False):
        game = _game(9, reason, winner, a_is_black=a_is_black, late=late)
        text = game.csa("A", "B", header=HEADER)
        back = read_record(text, "game-007.csa")
        assert back == game
        assert back.csa("A", "B", header=HEADER) == text


def test_a_handicap_start_reads_back():
    from dlzero.play.handicap import handicap_sfen

    game = _game(6, "resign", cshogi.BLACK, a_is_black=False, start=handicap_sfen("角落ち"))
    assert read_record(game.csa(), "g").start_sfen == handicap_sfen("角落ち")


def test_a_record_that_is_no_match_game_names_itself():
    with pytest.raises(DataError, match="game-003.csa"):
        read_record("V2.2\nN+A\nN-B\nPI\n+\n+7776FU\n%TORYO\n", "game-003.csa")  # no match lines
    with pytest.raises(DataError, match="game-004.csa"):
        read_record("not csa at all", "game-004.csa")


def test_missing_pairs_are_played_in_stretches():
    assert list(missing_chunks(set(), 6)) == [(0, 6)]
    assert list(missing_chunks({0, 2}, 9)) == [(1, 2), (3, 3)]  # slot 4 is the lone last game
    assert list(missing_chunks({0, 2}, 9, pairs_a_chunk=1)) == [(1, 2), (3, 2), (4, 1)]
    assert list(missing_chunks({0, 1, 2}, 6)) == []


def test_a_resumed_match_keeps_its_games_and_plays_the_missing_pairs(tmp_path, capsys):
    games, table = tmp_path / "games", tmp_path / "m.csv"
    args = ["match", "random", "alphabeta:1", "--games", "6", "--records", str(games), "--set", "gate.max_moves=40"]
    assert main(args) == 0
    capsys.readouterr()
    kept = {p.name: p.read_bytes() for p in games.glob("*.csa")}
    starts = {p.name: cshogi.CSA.Parser.parse_file(str(p))[0].sfen for p in games.glob("*.csa")}
    assert len(kept) == 6
    (games / "game-002.csa").unlink()  # pair 1 and pair 2 cut short: one game of each is lost
    (games / "game-005.csa").unlink()
    assert main([*args, "--resume", "--csv", str(table)]) == 0
    out, err = capsys.readouterr()
    assert "resuming: 2 games kept" in err and "4 to play" in err
    assert "6 games" in out
    assert {p.name for p in games.glob("*.csa")} == set(kept)
    for name in ("game-000.csa", "game-001.csa"):  # the complete pair is kept as it was
        assert (games / name).read_bytes() == kept[name]
    for path in games.glob("*.csa"):  # every pair replayed from its own opening
        assert cshogi.CSA.Parser.parse_file(str(path))[0].sfen == starts[path.name]
    [row] = list(csv.DictReader(table.open()))
    assert (int(row["wins"]), int(row["draws"]), int(row["losses"])) == recount(games)
    assert sum(recount(games)) == 6
    assert main([*args, "--resume"]) == 0  # nothing left: counts the kept games, plays none
    assert "0 to play" in capsys.readouterr().err


def test_a_csv_from_before_a_new_column_keeps_its_rows_under_their_names(tmp_path):
    """`--csv` appends to a file a user has kept across versions: a row with a column the file's header lacks
    (here `start`, the handicap) rewrites the file under the wider header instead of appending out of line."""
    table = tmp_path / "m.csv"
    table.write_text('a,b,time_control,wins,draws,losses,records\nx,y,"byoyomi 1000 ms, one core",3,0,1,/r\n')
    append_csv(str(table), {"a": "p", "b": "q", "time_control": "byoyomi 1000 ms", "start": "香落ち", "wins": 1,
                            "draws": 0, "losses": 2, "records": ""})
    append_csv(str(table), {"a": "p", "b": "q", "time_control": "t", "start": "", "wins": 2, "draws": 0,
                            "losses": 0, "records": "z"})
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert [(r["a"], r["time_control"], r["start"], r["wins"], r["records"]) for r in rows] == [
        ("x", "byoyomi 1000 ms, one core", "", "3", "/r"), ("p", "byoyomi 1000 ms", "香落ち", "1", ""),
        ("p", "t", "", "2", "z")]


def test_resume_refuses_another_match_and_wants_a_folder(tmp_path, capsys):
    games = tmp_path / "games"
    assert main(["match", "random", "alphabeta:1", "--games", "2", "--records", str(games),
                 "--set", "gate.max_moves=20"]) == 0
    capsys.readouterr()
    assert main(["match", "random", "alphabeta:2", "--games", "4", "--records", str(games), "--resume",
                 "--set", "gate.max_moves=20"]) == 2
    assert "game-000.csa was played with B: 'alphabeta:1'" in capsys.readouterr().err
    assert main(["match", "random", "alphabeta:1", "--games", "2", "--resume"]) == 2
    assert "--records" in capsys.readouterr().err
