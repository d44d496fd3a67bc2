"""What every teacher is: positions (with their history) in, labels out.

A teacher labels a position with the move it would play, its win rate for the side to move and a
soft policy over some legal moves. The adapters (`usi`: any USI engine; `onnx_miniosl`: miniosl's
pretrained network) sit behind `Teacher`, so self-play by the teacher and relabelling of existing
games treat them alike. A label becomes one hcpe3 ply by `move_record`: the policy as visit-like
counts (dlshogi's trainer normalises counts, so only their ratios matter) and the win rate as the
eval in dlshogi's units (cp = 756 * logit(p)), which `train.val_lambda` blends into the value target.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import cshogi
import numpy as np

from dlzero.data.hcpe3 import MoveRecord
from dlzero.errors import DlzeroError
from dlzero.position import position_string
from dlzero.search.result import winrate_to_cp

# Visit-like counts a label's policy is scaled to: fine enough that a move with 1/10000 of the
# teacher's probability is kept, small enough for hcpe3's u16 counts.
VISIT_TOTAL = 10000


class TeacherError(DlzeroError):
    """A teacher could not be set up, died, or answered something unusable."""


@dataclass(frozen=True)
class Query:
    """A position and how the game reached it: `board` holds the moves played since `start_sfen`.

    Teachers get the whole history because some need it: a USI engine for repetitions, miniosl's
    network for its history planes (without them it misses recaptures).
    """

    start_sfen: str
    board: cshogi.Board

    def usi(self) -> str:
        """What follows USI's `position`: `startpos moves ...` or `sfen S moves ...`."""
        return position_string(self.board, self.start_sfen)


@dataclass(frozen=True)
class Label:
    """A teacher's verdict on one position, from the side to move's point of view.

    `move16` is the teacher's move, None when it resigned or claimed a declaration win
    (`declared`); `policy` holds (move16, probability) pairs summing to 1, empty when there is no move.
    `proven`: the teacher announced a mate for the side to move (its game needs no more plies).
    """

    move16: int | None
    winrate: float
    policy: tuple[tuple[int, float], ...] = ()
    declared: bool = False
    proven: bool = False


class Teacher(ABC):
    """Labels batches of positions; `batch_size` is how many one `label` call handles well."""

    name: str = "teacher"
    batch_size: int = 1

    @abstractmethod
    def label(self, queries: Sequence[Query]) -> list[Label]:
        """One label per query, in order."""

    @abstractmethod
    def close(self) -> None:
        """Release the teacher's process or session (the teacher cannot label afterwards)."""

    def __enter__(self) -> Teacher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def policy_counts(policy: Sequence[tuple[int, float]]) -> np.ndarray:
    """(k, 2) uint16 (move16, count) for hcpe3: probabilities scaled to VISIT_TOTAL, zero counts dropped."""
    moves = np.array([m for m, _ in policy], dtype=np.int64)
    counts = np.rint(np.array([p for _, p in policy], dtype=np.float64) * VISIT_TOTAL).astype(np.int64)
    keep = counts > 0
    return np.stack([moves[keep], counts[keep]], axis=1).astype(np.uint16)


def move_record(label: Label, played16: int) -> MoveRecord:
    """The hcpe3 ply for a labelled position where `played16` was played (a training target)."""
    return MoveRecord(played16, winrate_to_cp(label.winrate), policy_counts(label.policy))
