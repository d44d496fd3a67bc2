"""miniosl's pretrained shogi network, evaluated without search (the optional `teacher` extra).

miniosl (`pip install -e '.[teacher]'`; 0.1.6 is a wheel for Python 3.11) ships
`miniosl/pretrained/eval.onnx`: input 176x9x9 features that `State.export_features` builds from a
position's move history, outputs `move` (2187 logits), `value` (4 heads; the first is tanh-like
in [-1, 1] for the side to move) and `aux`. Its 2187 move labels are *not* dlshogi's (the same 27
move kinds x 81 squares, ordered differently; tests/test_teacher_miniosl.py shows it), so the policy
is read through miniosl's own move decoding: for every legal move of the position (`genmove_full`,
which lists what cshogi lists, non-promotions included), its logit is `logits[move.policy_move_label]`
and its move16 comes from its USI string on the cshogi board. The policy is the softmax over the legal
moves' logits (divided by `temperature`), the win rate (v + 1) / 2.

Two users sit above it: the teacher adapter (`dlzero.teacher.onnx_miniosl`, labels for training data)
and the rating anchor `miniosl:sample=N` (`dlzero.play.players.MinioslPlayer`), so it lives here, below both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cshogi
import numpy as np

from dlzero.errors import DlzeroError

INSTALL_HINT = "pip install -e '.[teacher]' (miniosl 0.1.6 is a wheel for Python 3.11)"


class MinioslError(DlzeroError):
    """miniosl is missing, its network cannot be loaded, or it cannot read a position."""


@dataclass(frozen=True)
class MinioslEval:
    """The network's verdict on one position: its legal moves (move16), their probabilities (summing to
    1, in the same order) and the win rate of the side to move."""

    moves: list[int]
    probs: np.ndarray
    winrate: float

    def best(self) -> int:
        """The network's own move: the most probable one."""
        return self.moves[int(np.argmax(self.probs))]


class MinioslNetwork:
    """One onnxruntime session of miniosl's network; `evaluate` takes positions with their history."""

    def __init__(self, model: str | None = None, threads: int = 1) -> None:
        try:
            import miniosl
        except ImportError:
            raise MinioslError(f"miniosl's network needs the miniosl package: {INSTALL_HINT}") from None
        import onnxruntime as ort

        if threads < 1:
            raise MinioslError("miniosl: threads must be >= 1")
        self._miniosl = miniosl
        if model and not Path(model).is_file():  # onnxruntime's own message is a paragraph
            raise MinioslError(f"miniosl: no ONNX model file at {model}")
        self.path = model or str(miniosl.pretrained_eval_path())
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(self.path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for missing or bad files
            raise MinioslError(f"miniosl: cannot load {self.path}: {exc}") from None

    def close(self) -> None:
        self._session = None  # onnxruntime frees the network's memory with the session

    def evaluate(self, positions: Sequence[tuple[str, cshogi.Board]], temperature: float = 1.0) -> list[MinioslEval]:
        """One call of the network on every position: (its USI `position` text, e.g. `startpos moves
        7g7f`, which carries the history the features need; the same position as a cshogi board)."""
        if temperature <= 0:
            raise MinioslError("miniosl: temperature must be > 0")
        records = []
        for usi, _ in positions:
            try:
                records.append(self._miniosl.usi_record(usi))
            except Exception as exc:  # miniosl's parser raises plain exceptions
                raise MinioslError(f"miniosl cannot read the position '{usi}': {exc}") from None
        features = np.stack([r.initial_state.export_features(r.moves) for r in records])
        logits, value, _aux = self._session.run(None, {"input": features})
        return [self._eval(usi, board, r.replay(-1), logits[i], float(value[i][0]), temperature)
                for i, ((usi, board), r) in enumerate(zip(positions, records, strict=True))]

    @staticmethod
    def _eval(usi: str, board: cshogi.Board, state, logits: np.ndarray, value: float,
              temperature: float) -> MinioslEval:
        moves = state.genmove_full()
        if not moves:
            raise MinioslError(f"miniosl was asked about a finished game: {usi}")
        z = logits[[m.policy_move_label for m in moves]].astype(np.float64) / temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        move16s = [board.move_from_usi(m.to_usi()) & 0xFFFF for m in moves]
        return MinioslEval(move16s, p, min(1.0, max(0.0, (value + 1.0) / 2.0)))
