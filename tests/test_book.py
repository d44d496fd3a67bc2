"""The opening book (issue 53): YaneuraOu's .db format read and written, `dlzero book make` from records and
by search (with resume), and a real `dlzero usi` process that answers book positions from the book, others by
search, and plays on without a malformed book."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import cshogi
import cshogi.CSA
import pytest

from dlzero.cli import main as cli_main
from dlzero.config import BookConfig, Config
from dlzero.data.book import HEADER, Book, BookError, BookMove, book_from_records, pick, read_book, write_book
from dlzero.engine import Engine
from dlzero.engine.book import OwnBook, existing_book, make_think_book
from dlzero.engine.timeman import Limits
from dlzero.position import parse_position

GAMES = [["7g7f", "3c3d", "2g2f", "8c8d"], ["7g7f", "8c8d", "2g2f"], ["2g2f", "3c3d", "7g7f"]]


def write_csa(folder: Path, games: list[list[str]]) -> Path:
    """One CSA file per game, written by cshogi's exporter (as a GUI or a server saves them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, moves in enumerate(games):
        board = cshogi.Board()
        exporter = cshogi.CSA.Exporter(str(folder / f"g{i}.csa"))
        exporter.info(board, ["black", "white"])
        for usi in moves:
            move = board.move_from_usi(usi)
            exporter.move(move)
            board.push(move)
        exporter.endgame("%TORYO")
        exporter.close()
    return folder


def small_book() -> Book:
    book = Book()
    start = cshogi.Board()
    book.add(start, BookMove("7g7f", "3c3d", 30, 10, 3))
    book.add(start, BookMove("2g2f", None, 25, 10, 1))
    after = parse_position("startpos moves 7g7f")
    book.add(after, BookMove("3c3d", None, -20, 8, 2))
    return book


# ---------------------------------------------------------------- the file format


def test_round_trip_keeps_every_field_and_matches_positions_without_their_ply(tmp_path):
    path = tmp_path / "book.db"
    write_book(path, small_book())
    text = path.read_text()
    assert text.splitlines()[0] == HEADER
    assert "7g7f 3c3d 30 10 3" in text and "2g2f none 25 10 1" in text
    again = read_book(path)
    write_book(tmp_path / "again.db", again)
    assert (tmp_path / "again.db").read_text() == text
    # the same position at another ply (an SFEN given with move number 9) is the same book entry
    board = parse_position("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 9")
    assert [m.move for m in again.moves(board)] == ["7g7f", "2g2f"]
    assert again.moves(parse_position("startpos moves 2g2f")) == []


def test_comments_and_a_bom_are_read(tmp_path):
    path = tmp_path / "book.db"
    path.write_text("\ufeff" + HEADER + "\n# made by hand\n\nsfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/"
                    "1B5R1/LNSGKGSNL b - 1\n7g7f none 0 0 1\n", encoding="utf-8")
    assert [m.move for m in read_book(path).moves(cshogi.Board())] == ["7g7f"]


START = "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"


@pytest.mark.parametrize("body, where, what", [
    ("#NOT-A-BOOK\n", "", "not a YaneuraOu book"),
    (f"{HEADER}\n7g7f none 0 0 1\n", ":2:", "before any 'sfen' line"),
    (f"{HEADER}\n{START}\n7g7f none 0 0\n", ":3:", "needs 5 fields"),
    (f"{HEADER}\n{START}\n7g7x none 0 0 1\n", ":3:", "not a USI move"),
    (f"{HEADER}\n{START}\n7g7e none 0 0 1\n", ":3:", "illegal in this position"),
    (f"{HEADER}\n{START}\n7g7f none 0 zero 1\n", ":3:", "must be integers"),
    (f"{HEADER}\n{START}\n7g7f 3c3 0 0 1\n", ":3:", "ponder move"),
    (f"{HEADER}\nsfen 9/9/9/9/9/9/9/9/9 b - 1\n", ":2:", "king"),
])
def test_a_malformed_book_is_one_line_naming_the_line(tmp_path, body, where, what):
    path = tmp_path / "bad.db"
    path.write_text(body)
    with pytest.raises(BookError) as err:
        read_book(path)
    message = str(err.value)
    assert "\n" not in message and what in message and f"{path}{where}" in message


def test_unreadable_books_are_one_line_too(tmp_path):
    (tmp_path / "latin.db").write_bytes(HEADER.encode() + b"\n# \xff\n")
    for path, what in ((tmp_path / "none.db", "no such file"), (tmp_path, "directory"),
                       (tmp_path / "latin.db", "not UTF-8")):
        with pytest.raises(BookError, match=what):
            read_book(path)


def test_best_pick_and_weighted_pick_follow_the_counts():
    moves = [BookMove("2g2f", count=1), BookMove("7g7f", count=3), BookMove("5g5f", count=0)]
    assert pick(moves, "best").move == "7g7f"
    rng = random.Random(7)
    drawn = Counter(pick(moves, "weighted", rng).move for _ in range(4000))
    assert drawn["5g5f"] == 0
    assert 0.72 < drawn["7g7f"] / 4000 < 0.78
    first, second = random.Random(7), random.Random(7)
    assert [pick(moves, "weighted", first).move for _ in range(20)] == \
        [pick(moves, "weighted", second).move for _ in range(20)]  # the same seed, the same book line


def test_own_book_respects_book_moves_and_says_a_bad_file_once(tmp_path):
    path = tmp_path / "book.db"
    write_book(path, small_book())
    said: list[str] = []
    own = OwnBook(random.Random(0))
    cfg = BookConfig(enabled=True, file=str(path), max_ply=1, pick="best")
    assert own.play(cshogi.Board(), Limits(), cfg, True, said.append)
    assert said[-1] == "bestmove 7g7f ponder 3c3d"
    assert said[-3].startswith("info string book move 7g7f")
    assert not own.play(parse_position("startpos moves 7g7f"), Limits(), cfg, True, said.append)  # ply 2 > 1
    assert not own.play(cshogi.Board(), Limits(ponder=True), cfg, True, said.append)  # a ponder search is a search
    (tmp_path / "bad.db").write_text("junk\n")
    bad = BookConfig(enabled=True, file=str(tmp_path / "bad.db"))
    said.clear()
    assert not own.play(cshogi.Board(), Limits(), bad, False, said.append)
    assert not own.play(cshogi.Board(), Limits(), bad, False, said.append)
    assert len(said) == 1 and said[0].startswith("info string error: book ") and "without a book" in said[0]


# ---------------------------------------------------------------- making books


def test_book_from_records_counts_games_cuts_at_max_ply_and_drops_rare_moves(tmp_path):
    folder = write_csa(tmp_path / "records", GAMES)
    files = sorted(str(p) for p in folder.glob("*.csa"))
    book, report = book_from_records(files, max_ply=2, progress=False)
    assert report.games == 3 and not report.skipped
    start = {m.move: m.count for m in book.moves(cshogi.Board())}
    assert start == {"7g7f": 2, "2g2f": 1}
    assert book.moves(parse_position("startpos moves 7g7f 3c3d")) == []  # ply 3 > max_ply 2
    assert book.moves(cshogi.Board())[0].ponder in ("3c3d", "8c8d")
    common, _ = book_from_records(files, max_ply=2, min_count=2, progress=False)
    assert [m.move for m in common.moves(cshogi.Board())] == ["7g7f"] and len(common) == 1


def test_book_make_records_cli_writes_a_readable_book_and_refuses_bad_flags(tmp_path, capsys):
    folder = write_csa(tmp_path / "records", GAMES)
    (folder / "junk.csa").write_bytes(b"\x00\xff not a record")
    out = tmp_path / "book.db"
    assert cli_main(["book", "make", "--records", str(folder), "--out", str(out), "--max-ply", "3", "--quiet"]) == 0
    assert len(read_book(out)) == 6  # the start, two positions at ply 2, three at ply 3; junk.csa skipped
    assert cli_main(["book", "make", "--records", str(folder), "--out", str(tmp_path), "--quiet"]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert cli_main(["book", "make", "--records", str(folder), "--out", str(out), "--max-ply", "-1"]) == 2
    assert "book.max_ply" in capsys.readouterr().err


def test_think_book_searches_new_positions_only_and_resumes(model, tmp_path):
    engine = Engine.load(model, overrides=["inference.threads=1"])
    out = tmp_path / "think.db"
    cfg = BookConfig(max_ply=3, playouts=16, share=0.0, positions=2, save_every=1)
    first = make_think_book(engine.player, existing_book(str(out)), str(out), cfg, progress=False)
    assert first.searched == 2
    book = read_book(out)
    start = book.moves(cshogi.Board())
    # share 0: every visited move is booked, counted by its visits
    assert len(start) > 1 and min(m.count for m in start) >= 1 and sum(m.count for m in start) <= 16
    text = out.read_text()
    second = make_think_book(engine.player, existing_book(str(out)), str(out), cfg, progress=False)
    assert second.searched == 2 and second.positions == first.positions + 2
    again = read_book(out)
    assert [(m.move, m.value, m.count) for m in again.moves(cshogi.Board())] == \
        [(m.move, m.value, m.count) for m in start]
    assert all(line in out.read_text() for line in text.splitlines() if line.startswith("sfen"))
    # a malformed output book is refused (before the network loads: the CLI test), and left as it was
    out.write_text("junk\n")
    with pytest.raises(BookError):
        existing_book(str(out))
    assert out.read_text() == "junk\n"


def test_book_make_think_cli_extends_its_book_and_refuses_a_malformed_one(model, tmp_path, capsys):
    out = tmp_path / "think.db"
    make = ["book", "make", "--think", "--model", model, "--out", str(out), "--playouts", "8", "--max-ply", "2",
            "--positions", "1", "--threads", "1", "--quiet"]
    assert cli_main(make) == 0 and len(read_book(out)) == 1
    assert cli_main(make) == 0 and len(read_book(out)) == 2  # the start is kept; one position below it is new
    assert "1 searched this run" in capsys.readouterr().err
    out.write_text(f"{HEADER}\n{START}\n7g7f none 0 0\n")
    assert cli_main(make) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dlzero book: error: ") and ":3: a move line needs 5" in err[0]
    assert out.read_text().endswith("7g7f none 0 0\n")
    assert cli_main(["book", "make", "--records", str(tmp_path), "--model", model, "--out", str(out)]) == 2


# ---------------------------------------------------------------- a GUI's session


def test_usi_engine_plays_book_moves_from_a_made_book_and_searches_elsewhere(model, tmp_path):
    folder = write_csa(tmp_path / "records", [GAMES[0]])
    book = tmp_path / "book.db"
    assert cli_main(["book", "make", "--records", str(folder), "--out", str(book), "--quiet"]) == 0
    (tmp_path / "bad.db").write_text(f"{HEADER}\n{START}\n7g7e none 0 0 1\n")
    commands = [
        "usi", "setoption name USI_OwnBook value true", f"setoption name BookFile value {book}",
        "setoption name BookPick value best", "setoption name BookPick value sometimes", "isready",
        "position startpos", "go btime 0 wtime 0 byoyomi 10000",              # in the book: at once
        "position startpos moves 7g7f 3c3d 2g2f 8c8d 6i7h", "go nodes 8",     # not in it: searched
        "setoption name BookMoves value 1",
        "position startpos moves 7g7f", "go nodes 8",                         # in it, but past BookMoves
        f"setoption name BookFile value {tmp_path / 'bad.db'}", "isready",
        "position startpos", "go nodes 8",                                    # bad book: searched
        "quit",
    ]
    proc = subprocess.run([sys.executable, "-m", "dlzero.usi", "--model", model, "--threads", "1"],
                          input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert "option name USI_OwnBook type check default false" in lines
    assert "option name BookMoves type spin default 16 min 0 max 10000" in lines
    bestmoves = [line for line in lines if line.startswith("bestmove")]
    assert len(bestmoves) == 4 and bestmoves[0] == "bestmove 7g7f"
    book_lines = [line for line in lines if line.startswith("info string book move")]
    assert len(book_lines) == 1 and book_lines[0].startswith("info string book move 7g7f")
    assert lines.index(book_lines[0]) < lines.index(bestmoves[0])
    errors = [line for line in lines if "error" in line]
    assert len(errors) == 2, errors
    assert "BookPick must be one of best, weighted" in errors[0]
    assert errors[1].startswith("info string error: book ") and ":3: move '7g7e' is illegal" in errors[1]
    searched = [line for line in lines if line.startswith("info depth") and "nodes 0 " not in line]
    assert len(searched) >= 3


def test_config_defaults_keep_the_book_off():
    assert Config().book.enabled is False and Config().book.file == ""
