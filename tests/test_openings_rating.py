"""The rating suite (configs/openings/rating.txt): ratings start where no training game starts.

Its lines share no position with the gate suite or the teacher's default openings either way; `dlzero
rate` and `dlzero match` play from it by default; `dlzero teach` and self-play refuse it unless allowed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import cshogi
import numpy as np
import pytest
from test_selfplay import tiny_config, tiny_evaluator

from dlzero.cli import main
from dlzero.config import load_config
from dlzero.data.hcpe3 import read_hcpe3
from dlzero.errors import ConfigError
from dlzero.gating.rating import fit_run, load_batches, rate, rating_suite
from dlzero.play.openings import (
    GATE_SUITE,
    RATING_SUITE,
    SuiteSettings,
    generate_suite,
    is_balanced,
    line_keys,
    load_openings,
    position_key,
    refuse_rating_openings,
)
from dlzero.position import parse_position
from dlzero.rundir import RunDir
from dlzero.selfplay.games import play_selfplay_games
from dlzero.teacher.sources import opening_lines

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "openings16.txt"  # the prefixes both shipped suites were made from


def _ends(lines: list[str]) -> set[str]:
    return {position_key(parse_position(line)) for line in lines}


def _along(lines: list[str]) -> set[str]:
    """Every position along the lines, their start positions (ply 0) included."""
    return {key for line in lines for key in line_keys(line)}


def _header(path: Path) -> list[str]:
    return [line[2:] for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# ")]


@pytest.fixture(scope="module")
def rating() -> list[str]:
    return load_openings(RATING_SUITE)


def test_rating_suite_is_large_distinct_balanced_and_made_otherwise_than_the_gate_suite(rating):
    assert len(rating) >= 500
    assert len(_ends(rating)) == len(rating)  # no duplicates, no transpositions
    assert all(is_balanced(parse_position(line), 0.0) for line in rating)
    gate_made, rating_made = (next(h for h in _header(p) if h.startswith("made by: dlzero openings "))
                              for p in (GATE_SUITE, RATING_SUITE))
    seed = [shlex.split(made)[shlex.split(made).index("--seed") + 1] for made in (gate_made, rating_made)]
    assert seed[0] != seed[1]
    assert "--exclude configs/openings/gate.txt" in rating_made


@pytest.mark.skipif(not SHARED.is_file(), reason=f"{SHARED} (the suites' prefixes) not found")
def test_the_header_command_remakes_the_rating_suite(rating, tmp_path, monkeypatch):
    """The command named in rating.txt's header, run for its first 40 lines, makes exactly those lines
    (a suite is made one line after another, so its start does not depend on --count)."""
    made = next(h for h in _header(RATING_SUITE) if h.startswith("made by: "))
    args = shlex.split(made.removeprefix("made by: dlzero "))
    args[args.index("--count") + 1] = "40"
    monkeypatch.chdir(ROOT)  # the header's paths are the checkout's
    assert main([*args, "--out", str(tmp_path / "again.txt")]) == 0
    assert load_openings(tmp_path / "again.txt") == rating[:40]


def test_no_rating_start_position_is_reached_by_the_gate_or_teacher_lines_and_back(rating):
    defaults = load_config(None, [])
    gate = load_openings(defaults.gate.openings)  # the gate's default suite
    teacher = opening_lines(defaults.teach.openings or None)  # what `dlzero teach` plays from by default
    rating_ends = _ends(rating)
    for trained in (gate, teacher):
        assert rating_ends.isdisjoint(_along(trained))  # start position (ply 0) and every later ply
    assert cshogi.Board().sfen().rsplit(" ", 1)[0] not in rating_ends  # no rating game starts at the start
    gate_ends = _ends(gate) | _ends(teacher)
    for line in rating:
        assert gate_ends.isdisjoint(line_keys(line)[1:]), line


def test_generate_suite_keeps_clear_of_the_excluded_lines_both_ways():
    settings = SuiteSettings(min_plies=2, max_plies=6)
    first = generate_suite(40, 4, settings, progress=False)
    # the same seed again, clear of those lines and of every line opening 7g7f: the same samples come up
    # and must be passed over
    exclude = [*first, "startpos moves 7g7f"]
    again = generate_suite(40, 4, settings, exclude=exclude, progress=False)
    assert _ends(again).isdisjoint(_along(exclude))
    assert all(_ends(exclude).isdisjoint(line_keys(line)[1:]) for line in again)
    assert any(line.startswith("startpos moves 7g7f ") for line in first)  # ... which would have come up
    assert not any(line.startswith("startpos moves 7g7f ") for line in again)


def test_teach_refuses_the_rating_suite_and_copies_of_it_unless_allowed(rating, engine, tmp_path, capsys):
    mixed = tmp_path / "mine.txt"  # a few of its lines among others: the positions count, not the file name
    mixed.write_text("startpos moves 7g7f 3c3d\n" + "\n".join(rating[5:8]) + "\n")
    out = tmp_path / "t.hcpe3"
    base = ["teach", "--teacher", f"{engine};ResignPly=40", "--out", str(out), "--positions", "2",
            "--part-games", "1", "--sample-plies", "0", "--quiet"]
    for suite in (RATING_SUITE, mixed):
        assert main([*base, "--openings", str(suite)]) == 2
        err = capsys.readouterr().err
        assert "rating suite rating.txt" in err and "--allow-rating-openings" in err and len(err.splitlines()) == 1
        assert not out.exists() and not Path(f"{out}.parts").exists()  # refused before any game
    assert main([*base, "--openings", str(RATING_SUITE), "--allow-rating-openings"]) == 0
    ends = _ends(rating)
    games = read_hcpe3(out)
    assert games
    for game in games:  # allowed: each game passed through where a rating line ends
        board = game.start_board()
        keys = set()
        for move in game.moves:
            board.push_move16(move.move16)
            keys.add(position_key(board))
        assert keys & ends
    assert opening_lines(None)  # the teacher's default suite (gate.txt) is accepted without the switch


def test_selfplay_refuses_the_rating_suite_unless_allowed(rating, tmp_path):
    suite = tmp_path / "open.txt"
    suite.write_text(rating[0] + "\n")
    cfg = tiny_config(f"selfplay.openings={suite}", "selfplay.max_moves=60")
    evaluator = tiny_evaluator(cfg, tmp_path)
    try:
        with pytest.raises(ConfigError, match="selfplay.allow_rating_openings"):
            play_selfplay_games(evaluator, cfg, 1, lambda game: None, np.random.default_rng(0))
        cfg.selfplay.allow_rating_openings = True
        done = []
        play_selfplay_games(evaluator, cfg, 1, done.append, np.random.default_rng(0))
    finally:
        evaluator.close()
    [game] = done
    board = game.record.start_board()
    for move in game.record.moves[:game.opening_plies]:
        board.push_move16(move.move16)
    assert position_key(board) == line_keys(rating[0])[-1]


def test_refusal_names_the_file_and_the_first_rating_line(rating):
    with pytest.raises(ConfigError, match=r"^x\.txt: 1 of its 2 openings .* \(opening 2 first\)"):
        refuse_rating_openings(["startpos", rating[10]], "x.txt", "--ok")
    refuse_rating_openings(load_openings(GATE_SUITE), "gate.txt", "--ok")


def test_rate_and_match_play_from_the_rating_suite_by_default(rating, tmp_path, capsys):
    cfg = load_config(None, [])
    lines, tag = rating_suite(cfg)
    assert lines == rating and tag.startswith("rating.txt:")
    ends = {"rating": _ends(rating), "gate": _ends(load_openings(GATE_SUITE))}

    small = ["--set", "gate.max_moves=40", "--set", "rate.anchors=[random, alphabeta:1]", "--set", "rate.games=2"]
    rd = RunDir.create(tmp_path / "run", load_config(None, []))
    assert main(["rate", "--run", str(rd.root), "--generations", "", "--no-progress", *small]) in (0, 1)
    [(_, batch)] = load_batches(rd)[0]
    assert batch.settings["openings"] == tag and len(batch.games) == 2
    for g in batch.games:
        board = cshogi.Board(g["start_sfen"])
        for usi in g["moves"].split()[:g["opening_plies"]]:
            board.push_usi(usi)
        assert position_key(board) in ends["rating"]
    capsys.readouterr()

    for flag, suite in (([], "rating"), (["--openings", str(GATE_SUITE)], "gate")):
        csa = tmp_path / f"csa-{suite}"
        assert main(["match", "random", "random", "--games", "2", "--csa-dir", str(csa), *flag, *small]) == 0
        for record in sorted(csa.glob("*.csa")):
            parsed = cshogi.CSA.Parser.parse_str(record.read_text())[0]
            board = cshogi.Board(parsed.sfen)
            keys = set()
            for move in parsed.moves:
                board.push(move)
                keys.add(position_key(board))
            assert keys & ends[suite] and not keys & ends["gate" if suite == "rating" else "rating"]


def test_batches_from_before_the_suite_was_stored_count_as_the_gate_suites(tmp_path):
    cfg = load_config(None, ["gate.max_moves=40", "rate.anchors=[random, alphabeta:1]", "rate.games=2"])
    rd = RunDir.create(tmp_path / "run", cfg)
    rate(rd, cfg, [], progress=False)
    [(path, _)] = load_batches(rd)[0]
    data = json.loads(path.read_text())
    del data["settings"]["openings"]  # as every batch stored before rating.txt existed
    path.write_text(json.dumps(data))
    assert fit_run(rd, cfg).left_out == 2  # rating.txt now: old games from gate.txt do not count
    cfg.rate.openings = str(GATE_SUITE)
    assert fit_run(rd, cfg).left_out == 0  # naming gate.txt refits them
