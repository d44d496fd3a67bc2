"""miniosl's network as a rating opponent (`miniosl:sample=N`): the name, the sampled plies, the greedy rest.

A fake network (every legal move equally likely, the first one its choice) checks the sampling rule
exactly; the real network plays where miniosl is installed.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import cshogi
import numpy as np
import pytest

from dlzero.config import Config
from dlzero.inference.miniosl import MinioslError, MinioslEval
from dlzero.play import Game
from dlzero.play.players import MinioslPlayer
from dlzero.play.registry import PlayContext, build_player
from dlzero.player_names import check_anchor, parse_anchor
from dlzero.position import parse_position, position_string, start_position


class UniformNetwork:
    """Policy: every legal move equally likely; its move: the first legal move. Records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def evaluate(self, positions: Sequence[tuple[str, cshogi.Board]], temperature: float = 1.0) -> list[MinioslEval]:
        out = []
        for usi, board in positions:
            self.asked.append(usi)
            moves = [cshogi.move16(m) for m in board.legal_moves]
            out.append(MinioslEval(moves, np.full(len(moves), 1.0 / len(moves)), 0.5))
        return out


def test_anchor_name_has_one_spelling():
    assert parse_anchor("miniosl:sample=12").canonical() == "miniosl:sample=12"
    assert parse_anchor("miniosl:sample=0").value == "0"
    for bad in ("miniosl", "miniosl:sample=012", "miniosl:sample=-1", "miniosl:plies=12"):
        assert check_anchor(bad) is not None, bad


def test_anchor_name_with_a_model_file_round_trips():
    name = "miniosl:sample=3:model=/nets/miniosl 0.1.9/eval.onnx"
    spec = parse_anchor(name)
    assert (spec.value, spec.options) == ("3", (("model", "/nets/miniosl 0.1.9/eval.onnx"),))
    assert spec.canonical() == name and parse_anchor(spec.canonical()) == spec
    assert spec != parse_anchor("miniosl:sample=3")  # another network, another player in the ratings
    for bad in ("miniosl:sample=3:model=", "miniosl:sample=3:model=eval.onnx", "miniosl:sample=3:model= /a.onnx",
                "miniosl:model=/a.onnx:sample=3", "miniosl:sample=03:model=/a.onnx", "miniosl:sample=3:net=/a.onnx"):
        assert check_anchor(bad) is not None, bad


def test_sampled_plies_then_the_networks_own_move():
    network = UniformNetwork()
    first = next(iter(parse_position("startpos").legal_moves))
    openings = set()
    for seed in range(8):
        player = MinioslPlayer(network, "m", sample_plies=1, seed=seed)
        game = Game(parse_position("startpos"))
        move = player.choose([game])[0]
        openings.add(move)
        game.board.push(move)
        # past the sampled plies: the network's own move, whatever the seed
        assert player.choose([game]) == [next(iter(game.board.legal_moves))]
    assert len(openings) > 1  # 8 draws from 30 equally likely moves
    assert MinioslPlayer(network, "m", sample_plies=0, seed=5).choose([Game(parse_position("startpos"))]) == [first]


def test_the_network_sees_the_whole_history_of_every_game_in_batches():
    network = UniformNetwork()
    line = "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2 moves 3c3d"
    games = [Game(parse_position(line)) for _ in range(40)]
    moves = MinioslPlayer(network, "m").choose(games)
    assert len(moves) == 40 and all(games[0].board.is_legal(m) for m in moves)
    assert network.asked == [line] * 40


def test_miniosl_anchor_plays_legal_moves():
    pytest.importorskip("miniosl", reason="miniosl is not installed: pip install -e '.[teacher]'")
    player = build_player("miniosl:sample=4", PlayContext(Config(), seed=3))
    games = [Game(parse_position("startpos")) for _ in range(3)]
    for _ in range(10):
        for game, move in zip(games, player.choose(games), strict=True):
            assert move is not None and game.board.is_legal(move)
            game.board.push(move)
    assert len({tuple(g.board.history) for g in games}) > 1  # sampled openings differ
    # past its sampled plies it plays its own most probable move
    board = games[0].board
    (e,) = player.network.evaluate([(position_string(board, start_position(board)), board)])
    assert player.choose([Game(board.copy())]) == [board.move_from_move16(e.best())]


def test_miniosl_anchor_plays_the_model_file_it_names(tmp_path):
    miniosl = pytest.importorskip("miniosl", reason="miniosl is not installed: pip install -e '.[teacher]'")
    model = tmp_path / "copy.onnx"
    shutil.copy(miniosl.pretrained_eval_path(), model)
    named = build_player(f"miniosl:sample=0:model={model}", PlayContext(Config()))
    assert named.network.path == str(model) and named.name.endswith(str(model))
    default = build_player("miniosl:sample=0", PlayContext(Config()))
    line = "startpos moves 7g7f 3c3d 2g2f"
    games = [Game(parse_position(p)) for p in ("startpos", line)]
    assert named.choose(games) == default.choose(games)  # the same network in another file plays the same
    with pytest.raises(MinioslError, match="no ONNX model file at .*missing.onnx$"):
        build_player(f"miniosl:sample=0:model={tmp_path / 'missing.onnx'}", PlayContext(Config()))


def test_a_replica_plays_at_once_with_the_same_network_and_draws_of_its_own():
    """Games at once (`play_concurrently`): a replica shares the network (no second copy in memory), plays
    its own move exactly as the original does, and samples from a seed of its own (slot 0: the player)."""
    network = UniformNetwork()
    player = MinioslPlayer(network, "m", sample_plies=1, seed=4)
    assert player.replica(0) is player
    other = player.replica(1)
    assert other.network is network and other.name == "m" and other.sample_plies == 1 and other.seed != player.seed
    draws = {name: [p.choose([Game(parse_position("startpos"))])[0] for _ in range(6)]
             for name, p in (("player", MinioslPlayer(network, "m", 1, seed=4)), ("replica", other))}
    assert draws["player"] != draws["replica"]  # 6 draws from 30 moves each: the same six only by a seed shared
    game = Game(parse_position("startpos moves 7g7f"))
    assert other.choose([game]) == player.choose([game])  # past the sampled plies: the network's own move
