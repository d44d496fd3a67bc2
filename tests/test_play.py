"""Every game is played in one place: a self-play game, a gate game and a rating game (real games, a tiny
model from dlzero's own init) all have every move played by `dlzero.play.driver.play_lockstep`."""

from __future__ import annotations

import sys

import cshogi
import numpy as np
import pytest
from conftest import TINY_MODEL_SETS

from dlzero.config import load_config
from dlzero.game_end import Verdict
from dlzero.gating.promotion import gate_and_promote
from dlzero.gating.rating import load_batches, rate
from dlzero.inference import load_model
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.play import END_RESIGN, Game, RandomMover, driver, play_lockstep, play_rules
from dlzero.rundir import RunDir
from dlzero.selfplay.games import FinishedRecord, play_selfplay_games

SMALL = [*TINY_MODEL_SETS, "inference.threads=1",
         "search.root_mate_depth=3", "selfplay.playouts=4", "selfplay.cheap_playouts=2",
         "selfplay.max_moves=16", "selfplay.games_in_parallel=1", "gate.max_moves=30", "gate.playouts=4",
         "rate.games=2", "rate.playouts=4", "rate.anchors=[random]"]


@pytest.fixture()
def moves_played(monkeypatch) -> dict[Game, list[int]]:
    """Every move the driver plays, by game; each must be played from inside `play_lockstep`."""
    seen: dict[Game, list[int]] = {}
    real = driver.play_move

    def spy(game: Game, move: int, reuse: bool) -> None:
        assert sys._getframe(1).f_code is play_lockstep.__code__
        seen.setdefault(game, []).append(move)
        real(game, move, reuse)

    monkeypatch.setattr(driver, "play_move", spy)
    return seen


def _all_through_the_driver(seen: dict[Game, list[int]]) -> set[str]:
    """The kinds of game the driver played; every move after each game's opening went through it."""
    for game, moves in seen.items():
        assert game.end is not None and moves == game.board.history[game.opening_plies:]
    return {type(game).__name__ for game in seen}


def test_selfplay_gate_and_rating_games_all_go_through_the_one_driver(tmp_path, moves_played):
    cfg = load_config(None, SMALL)
    rd = RunDir.create(tmp_path / "run", cfg)
    for g in (0, 1):
        save_model(new_model(cfg.model, seed=g), rd.model_path(g), ModelMetadata(generation=g))
    rd.set_best(0)

    done: list[FinishedRecord] = []
    evaluator = load_model(rd.model_path(0), cfg.inference)
    try:
        stats = play_selfplay_games(evaluator, cfg, 1, done.append, np.random.default_rng(0))
    finally:
        evaluator.close()
    assert stats.games == len(done) == 1 and done[0].plies > 0
    assert _all_through_the_driver(moves_played) == {"SelfPlayGame"}
    [game] = moves_played
    assert game.record is done[0].record and len(moves_played[game]) == done[0].plies

    moves_played.clear()
    gate = gate_and_promote(rd, cfg, 1, progress=False, games=2, playouts=4, parallel=2, report=False)
    assert gate.games == 2 and len(moves_played) == 2
    assert _all_through_the_driver(moves_played) == {"_Playing"}
    assert len(list((rd.games_dir / "gen-0001-vs-gen-0000").glob("*.csa"))) == 2

    moves_played.clear()
    report = rate(rd, cfg, [1], progress=False)
    assert report.played == 2 and len(moves_played) == 2
    assert _all_through_the_driver(moves_played) == {"_Playing"}
    [(_, batch)] = load_batches(rd)[0]
    stored = sorted(g["moves"].split()[g["opening_plies"]:] for g in batch.games)
    assert stored == sorted([cshogi.move_to_usi(m) for m in moves] for moves in moves_played.values())


class _Resigner:
    """Resigns every game it is asked to move in."""

    name = "resigner"

    def choose(self, games):
        return [None] * len(games)


def test_driver_routes_moves_by_seat_settles_by_the_rules_and_resigns(moves_played):
    over = Game(cshogi.Board("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1"))  # White is mated: no move is asked for
    black_random = Game(cshogi.Board(), seats=(0, 1))
    black_resigns = Game(cshogi.Board(), seats=(1, 0))
    queue = [over, black_random, black_resigns]
    ended: list[Game] = []
    played = play_lockstep([RandomMover(1), _Resigner()], lambda: queue.pop(0) if queue else None, ended.append,
                           play_rules(40, "27"), parallel=2, reuse_trees=True)
    assert played.unfinished == [] and ended == [over, black_random, black_resigns]
    assert over.end == Verdict(cshogi.BLACK, "mate") and over.board.history == []
    assert black_resigns.end == Verdict(cshogi.WHITE, END_RESIGN) and black_resigns.board.history == []
    # Black (the random mover) moved once, then White resigned
    assert len(black_random.board.history) == 1 and black_random.end == Verdict(cshogi.BLACK, END_RESIGN)
    assert list(moves_played) == [black_random]


class _Fixed:
    """Plays the given USI move in every game; `declare` sets a declaration win itself and returns None."""

    name = "fixed"

    def __init__(self, usi: str = "", declare: bool = False) -> None:
        self.usi, self.declare = usi, declare

    def choose(self, games):
        if self.declare:
            for game in games:
                game.end = Verdict(game.board.turn, "declaration")
            return [None] * len(games)
        return [game.board.move_from_usi(self.usi) for game in games]


def test_driver_settles_the_last_move_before_it_stops():
    mate_in_one = Game(cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 b G 1"))
    ended: list[Game] = []
    played = play_lockstep([_Fixed("G*5b")], lambda: None if ended or mate_in_one.end else mate_in_one,
                           ended.append, play_rules(40, "27"), parallel=1, reuse_trees=True,
                           should_stop=lambda steps: steps >= 1)
    assert played.steps == 1 and played.unfinished == [] and ended == [mate_in_one]
    assert mate_in_one.end == Verdict(cshogi.BLACK, "mate")


def test_driver_keeps_an_end_the_player_set_and_refuses_a_seat_nobody_plays():
    game = Game(cshogi.Board())
    ended: list[Game] = []
    play_lockstep([_Fixed(declare=True)], lambda: None if ended or game.end else game, ended.append,
                  play_rules(40, "27"), parallel=1, reuse_trees=True)
    assert ended == [game] and game.end == Verdict(cshogi.BLACK, "declaration")  # not turned into a resignation
    with pytest.raises(ValueError, match="seats player 2"):
        play_lockstep([_Fixed("7g7f"), _Fixed("3c3d")], lambda: Game(cshogi.Board(), seats=(0, 2)), ended.append,
                      play_rules(40, "27"), parallel=1, reuse_trees=True)
