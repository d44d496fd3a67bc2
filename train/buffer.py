"""Training positions in compact arrays, decoded into batches on demand.

Storage per position (about 45 bytes plus 6 per policy candidate):

    base_hcp   u8[32]  the position *before* the last move, or the position itself when last_move is 0
    last_move  u16     move16 that leads from base_hcp to the training position (0: none known)
    ply        u16     plies played before the training position (drives the game-progress plane)
    repetitions u8     earlier occurrences of the position within the lookback (repetition planes 77-79)
    value      f32     value target as a win rate for the side to move, in [0, 1]; NaN: none (a position of
                       a game that hit the move cap, train.value_of_capped_games: drop), so the row trains
                       the policy alone
    result     f32     game result for the side to move: 1 win, 0 loss, 0.5 draw (for value accuracy)
    policy     CSR     offsets (N+1) into labels (i16) and probs (f32): the sparse policy target (no entries:
                       a value-only position, train.value_plies)
    reply      i16     label of the move played next (the opponent's reply, labelled from its mover's side),
                       -1 where the game ended or the data holds no game (hcpe): the auxiliary reply target

Why sparse: a dense float16 (N, 2187) target costs 4.4 KB a position, 8.7 GB for a 2M window, while
searches visit a few dozen moves at most. Why the position before the last move: an hcp carries no
history, so a board rebuilt from it alone would have empty last-move planes in training while search
always fills them at inference. Replaying the one move restores those planes exactly. The repetition
count needs the whole history, so it is counted once while the game is replayed from its start
(hcpe3 records hold whole games, openings included) and stored; every plane then equals what the
search's encoder gives for the same position and history. hcpe data (supervised) has no history at
all: its last-move and repetition planes are zero and its progress plane reads ply 0, which is what
the encoder gives for a position set up without history.
"""

from __future__ import annotations

from dataclasses import dataclass

import cshogi
import numpy as np
import torch

from dlzero.encoding import NUM_LABELS, NUM_PLANES, Encoder
from dlzero.search.result import EVAL_COEF  # dlshogi's cp <-> win-rate scale; hcpe/hcpe3 evals use it


def value_target(result: np.ndarray, eval_cp: np.ndarray, val_lambda: float) -> np.ndarray:
    """dlshogi's blended value target: (1 - λ)·z + λ·sigmoid(eval / 756), a win rate in [0, 1].

    z is the game result for the side to move (1, 0, 0.5) and eval the search's score of the
    position in centipawns from the side to move; the blend trades the result's truth for the
    eval's lower variance.
    """
    z = np.asarray(result, dtype=np.float64)
    p = 1.0 / (1.0 + np.exp(-np.asarray(eval_cp, dtype=np.float64) / EVAL_COEF))
    return ((1.0 - val_lambda) * z + val_lambda * p).astype(np.float32)


@dataclass
class TrainingBatch:
    """Decoded training samples, as torch tensors on the CPU."""

    planes: torch.Tensor  # (B, 100, 9, 9) float32
    policy: torch.Tensor  # (B, 2187) float32, rows sum to 1
    value: torch.Tensor  # (B,) float32 win-rate target in [0, 1]
    result: torch.Tensor  # (B,) float32 game result for the side to move (1, 0, 0.5)
    reply: torch.Tensor  # (B,) int64 label of the opponent's reply, -1 where there is none
    has_policy: torch.Tensor | None = None  # (B,) bool: the row has a policy target (None: every row has)
    has_value: torch.Tensor | None = None  # (B,) bool: the row has a value target (None: every row has); `value`
    # holds 1/2 where it has none, so that a loss masked by it stays finite

    def to(self, device: torch.device) -> TrainingBatch:
        """Copy to `device`. Blocking on purpose: the planes live in a buffer the next decode reuses."""
        return TrainingBatch(*(None if t is None else t.to(device) for t in (self.planes, self.policy, self.value,
                                                                              self.result, self.reply,
                                                                              self.has_policy, self.has_value)))


class PositionBuffer:
    """An immutable set of training positions (see the module docstring for the layout)."""

    def __init__(self, base_hcp: np.ndarray, last_move: np.ndarray, ply: np.ndarray, value: np.ndarray,
                 result: np.ndarray, offsets: np.ndarray, labels: np.ndarray, probs: np.ndarray,
                 repetitions: np.ndarray | None = None, reply: np.ndarray | None = None) -> None:
        n = len(base_hcp)
        reps = np.zeros(n, dtype=np.uint8) if repetitions is None else repetitions
        reply = np.full(n, -1) if reply is None else reply
        if not (len(last_move) == len(ply) == len(value) == len(result) == len(reps) == len(reply) == n
                and len(offsets) == n + 1):
            raise ValueError("position arrays differ in length")
        self.base_hcp = np.ascontiguousarray(base_hcp, dtype=np.uint8).reshape(n, 32)
        self.last_move = np.asarray(last_move, dtype=np.uint16)
        self.ply = np.asarray(ply, dtype=np.uint16)
        self.value = np.asarray(value, dtype=np.float32)
        self.result = np.asarray(result, dtype=np.float32)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.labels = np.asarray(labels, dtype=np.int16)
        self.probs = np.asarray(probs, dtype=np.float32)
        self.repetitions = np.asarray(reps, dtype=np.uint8)
        self.reply = np.asarray(reply, dtype=np.int16)

    def __len__(self) -> int:
        return len(self.base_hcp)

    @classmethod
    def empty(cls) -> PositionBuffer:
        z = np.zeros(0)
        return cls(np.zeros((0, 32)), z, z, z, z, np.zeros(1), z, z)

    @classmethod
    def concat(cls, parts: list[PositionBuffer]) -> PositionBuffer:
        """One buffer holding `parts` in order."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        starts = np.cumsum([0] + [len(p.labels) for p in parts[:-1]])
        offsets = np.concatenate([[0]] + [p.offsets[1:] + s for p, s in zip(parts, starts, strict=True)])
        fields = ("base_hcp", "last_move", "ply", "value", "result")
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields), offsets,
                   np.concatenate([p.labels for p in parts]), np.concatenate([p.probs for p in parts]),
                   np.concatenate([p.repetitions for p in parts]), np.concatenate([p.reply for p in parts]))

    def subset(self, indices: np.ndarray) -> PositionBuffer:
        """The positions at `indices`, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        starts, ends = self.offsets[idx], self.offsets[idx + 1]
        counts = ends - starts
        offsets = np.concatenate([[0], np.cumsum(counts)])
        gather = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])
        return PositionBuffer(self.base_hcp[idx], self.last_move[idx], self.ply[idx], self.value[idx],
                              self.result[idx], offsets, self.labels[gather], self.probs[gather],
                              self.repetitions[idx], self.reply[idx])

    def with_value(self, value: np.ndarray) -> PositionBuffer:
        """The same positions with another value target. `dlzero score --value-diagnosis` loads a hold-out once
        with the teacher's win rate as the target (train.val_lambda 1) and scores the trainer's figures on the
        blended target, rather than replaying every game twice."""
        return PositionBuffer(self.base_hcp, self.last_move, self.ply, value, self.result, self.offsets,
                              self.labels, self.probs, self.repetitions, self.reply)

    def tail(self, count: int) -> PositionBuffer:
        """The last `count` positions (the newest, when positions were added in game order)."""
        return self.subset(np.arange(max(0, len(self) - count), len(self)))


class BatchDecoder:
    """Turns indices into a `TrainingBatch`: rebuilds boards with cshogi, encodes planes, scatters policies.

    Owns its board, encoder and (on CUDA, pinned) plane buffer, so use one per training process.
    """

    def __init__(self, max_batch: int, pin_memory: bool = False) -> None:
        self._board = cshogi.Board()
        self._encoder = Encoder()
        self._planes = torch.zeros((max_batch, NUM_PLANES, 9, 9), dtype=torch.float32, pin_memory=pin_memory)

    def decode(self, buf: PositionBuffer, indices: np.ndarray) -> TrainingBatch:
        idx = np.asarray(indices, dtype=np.int64)
        b = len(idx)
        planes = self._planes[:b]
        out = planes.numpy()
        board = self._board
        self._encoder.begin(out)
        for i in idx.tolist():
            board.set_hcp(buf.base_hcp[i])
            move = int(buf.last_move[i])
            if move:
                board.move_number = int(buf.ply[i])
                board.push_move16(move)
            else:
                board.move_number = int(buf.ply[i]) + 1
            self._encoder.add(board, int(buf.repetitions[i]))
        self._encoder.finish()
        starts, ends = buf.offsets[idx], buf.offsets[idx + 1]
        counts = ends - starts
        rows = np.repeat(np.arange(b), counts)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])  # where each row's entries start in `flat`
        flat = np.repeat(starts - first, counts) + np.arange(counts.sum())
        policy = np.zeros((b, NUM_LABELS), dtype=np.float32)
        policy[rows, buf.labels[flat]] = buf.probs[flat]
        has_value = ~np.isnan(buf.value[idx])
        value = np.where(has_value, buf.value[idx], np.float32(0.5))  # finite where the loss is masked off
        return TrainingBatch(planes, torch.from_numpy(policy), torch.from_numpy(value),
                             torch.from_numpy(buf.result[idx]), torch.from_numpy(buf.reply[idx].astype(np.int64)),
                             torch.from_numpy(counts > 0), torch.from_numpy(has_value))

