"""miniosl's pretrained network as a teacher, without search: `onnx:miniosl` (or just `miniosl`).

miniosl (`pip install -e '.[teacher]'`; 0.1.6 is a wheel for Python 3.11) ships
`miniosl/pretrained/eval.onnx`: input 176x9x9 features that `State.export_features` builds from a
position's move history, outputs `move` (2187 logits), `value` (4 heads; the first is tanh-like
in [-1, 1] for the side to move) and `aux`. Its 2187 move labels are *not* dlshogi's (the same 27
move kinds x 81 squares, ordered differently; tests/test_teacher_miniosl.py shows it), so the policy
is read through miniosl's own move decoding: for every legal move of the position (`genmove_full`,
which lists what cshogi lists, non-promotions included), its logit is `logits[move.policy_move_label]`
and its move16 comes from its USI string on the cshogi board. The policy is the softmax over the legal
moves' logits (divided by `temperature`), the move is its argmax, and the win rate (v + 1) / 2.

Spec keys: `model` (another ONNX file with miniosl's inputs), `batch` (positions per call, 32),
`threads` (onnxruntime threads, 1: parallelism comes from `--workers`), `temperature` (1.0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlzero.teacher.base import Label, Query, Teacher, TeacherError

INSTALL_HINT = "pip install -e '.[teacher]' (miniosl 0.1.6 is a wheel for Python 3.11)"


class MinioslTeacher(Teacher):
    """miniosl's policy and value, one onnxruntime call per batch of positions."""

    def __init__(self, model: str | None = None, batch_size: int = 32, threads: int = 1,
                 temperature: float = 1.0) -> None:
        try:
            import miniosl
        except ImportError:
            raise TeacherError(f"the miniosl teacher needs the miniosl package: {INSTALL_HINT}") from None
        import onnxruntime as ort

        if batch_size < 1 or threads < 1 or temperature <= 0:
            raise TeacherError("miniosl teacher: batch and threads must be >= 1, temperature > 0")
        self._miniosl = miniosl
        path = model or str(miniosl.pretrained_eval_path())
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for missing or bad files
            raise TeacherError(f"miniosl teacher: cannot load {path}: {exc}") from None
        self.name = f"onnx:miniosl ({path})"
        self.batch_size = batch_size
        self.temperature = temperature

    def close(self) -> None:
        self._session = None  # onnxruntime frees the network's memory with the session

    def label(self, queries: Sequence[Query]) -> list[Label]:
        labels: list[Label] = []
        for start in range(0, len(queries), self.batch_size):
            labels += self._label_batch(queries[start:start + self.batch_size])
        return labels

    def _label_batch(self, queries: Sequence[Query]) -> list[Label]:
        records = []
        for q in queries:
            try:
                records.append(self._miniosl.usi_record(q.usi()))
            except Exception as exc:  # miniosl's parser raises plain exceptions
                raise TeacherError(f"miniosl cannot read the position '{q.usi()}': {exc}") from None
        features = np.stack([r.initial_state.export_features(r.moves) for r in records])
        logits, value, _aux = self._session.run(None, {"input": features})
        return [self._label(q, r.replay(-1), logits[i], float(value[i][0]))
                for i, (q, r) in enumerate(zip(queries, records, strict=True))]

    def _label(self, query: Query, state, logits: np.ndarray, value: float) -> Label:
        moves = state.genmove_full()
        if not moves:
            raise TeacherError(f"miniosl teacher asked about a finished game: {query.usi()}")
        z = logits[[m.policy_move_label for m in moves]].astype(np.float64) / self.temperature
        p = np.exp(z - z.max())
        p /= p.sum()
        move16s = [query.board.move_from_usi(m.to_usi()) & 0xFFFF for m in moves]
        best = int(np.argmax(p))
        return Label(move16s[best], min(1.0, max(0.0, (value + 1.0) / 2.0)),
                     tuple(zip(move16s, p.tolist(), strict=True)))
