"""The teacher's own games on `dlzero.play`'s driver: `TeacherPlayer` plays `TeacherGame`s through
`play_lockstep`, every teacher ply recorded as a training target and every way a teacher game ends
stored as `dlzero.play.record` says.

The teacher here is a small real `Teacher` whose every label is known in advance: the first legal
move by USI text, a policy of 0.75 / 0.25 over the first two, a win rate of 0.6; from a given move
number on it resigns or declares; optionally every label announces a mate.
"""

from __future__ import annotations

from collections.abc import Sequence

import cshogi
import numpy as np
import pytest

from dlzero.data.hcpe3 import BLACK_WIN, FLAG_MAX_MOVES, FLAG_NYUGYOKU, RESULT_DRAW, WHITE_WIN, Hcpe3Record
from dlzero.game_end import END_DECLARATION, END_MATE, GameRules, Verdict
from dlzero.play import END_RESIGN, MoveChooser, play_lockstep, play_rules
from dlzero.position import parse_position
from dlzero.search.result import winrate_to_cp
from dlzero.teacher import Label, PlaySettings, Query, Teacher
from dlzero.teacher.label import TeacherGame, TeacherPlayer, play_teacher_games

RULES = play_rules(320, "27")
LINE = "startpos moves 7g7f 3c3d"  # move 3, Black to move


def first_two(board: cshogi.Board) -> list[int]:
    """The move16 of the first two legal moves by USI text: the scripted teacher's move and runner-up."""
    usis = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)[:2]
    return [cshogi.move16(board.move_from_usi(u)) for u in usis]


class _Scripted(Teacher):
    """Labels known in advance (see the module docstring); from move number `stop_at` on it resigns,
    or declares (`declare`). It notes the boards of every `label` call."""

    name = "scripted"

    def __init__(self, stop_at: int = 1000, declare: bool = False, proven: bool = False, batch_size: int = 1) -> None:
        self.stop_at, self.declare, self.proven, self.batch_size = stop_at, declare, proven, batch_size
        self.asked: list[list[cshogi.Board]] = []

    def label(self, queries: Sequence[Query]) -> list[Label]:
        self.asked.append([q.board for q in queries])
        labels = []
        for query in queries:
            if query.board.move_number >= self.stop_at:
                labels.append(Label(None, 1.0 if self.declare else 0.0, declared=self.declare))
                continue
            best, second = first_two(query.board)
            labels.append(Label(best, 0.6, ((best, 0.75), (second, 0.25)), proven=self.proven))
        return labels

    def close(self) -> None:
        pass


def play(teacher: Teacher, lines: Sequence[str], rules: GameRules = RULES, sample_plies: int = 0,
         parallel: int = 1, seed: int = 0) -> tuple[list[TeacherGame], TeacherPlayer, list[int]]:
    """The games of `lines` (one each, started in that order) played on the driver: (the games in the
    order they ended, the player, what it reported)."""
    reported: list[int] = []
    player = TeacherPlayer(teacher, sample_plies, rules, np.random.default_rng(seed), reported.append)
    games = iter([TeacherGame.from_board(parse_position(line), i) for i, line in enumerate(lines)])
    ended: list[TeacherGame] = []
    play_lockstep([player], lambda: next(games, None), ended.append, rules, parallel=parallel, reuse_trees=False)
    return ended, player, reported


def test_a_teacher_game_on_the_driver_records_every_teacher_ply():
    (game,), player, reported = play(_Scripted(stop_at=9), [LINE])
    assert isinstance(player, MoveChooser) and player.name == "scripted"
    assert game.end == Verdict(cshogi.WHITE, END_RESIGN)  # at move 9 Black, to move, resigned
    record = game.finished()
    assert record.result == WHITE_WIN
    assert np.array_equal(record.start_hcp, Hcpe3Record.from_board(cshogi.Board()).start_hcp)  # the line's start
    board = cshogi.Board()
    for i, ply in enumerate(record.moves):
        if i < 2:  # the line's plies: replay-only
            assert not len(ply.candidates)
            assert ply.move16 == cshogi.move16(board.move_from_usi(["7g7f", "3c3d"][i]))
        else:
            best, second = first_two(board)
            assert ply.move16 == best and ply.eval == winrate_to_cp(0.6)
            assert ply.candidates.tolist() == [[best, 7500], [second, 2500]]
        board.push_move16(ply.move16)
    assert board.move_number == 9 and game.played == 6
    assert reported == [1] * 6 + [0] and player.positions == 6  # the resignation is no position


def test_a_declaration_is_the_side_to_moves_win():
    (game,), _, _ = play(_Scripted(stop_at=6, declare=True), [LINE])
    assert game.end == Verdict(cshogi.WHITE, END_DECLARATION) and game.played == 3  # moves 3, 4, 5
    assert game.finished().result == WHITE_WIN | FLAG_NYUGYOKU


def test_an_announced_mate_ends_the_game_unless_the_rules_end_it_first():
    (game,), _, _ = play(_Scripted(proven=True), [LINE])
    assert game.end == Verdict(cshogi.BLACK, END_MATE) and game.played == 1  # the mover wins at once
    assert game.finished().result == BLACK_WIN
    assert game.record.moves[-1].move16 == first_two(parse_position(LINE))[0]  # its move is played and kept
    # the same move reaches the move cap (move 4 > 3): the rules' draw, as for any move
    (game,), _, _ = play(_Scripted(proven=True), [LINE], rules=play_rules(3, "27"))
    assert game.played == 1 and game.finished().result == RESULT_DRAW | FLAG_MAX_MOVES


def test_games_are_labelled_in_the_order_they_started_not_by_slot():
    """Game 0 ends first and game 2 takes its slot, ahead of game 1: the teacher is still asked about
    game 1 first, so a seed draws its sampled moves in the same order however the slots fall."""
    teacher = _Scripted(stop_at=7)
    lines = ["startpos moves 7g7f 3c3d 2g2f 8c8d", "startpos", "startpos"]  # 2, 6 and 6 teacher plies
    ended, _, _ = play(teacher, lines, parallel=2)
    serial = {id(game.board): game.serial for game in ended}
    asked = [[serial[id(board)] for board in call] for call in teacher.asked]
    assert asked == [[0, 1]] * 3 + [[1, 2]] * 4 + [[2]] * 3
    assert [game.serial for game in ended] == [0, 1, 2]


def test_play_teacher_games_stores_games_in_the_order_they_ended_then_started():
    """Seed 35 starts the suite's lines in order: A ends at step 3 and B takes its slot, ahead of the
    startpos game; both end at step 7, and the startpos game, started first, is stored first."""
    a, b = "startpos moves 7g7f 3c3d 2g2f 8c8d", "startpos moves 7g7f 3c3d 2g2f"  # 2 and 3 teacher plies
    games, positions = play_teacher_games(_Scripted(stop_at=7, batch_size=2), [a, "startpos", b], 3, 35,
                                          PlaySettings(sample_plies=0), lambda _: None)
    replay_only = [sum(not len(m.candidates) for m in g.moves) for g in games]
    assert replay_only == [4, 0, 3] and positions == 2 + 6 + 3


def test_the_first_sample_plies_are_drawn_from_the_policy():
    ended, _, _ = play(_Scripted(stop_at=13), ["startpos"] * 20, sample_plies=4, parallel=20, seed=1)
    drawn = set()
    for game in ended:
        board = cshogi.Board()
        for i, ply in enumerate(game.record.moves):
            best, second = first_two(board)
            assert ply.move16 in ((best, second) if i < 4 else (best,))
            drawn.add((i, ply.move16 == best))
            board.push_move16(ply.move16)
    assert {(i, False) for i in range(4)} <= drawn  # each of the first four plies drew the runner-up somewhere


def test_play_teacher_games_refuses_a_suite_of_finished_games():
    with pytest.raises(ValueError, match="finished games"):  # move 3 is past a cap of 2
        play_teacher_games(_Scripted(), [LINE], 1, 0, PlaySettings(max_moves=2), lambda _: None)
