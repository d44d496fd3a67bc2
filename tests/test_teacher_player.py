"""A teacher as a rating opponent (`miniosl:sample=N`): the name, the sampled opening plies, the greedy rest.

A fake teacher (a fixed policy over the legal moves) checks the sampling rule exactly; the real miniosl
network plays a game against itself where miniosl is installed.
"""

from __future__ import annotations

from collections.abc import Sequence

import cshogi
import pytest

from dlzero.config import parse_anchor
from dlzero.gating.anchors import builtin_chooser, check_anchor
from dlzero.play.game import Game
from dlzero.position import parse_position
from dlzero.teacher.base import Label, Query, Teacher
from dlzero.teacher.player import TeacherPlayer


class FixedTeacher(Teacher):
    """Policy: every legal move equally likely; its move: the first legal move. Records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def label(self, queries: Sequence[Query]) -> list[Label]:
        out = []
        for q in queries:
            self.asked.append(q.usi())
            moves = [cshogi.move16(m) for m in q.board.legal_moves]
            out.append(Label(moves[0], 0.5, tuple((m, 1.0 / len(moves)) for m in moves)))
        return out

    def close(self) -> None:
        pass


def test_anchor_name_has_one_spelling():
    assert parse_anchor("miniosl:sample=12").canonical() == "miniosl:sample=12"
    assert parse_anchor("miniosl:sample=0").value == "0"
    for bad in ("miniosl", "miniosl:sample=012", "miniosl:sample=-1", "miniosl:plies=12"):
        assert check_anchor(bad) is not None, bad


def test_greedy_after_the_sampled_plies_and_sampled_before():
    teacher = FixedTeacher()
    first = [cshogi.move_to_usi(m) for m in [next(iter(parse_position("startpos").legal_moves))]]
    openings = set()
    for seed in range(8):
        player = TeacherPlayer(teacher, "fixed", sample_plies=1, seed=seed)
        game = Game(parse_position("startpos"))
        move = player.choose([game])[0]
        openings.add(cshogi.move_to_usi(move))
        game.board.push(move)
        # past the sampled plies: the teacher's own move, whatever the seed
        assert player.choose([game]) == [next(iter(game.board.legal_moves))]
    assert len(openings) > 1  # 8 draws from 30 equally likely moves
    greedy = TeacherPlayer(teacher, "fixed", sample_plies=0, seed=5)
    assert [cshogi.move_to_usi(m) for m in greedy.choose([Game(parse_position("startpos"))])] == first


def test_teacher_sees_the_whole_history():
    teacher = FixedTeacher()
    board = parse_position("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2 moves 3c3d")
    TeacherPlayer(teacher, "fixed").choose([Game(board)])
    assert teacher.asked == ["sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2 moves 3c3d"]


def test_resigning_teacher_resigns():
    class Resigner(FixedTeacher):
        def label(self, queries):
            return [Label(None, 0.0) for _ in queries]

    assert TeacherPlayer(Resigner(), "r").choose([Game(parse_position("startpos"))]) == [None]


def test_miniosl_anchor_plays_legal_moves():
    pytest.importorskip("miniosl", reason="miniosl is not installed: pip install -e '.[teacher]'")
    player = builtin_chooser("miniosl:sample=4", seed=3)
    games = [Game(parse_position("startpos")) for _ in range(3)]
    for _ in range(10):
        for game, move in zip(games, player.choose(games), strict=True):
            assert move is not None and game.board.is_legal(move)
            game.board.push(move)
    histories = {tuple(g.board.history) for g in games}
    assert len(histories) > 1  # sampled openings differ
