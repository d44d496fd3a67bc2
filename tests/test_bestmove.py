"""`dlzero bestmove`: prints a legal move, or the analysis as JSON; bad input exits 2."""

from __future__ import annotations

import argparse
import json

import cshogi
import pytest

from dlzero.commands import bestmove
from dlzero.errors import ConfigError, DlzeroError


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    bestmove.register(parser.add_subparsers())
    args = parser.parse_args(["bestmove", "--threads", "1", *argv])
    return args.func(args)


def test_prints_legal_move(model, capsys):
    assert _run(["--model", model, "--position", "startpos moves 7g7f", "--playouts", "40"]) == 0
    move = capsys.readouterr().out.strip()
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(move))


def test_json_has_the_analysis(model, capsys):
    assert _run(["--model", model, "--sfen", cshogi.STARTING_SFEN, "--playouts", "40", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"position", "bestmove", "pv", "winrate", "score_cp", "moves", "nodes", "playouts"}


def test_playouts_are_search_playouts(model, capsys):
    """--playouts sets search.playouts, and without it the config's value is searched."""
    assert _run(["--model", model, "--position", "startpos", "--set", "search.playouts=24", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["playouts"] == 24
    assert _run(["--model", model, "--position", "startpos", "--set", "search.playouts=24", "--playouts", "32",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["playouts"] == 32
    with pytest.raises(ConfigError, match="search.playouts"):
        _run(["--model", model, "--position", "startpos", "--playouts", "0"])


def test_errors_are_dlzero_errors(model, tmp_path):
    with pytest.raises(DlzeroError):
        _run(["--model", model, "--position", "startpos moves 9a9b"])
    with pytest.raises(DlzeroError):
        _run(["--model", str(tmp_path / "missing.pt"), "--position", "startpos"])


def test_flags_have_the_usi_options_bounds_and_illegal_positions_are_refused(model, capsys):
    """Issue 52: `--threads 2000` gave no answer in 120 s (USI caps Threads at 256), and an SFEN with the two
    kings adjacent was played (`bestmove 5f5e`, the king taking the king)."""
    for flag in (["--threads", "2000"], ["--threads", "-1"], ["--batch", "4097"], ["--batch", "0"]):
        with pytest.raises(SystemExit) as info:
            _run(["--model", model, "--position", "startpos", *flag])
        assert info.value.code == 2
        assert "must be from" in capsys.readouterr().err
    for sfen in ("9/9/9/9/4k4/4K4/9/9/9 b - 1", "4k4/9/9/9/9/9/9/9/4K4 b - 2147483647"):
        with pytest.raises(DlzeroError):
            _run(["--model", model, "--sfen", sfen])
    assert _run(["--model", model, "--position", "startpos", "--batch", "4096", "--playouts", "16"]) == 0
    assert capsys.readouterr().out.strip()
