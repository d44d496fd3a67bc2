"""Arena: lockstep matches, game-end rules, CSA records."""

from __future__ import annotations

import cshogi
import cshogi.CSA
import pytest

from dlzero.config import Config
from dlzero.inference import NullEvaluator
from dlzero.position import parse_position
from selfplay.arena import BUILTIN_OPENINGS, GameRecord, append_rating, game_end, load_openings, play_match

CSA_WIN = {cshogi.BLACK: 1, cshogi.WHITE: 2, None: 0}  # cshogi's Parser.win codes


def _cfg(max_moves: int = 30, playouts: int = 8) -> Config:
    cfg = Config()
    cfg.gate.max_moves = max_moves
    cfg.gate.playouts = playouts
    cfg.inference.threads = 1
    return cfg


def test_null_vs_random_games_are_consistent_and_recorded(tmp_path):
    result = play_match(NullEvaluator(), "random", 4, _cfg(), parallel=4, record_dir=tmp_path,
                        names=("null", "rnd"))
    assert len(result.games) == 4 == result.wins + result.draws + result.losses
    assert sorted(g.index for g in result.games) == [0, 1, 2, 3]
    by_index = {g.index: g for g in result.games}
    for i, game in by_index.items():
        assert game.a_is_black == (i % 2 == 0)  # colours alternate
        assert len(game.moves) <= 30
        assert game.reason in ("mate", "repetition", "perpetual_check", "declaration", "max_moves")
        parsed = cshogi.CSA.Parser.parse_str((tmp_path / f"game-{i:03d}.csa").read_text())[0]
        assert parsed.names == (["null", "rnd"] if game.a_is_black else ["rnd", "null"])
        assert parsed.sfen == game.start_sfen
        assert list(parsed.moves) == game.moves
        assert parsed.win == CSA_WIN[game.winner]
        board = cshogi.Board(parsed.sfen)
        for move in parsed.moves:
            assert board.is_legal(move)
            board.push(move)
    # games 2k and 2k+1 share an opening, played once with each colour
    for k in (0, 2):
        a, b = by_index[k], by_index[k + 1]
        assert a.opening_plies == b.opening_plies > 0
        assert a.moves[: a.opening_plies] == b.moves[: b.opening_plies]
    wins = sum(g.score_a == 1.0 for g in result.games)
    assert wins == result.wins


def test_sprt_stops_a_match_early():
    cfg = _cfg(max_moves=12)  # random movers cannot mate in 12 plies: every game is a draw
    cfg.gate.alpha = cfg.gate.beta = 0.45  # bounds +-0.2: a few equal results show "not +35 Elo"
    calls = []
    result = play_match("random", "random", 40, cfg, parallel=4, sprt=True,
                        on_game=lambda g, m: calls.append(m.decision))
    assert result.draws == result.n_games == len(calls) == 5
    assert result.decision == "reject" and result.llr <= result.bounds[0]
    assert calls == ["continue"] * 4 + ["reject"]


def test_random_vs_random_plays_to_real_endings():
    cfg = _cfg(max_moves=400)
    result = play_match("random", "random", 2, cfg, parallel=2, seed=3)
    assert {g.reason for g in result.games} <= {"mate", "repetition", "perpetual_check", "declaration",
                                                  "max_moves"}
    assert all(len(g.moves) > 10 for g in result.games)


def test_game_end_rules():
    mated = cshogi.Board("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    assert game_end(mated, 320) == (cshogi.BLACK, "mate")
    once = parse_position("startpos moves 5i5h 5a5b 5h5i 5b5a")
    assert game_end(once, 320) is None  # the second occurrence: play on (sennichite is the fourth)
    rep = parse_position("startpos moves" + " 5i5h 5a5b 5h5i 5b5a" * 3)
    assert game_end(rep, 320) == (None, "repetition")
    long = parse_position("startpos moves 7g7f 3c3d")
    assert game_end(long, 2) == (None, "max_moves")
    assert game_end(long, 320) is None


@pytest.mark.parametrize("reason,winner,code,win", [
    ("perpetual_check", cshogi.WHITE, "%+ILLEGAL_ACTION", 2),
    ("perpetual_check", cshogi.BLACK, "%-ILLEGAL_ACTION", 1),
    ("declaration", cshogi.BLACK, "%KACHI", 1),
    ("repetition", None, "%SENNICHITE", 0),
    ("resign", cshogi.WHITE, "%TORYO", 2),
])
def test_csa_end_codes(reason, winner, code, win):
    board = parse_position("startpos moves 7g7f 3c3d")
    game = GameRecord(0, True, cshogi.STARTING_SFEN, 2, list(board.history), winner, reason)
    text = game.csa()
    assert code in text
    assert cshogi.CSA.Parser.parse_str(text)[0].win == win


def test_openings(tmp_path):
    for line in BUILTIN_OPENINGS:
        parse_position(line)
    path = tmp_path / "openings.txt"
    path.write_text("# comment\nstartpos moves 7g7f\n\nsfen 4k4/9/9/9/9/9/9/9/4K4 b G 1 moves G*5b\n")
    assert len(load_openings(path)) == 2
    result = play_match("random", "random", 2, _cfg(max_moves=8), openings=load_openings(path)[1:])
    parsed = [cshogi.CSA.Parser.parse_str(g.csa())[0] for g in result.games]
    assert all(p.sfen.startswith("4k4/9/9") for p in parsed)


def test_append_rating_writes_header_once(tmp_path):
    path = tmp_path / "ratings.csv"
    append_rating(path, {"generation": 1, "opponent": 0, "decision": "accept"})
    append_rating(path, {"generation": 2, "opponent": 1, "decision": "reject"})
    lines = path.read_text().splitlines()
    assert lines[0].startswith("generation,opponent,games") and len(lines) == 3
