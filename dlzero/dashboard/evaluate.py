"""The run's best model, loaded only when the page asks for it: values per ply and "analyse a position".

Gating games are stored as CSA without evaluations, so their graph is the network's own value of
each position (one batch, no search). "Analyse a position" runs the same `AnalysisEngine` that
`dlzero analyze` uses, with the run's config. The model is reloaded when best.json points at a new
generation; a lock keeps one request at a time on it (the page is for a person, not for load).
"""

from __future__ import annotations

import threading
from typing import Any

import cshogi
import numpy as np

from dlzero.config import config_from_dict, read_yaml
from dlzero.errors import ConfigError, RunDirError
from dlzero.rundir import RunDir, generation_name

MAX_PLAYOUTS = 5000  # the page's analysis is a look, not a long think


class BestModel:
    """Lazily loaded Evaluator of the run's current best model (read-only use of the run)."""

    def __init__(self, rd: RunDir) -> None:
        self.rd = rd
        self._lock = threading.Lock()
        self._key: tuple[str, int] | None = None
        self._evaluator = None
        self._cfg = None
        self._generation = 0

    def _load(self):
        """(evaluator, config, generation), reloading when best.json or the model file changed."""
        from dlzero.inference import load_model

        best = self.rd.best()
        if best is None:
            raise RunDirError("the run has no best model yet (models/best.json is missing)")
        path = self.rd.root / best.model
        if not path.is_file():
            raise RunDirError(f"best.json names {best.model}, which does not exist")
        key = (str(path), path.stat().st_mtime_ns)
        if key != self._key:
            cfg = config_from_dict(read_yaml(self.rd.config_path)) if self.rd.config_path.is_file() else None
            if cfg is None:
                raise ConfigError(f"{self.rd.config_path} is missing")
            if self._evaluator is not None:
                self._evaluator.close()
                self._evaluator = None
            self._evaluator = load_model(path, cfg.inference)
            self._cfg, self._key, self._generation = cfg, key, best.generation
        return self._evaluator, self._cfg, self._generation

    def values(self, sfens: list[str]) -> dict[str, Any]:
        """Black's win probability for each position, by the network's value head (no search)."""
        from dlzero.encoding.features import encode_position

        with self._lock:
            evaluator, _, gen = self._load()
            boards = [cshogi.Board(s) for s in sfens]
            planes = np.stack([encode_position(b) for b in boards]) if boards else np.zeros((0, 100, 9, 9))
            _, value = evaluator.evaluate(planes) if boards else (None, np.zeros(0))
        out = []
        for board, v in zip(boards, value.tolist(), strict=True):
            p = (v + 1.0) / 2.0  # value in [-1, 1] for the side to move
            out.append(round(p if board.turn == cshogi.BLACK else 1.0 - p, 4))
        return {"values": out, "source": f"network value of {generation_name(gen)} (the best model), no search"}

    def analyse(self, position: str, playouts: int) -> dict[str, Any]:
        """The best model's analysis of `position`: the answer `dlzero analyze` gives (or {"error": ...})."""
        from dlzero.analysis import AnalysisEngine
        from dlzero.analysis_query import QueryError

        if not 1 <= playouts <= MAX_PLAYOUTS:
            return {"error": f"playouts must be 1..{MAX_PLAYOUTS}"}
        with self._lock:
            evaluator, cfg, gen = self._load()
            engine = AnalysisEngine(evaluator, cfg, playouts)
            try:
                tasks = engine.reader.game_tasks(position, [], [0], playouts, task_id=0)
                answer = engine.analyse(tasks)[0].to_answer()
            except QueryError as exc:  # a bad position: answered as `dlzero analyze` answers it
                answer = exc.to_answer()
            finally:
                engine.close()  # its mate helper process, if root_mate_depth started one
        answer["model"] = generation_name(gen)
        return answer

    def close(self) -> None:
        with self._lock:
            if self._evaluator is not None:
                self._evaluator.close()
                self._evaluator = None
                self._key = None
