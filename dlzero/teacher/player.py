"""A teacher as a player: its own move, without search, so a student can be measured against it.

Issue 22's yardstick is "the student with search against its teacher network played without search";
the rating ladder names that player `miniosl:sample=N` (`dlzero.gating.anchors`). For the first N plies
of a game the move is drawn from the teacher's policy (seeded), so twenty games are twenty games and not
one game twenty times; after that it plays the teacher's own move (its argmax). A teacher that resigns
or declares (a `Label` with no move) resigns.
"""

from __future__ import annotations

from collections.abc import Sequence

import cshogi
import numpy as np

from dlzero.play.game import Game
from dlzero.position import start_position
from dlzero.teacher.base import Label, Query, Teacher


class TeacherPlayer:
    """A `MoveChooser` asking `teacher` about all games it is to move in, in batches of the teacher's size."""

    def __init__(self, teacher: Teacher, name: str, sample_plies: int = 0, seed: int = 0) -> None:
        self.teacher, self.name, self.sample_plies = teacher, name, sample_plies
        self._rng = np.random.default_rng(seed)

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        queries = [Query(start_position(g.board), g.board) for g in games]
        labels = self.teacher.label(queries)
        return [self._move(g.board, label) for g, label in zip(games, labels, strict=True)]

    def _move(self, board: cshogi.Board, label: Label) -> int | None:
        if label.move16 is None:
            return None
        move16 = label.move16
        if len(board.history) < self.sample_plies and label.policy:
            moves, probs = zip(*label.policy, strict=True)
            p = np.asarray(probs, dtype=np.float64)
            move16 = int(moves[self._rng.choice(len(moves), p=p / p.sum())])
        return board.move_from_move16(move16)

    def close(self) -> None:
        self.teacher.close()
