"""Arena: lockstep matches in colour-swapped pairs, no repeated games, the engine's search, game-end rules,
CSA records."""

from __future__ import annotations

import cshogi
import cshogi.CSA
import pytest
from conftest import opening_key

import dlzero.gating.match as match_mod
from dlzero.config import Config, ModelConfig
from dlzero.engine.player import Player
from dlzero.engine.timeman import Limits
from dlzero.game_end import Verdict, game_end
from dlzero.gating.match import MatchRecord, append_rating, play_match
from dlzero.gating.sprt import pair_llr
from dlzero.inference import NullEvaluator, load_model
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.play import play_rules
from dlzero.play.openings import load_openings
from dlzero.position import parse_position
from dlzero.search import Search

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


def test_sprt_stops_a_match_early_and_counts_pairs():
    cfg = _cfg(max_moves=12)  # random movers cannot mate in 12 plies: every game is a draw
    cfg.gate.alpha = cfg.gate.beta = 0.45  # bounds +-0.2007: a few equal results show "not +35 Elo"
    calls = []
    result = play_match("random", "random", 40, cfg, parallel=4, sprt=True,
                        on_game=lambda g, m: calls.append((g.index, m.n_pairs, m.decision)))
    # every pair scores 1 of 2; with the pseudo-counts (0.25 per category) the LLR after k such pairs
    # is -n^2 (s1 - 1/2)^2 / (2 * 0.15625), n = k + 1.25: k = 3 gives -0.146, k = 4 gives -0.222
    assert result.pairs == [0, 0, 4, 0, 0]
    assert result.draws == result.n_games == len(calls) == 8
    assert result.decision == "reject" and result.llr == pytest.approx(pair_llr(result.pairs, 0, 35))
    assert result.llr == pytest.approx(-0.2223, abs=1e-4)
    # a game is reported when its pair is complete; the test moves only on complete pairs
    assert [(n, d) for _, n, d in calls] == [(k // 2 + k % 2, "continue") for k in range(7)] + [(4, "reject")]
    reported = {i for i, _, _ in calls}
    assert len(reported) == 8 and {i ^ 1 for i in reported} == reported  # four whole pairs


def _tiny_models(tmp_path, cfg: Config, seeds=(1, 2)):
    models = []
    for seed in seeds:
        path = tmp_path / f"m{seed}.pt"
        save_model(new_model(cfg.model, seed=seed), path, ModelMetadata(generation=seed))
        models.append(load_model(path, cfg.inference))
    return models


def _tiny_cfg(max_moves: int, playouts: int = 8) -> Config:
    cfg = _cfg(max_moves=max_moves, playouts=playouts)
    # not conftest's TINY_MODEL: with its 2-channel value head the 24-playout searches of
    # test_arena_and_engine_pick_the_same_move[puct] spread their visits evenly (2 each, Q equal to 1e-4) and the
    # arena and the engine break that near-tie apart (2h5h against 2h3h): issue 50 left it for a look of its own
    cfg.model = ModelConfig(blocks=1, channels=16, value_channels=1, value_fc=16)
    return cfg


def test_48_games_between_two_random_tiny_models_are_48_distinct_games(tmp_path):
    """Deterministic searchers from 12 built-in openings used to give at most 24 distinct games."""
    cfg = _tiny_cfg(max_moves=60)
    a, b = _tiny_models(tmp_path, cfg)
    result = play_match(a, b, 48, cfg, parallel=16)
    assert result.n_games == 48 and result.n_pairs == 24
    assert len({(g.start_sfen, tuple(g.moves)) for g in result.games}) == 48
    # 24 start positions, none a transposition of another, each played once with each colour
    starts: dict[str, set[bool]] = {}
    for g in result.games:
        starts.setdefault(opening_key(g), set()).add(g.a_is_black)
    assert len(starts) == 24 and all(colours == {True, False} for colours in starts.values())
    # pair scores add up to the games' score
    assert sum(k / 2 * n for k, n in enumerate(result.pairs)) == pytest.approx(result.wins + result.draws / 2)


def test_more_pairs_than_openings_vary_the_openings():
    cfg = _cfg(max_moves=6)
    result = play_match("random", "random", 12, cfg, openings=["startpos moves 7g7f 3c3d"], seed=5)
    keys = set()
    for g in result.games:
        keys.add(opening_key(g))
        assert g.moves[:2] == list(parse_position("startpos moves 7g7f 3c3d").history)
    assert len(keys) == 6
    assert {g.opening_plies for g in result.games if g.index >= 2} == {2 + cfg.gate.variation_plies}


def test_leaves_per_tree_do_not_depend_on_the_games_running(monkeypatch):
    seen: list[tuple[int, int | None]] = []
    real_run = Search.run

    def spy(self, trees, playouts, leaves_per_tree=None, **kwargs):
        seen.append((len(trees), leaves_per_tree or self.cfg.leaves_per_tree))
        return real_run(self, trees, playouts, leaves_per_tree, **kwargs)

    monkeypatch.setattr(Search, "run", spy)
    cfg = _cfg(max_moves=40, playouts=12)
    cfg.gate.leaves_per_tree = 3
    cfg.search.leaves_per_tree = 6  # the engine's; the old arena divided its batch size among the trees
    play_match(NullEvaluator(), "random", 8, cfg, parallel=8)
    assert len({n for n, _ in seen}) > 2  # the number of trees searched together varied
    assert {leaves for _, leaves in seen} == {3}


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_arena_and_engine_pick_the_same_move(tmp_path, algorithm):
    cfg = _tiny_cfg(max_moves=60, playouts=24)
    cfg.search.algorithm = algorithm
    cfg.search.leaves_per_tree = cfg.gate.leaves_per_tree = 8  # the engine's and the arena's leaves per tree;
    # three batches per move, so the leaves per batch shape the search
    cfg.search.root_mate_depth = 0
    (model,) = _tiny_models(tmp_path, cfg, seeds=(3,))
    line = "startpos moves 7g7f 3c3d 2g2f 8c8d"
    # four games at once: the first two from `line` (A Black, then A White), two more from variations
    result = play_match(model, model, 4, cfg, parallel=4, openings=[line])
    player = Player(model, cfg)
    player.set_position(parse_position(line))
    best = player.think(Limits(playouts=24)).bestmove
    first_moves = {cshogi.move_to_usi(g.moves[g.opening_plies]) for g in result.games if g.index < 2}
    assert first_moves == {best}


def test_games_at_once_default_to_gate_games_in_parallel(monkeypatch):
    """A match that names no `parallel` plays `gate.games_in_parallel` games at once (the gate, `dlzero
    match` and `dlzero gate` pass none)."""
    seen = []
    real = match_mod.play_lockstep

    def spy(*args, **kwargs):
        seen.append(kwargs["parallel"])
        return real(*args, **kwargs)

    monkeypatch.setattr(match_mod, "play_lockstep", spy)
    cfg = _cfg(max_moves=12)
    cfg.gate.games_in_parallel = 3
    assert play_match("random", "random", 4, cfg).n_games == 4
    assert play_match("random", "random", 2, cfg, parallel=2).n_games == 2
    assert seen == [3, 2]


def test_random_vs_random_plays_to_real_endings():
    cfg = _cfg(max_moves=400)
    result = play_match("random", "random", 2, cfg, parallel=2, seed=3)
    assert {g.reason for g in result.games} <= {"mate", "repetition", "perpetual_check", "declaration",
                                                  "max_moves"}
    assert all(len(g.moves) > 10 for g in result.games)


def test_game_end_rules():
    rules = play_rules(320, "27")
    mated = cshogi.Board("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    assert game_end(mated, rules) == Verdict(cshogi.BLACK, "mate")
    once = parse_position("startpos moves 5i5h 5a5b 5h5i 5b5a")
    assert game_end(once, rules) is None  # the second occurrence: play on (sennichite is the fourth)
    rep = parse_position("startpos moves" + " 5i5h 5a5b 5h5i 5b5a" * 3)
    assert game_end(rep, rules) == Verdict(None, "repetition")
    long = parse_position("startpos moves 7g7f 3c3d")
    assert game_end(long, play_rules(2, "27")) == Verdict(None, "max_moves")
    assert game_end(long, rules) is None


@pytest.mark.parametrize("reason,winner,code,win", [
    ("perpetual_check", cshogi.WHITE, "%+ILLEGAL_ACTION", 2),
    ("perpetual_check", cshogi.BLACK, "%-ILLEGAL_ACTION", 1),
    ("declaration", cshogi.BLACK, "%KACHI", 1),
    ("repetition", None, "%SENNICHITE", 0),
    ("resign", cshogi.WHITE, "%TORYO", 2),
])
def test_csa_end_codes(reason, winner, code, win):
    board = parse_position("startpos moves 7g7f 3c3d")
    game = MatchRecord(0, True, cshogi.STARTING_SFEN, 2, list(board.history), winner, reason)
    text = game.csa()
    assert code in text
    assert cshogi.CSA.Parser.parse_str(text)[0].win == win


def test_openings_file(tmp_path):
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


class _FirstMove:
    """A MoveChooser: the first legal move, or resign once the game is `resign_at` plies long."""

    name = "first"

    def __init__(self, resign_at: int = 10_000) -> None:
        self.resign_at = resign_at

    def choose(self, games):
        return [None if len(g.board.history) >= self.resign_at else next(iter(g.board.legal_moves)) for g in games]


def test_move_chooser_sides_play_and_resign():
    result = play_match(_FirstMove(), "random", 4, _cfg(max_moves=20), parallel=4)
    assert result.n_games == 4 and result.n_pairs == 2
    for g in result.games:
        board = cshogi.Board(g.start_sfen)
        for ply, move in enumerate(g.moves):
            mover_is_a = (board.turn == cshogi.BLACK) == g.a_is_black
            if mover_is_a and ply >= g.opening_plies:
                assert move == next(iter(board.legal_moves))
            board.push(move)
    resigner = play_match(_FirstMove(resign_at=0), "random", 2, _cfg(), parallel=2)
    assert {g.reason for g in resigner.games} == {"resign"} and resigner.losses == 2
    assert resigner.pairs == [1, 0, 0, 0, 0]
