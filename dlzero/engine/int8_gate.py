"""The int8 search gate: does a search with the quantized model play the moves fp32's search plays?

The raw gate (`dlzero.model.quantize`) counts a position as lost when the argmax of the policy
moves, but a trained network's policy has near-ties, two moves it rates alike, and rounding
flips such a tie without changing what the engine plays: the search weighs both and plays the
one its playouts prefer. So `dlzero export --int8` judges a recipe by searching the held-out
positions (`inference.quantize.gate_positions` of them, spread over the hold-out) with fp32 and
with the candidate, at `gate_playouts`, and counts a position as played like fp32 when int8's
search plays fp32's move, or a move fp32's own search gave at least `gate_near` of its chosen
move's visits (a move fp32 would play about as readily), or, when fp32 plays a proven win,
another proven win. Win rates are compared at the root ((v + 1) / 2 for the side to move, as the
engine reports them). docs/int8.md has the figures the default thresholds rest on.

The searches are deterministic: no noise, no pipeline, one leaf a tree a network call (as self-play
searches, and without virtual loss, whose choices would depend on batch order), one onnxruntime
thread, a fixed seed for whatever draws the search makes (Gumbel's sample), the mate guard off.
All positions are searched side by side, so each network call carries one leaf of every tree.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import cshogi
import numpy as np

from dlzero.config import Config, InferenceConfig, QuantizeConfig, SearchConfig
from dlzero.inference.int8 import prepare_int8
from dlzero.inference.onnx_backend import OnnxEvaluator
from dlzero.model.calibration import CalibrationSet
from dlzero.model.quantize import PlayFigures
from dlzero.search import MoveStat, Search, Tree, chosen_index, move_stats, root_winrate

log = logging.getLogger("dlzero.int8")


@dataclass
class _Played:
    """What one search of one position came to."""

    move: int
    winrate: float
    stats: dict[int, MoveStat]  # root moves by move


class SearchJudge:
    """`dlzero.model.quantize.Judge` by dlzero's own search (module docstring)."""

    def __init__(self, search: SearchConfig, cfg: QuantizeConfig, seed: int = 0) -> None:
        self.search_cfg = replace(search, pipeline=False, leaves_per_tree=1, mate_guard_nodes=0)
        self.cfg = cfg
        self.seed = seed
        self.boards: list[cshogi.Board] = []
        self.reference: list[_Played] = []

    def start(self, fp32: bytes, data: CalibrationSet) -> None:
        """Pick the positions and search them with fp32, once for all candidates."""
        boards = [b for b in data.holdout_boards if not b.is_game_over()]
        if not boards:
            raise ValueError(f"the search gate has no held-out position to search ({data.source})")
        picks = np.linspace(0, len(boards) - 1, min(self.cfg.gate_positions, len(boards))).round().astype(int)
        self.boards = [boards[i] for i in picks]
        t0 = time.perf_counter()
        self.reference = self._play(fp32)
        log.info("int8 search gate: %d positions at %d playouts searched with fp32 in %.1f s", len(self.boards),
                 self.cfg.gate_playouts, time.perf_counter() - t0)

    def judge(self, candidate: bytes) -> PlayFigures:
        """The candidate's searches of the same positions, compared with fp32's."""
        if not self.reference:
            raise RuntimeError("SearchJudge.judge before start")
        played = self._play(candidate)
        alike = [self.plays_like(ref, got.move) for ref, got in zip(self.reference, played, strict=True)]
        same = [ref.move == got.move for ref, got in zip(self.reference, played, strict=True)]
        dw = np.abs([got.winrate - ref.winrate for ref, got in zip(self.reference, played, strict=True)])
        return PlayFigures(agreement=float(np.mean(alike)), same_move=float(np.mean(same)),
                           winrate_mae=float(dw.mean()), winrate_max=float(dw.max()), positions=len(played),
                           playouts=self.cfg.gate_playouts)

    def plays_like(self, ref: _Played, move: int) -> bool:
        """Whether fp32's search would play `move` as readily as its own choice (module docstring)."""
        if move == ref.move:
            return True
        mine, theirs = ref.stats[ref.move], ref.stats.get(move)
        if theirs is None:
            return False
        if mine.proven == 1.0:
            return theirs.proven == 1.0
        return theirs.proven != 0.0 and theirs.visits >= self.cfg.gate_near * mine.visits

    def _play(self, model: bytes) -> list[_Played]:
        evaluator = OnnxEvaluator(model, InferenceConfig(device="cpu", threads=1), source="<int8 gate>")
        search = Search(evaluator, self.search_cfg, np.random.default_rng(self.seed))
        try:
            trees = [Tree(board.copy()) for board in self.boards]
            search.run(trees, self.cfg.gate_playouts, leaves_per_tree=1)
            return [_Played(int(tree.root.moves[chosen_index(tree)]), root_winrate(tree),
                            {s.move: s for s in move_stats(tree)}) for tree in trees]
        finally:
            search.close()
            evaluator.close()


def prepare_searched_int8(model: str | Path, cfg: Config) -> Path | None:
    """`prepare_int8` judged by the search gate: the int8 file the loop and self-play play with, made as
    `dlzero export --int8` makes it (None unless `inference.precision` is int8)."""
    return prepare_int8(model, cfg.inference, SearchJudge(cfg.search, cfg.inference.quantize))
