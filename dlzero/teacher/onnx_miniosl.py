"""miniosl's pretrained network as a teacher, without search: `onnx:miniosl` (or just `miniosl`).

The network and how its outputs map onto cshogi's moves are `dlzero.inference.miniosl`; this adapter
batches queries and turns each verdict into a `Label`: the network's most probable move, its win rate,
and its whole policy over the legal moves.

Spec keys: `model` (another ONNX file with miniosl's inputs), `batch` (positions per call, 32),
`threads` (onnxruntime threads, 1: parallelism comes from `--workers`), `temperature` (1.0).
"""

from __future__ import annotations

from collections.abc import Sequence

from dlzero.inference.miniosl import MinioslError, MinioslEval, MinioslNetwork
from dlzero.teacher.base import Label, Query, Teacher, TeacherError


class MinioslTeacher(Teacher):
    """miniosl's policy and value, one onnxruntime call per batch of positions."""

    def __init__(self, model: str | None = None, batch_size: int = 32, threads: int = 1,
                 temperature: float = 1.0) -> None:
        if batch_size < 1 or threads < 1 or temperature <= 0:
            raise TeacherError("miniosl teacher: batch and threads must be >= 1, temperature > 0")
        try:
            self._network = MinioslNetwork(model, threads)
        except MinioslError as exc:
            raise TeacherError(f"the miniosl teacher: {exc}") from None
        self.name = f"onnx:miniosl ({self._network.path})"
        self.batch_size = batch_size
        self.temperature = temperature

    def close(self) -> None:
        self._network.close()

    def label(self, queries: Sequence[Query]) -> list[Label]:
        labels: list[Label] = []
        for start in range(0, len(queries), self.batch_size):
            batch = queries[start:start + self.batch_size]
            try:
                evals = self._network.evaluate([(q.usi(), q.board) for q in batch], self.temperature)
            except MinioslError as exc:
                raise TeacherError(f"the miniosl teacher: {exc}") from None
            labels += [_label(e) for e in evals]
        return labels


def _label(e: MinioslEval) -> Label:
    return Label(e.best(), e.winrate, tuple(zip(e.moves, e.probs.tolist(), strict=True)))
