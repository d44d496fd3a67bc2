"""Self-play worker processes and the parent that drives them.

Each worker loads the run's best model, plays its share of games (`play_games`, G in lockstep) and
writes them with `ShardWriter` into `data/gen-XXXX/` of the generation that played them. Between
games it re-reads `models/best.json` (and the resign threshold) at most every `check_interval`
seconds and switches to a newly promoted model, starting a new shard in that generation's folder.

The parent owns the resignation bookkeeping: workers report each game on a queue, the parent feeds
no-resign games to a `ResignController` and writes the threshold to `selfplay_state.json`, which
every worker reads back. One writer, many readers, so concurrent workers never lose an update.

Shards are atomic, so a killed worker loses only its unfinished games and its unflushed shard; the
parent reports the death and lets the other workers finish.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import queue as queue_mod
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dlzero.config import Config, config_from_dict, config_to_dict, dump_config
from dlzero.data.hcpe3 import BLACK_WIN, WHITE_WIN, ShardWriter
from dlzero.inference import load_model
from dlzero.inference.base import Evaluator
from dlzero.model import ModelMetadata, model_name, new_model, save_model
from dlzero.rundir import RunDir
from selfplay.games import FinishedGame, ResignController, play_games

STATE_FILE = "selfplay_state.json"


def config_hash(cfg: Config) -> str:
    """Short digest of the resolved config, stored in shard sidecars to tell runs' settings apart."""
    return hashlib.sha256(dump_config(cfg).encode()).hexdigest()[:12]


def ensure_best_model(rd: RunDir, cfg: Config, seed: int | None = None) -> int:
    """The best generation; a fresh run gets a random generation-0 model promoted first."""
    best = rd.best()
    if best is not None:
        return best.generation
    if not rd.model_path(0).is_file():
        save_model(new_model(cfg.model, seed=seed), rd.model_path(0),
                   ModelMetadata(generation=0, name=model_name(cfg.model)))
    return rd.set_best(0, "random initial model").generation


def load_resign(rd: RunDir, cfg: Config) -> ResignController:
    sp = cfg.selfplay
    return ResignController.from_dict(rd.read_json(STATE_FILE), sp.resign_threshold, sp.resign_fp_target)


class Worker:
    """Plays games with the run's best model and writes shards; reports on `queue` (any `.put`)."""

    def __init__(self, rd: RunDir, cfg: Config, worker_id: int, queue: Any, seed: int | None = None,
                 check_interval: float = 2.0) -> None:
        self.rd, self.cfg, self.worker_id, self.queue = rd, cfg, worker_id, queue
        self.rng = np.random.default_rng(seed)
        self.check_interval = check_interval
        self.meta = {"run": rd.root.name, "worker": worker_id, "config_hash": config_hash(cfg)}
        self.generation = -1
        self.writer: ShardWriter | None = None
        self.shards_sent = 0
        self.threshold = cfg.selfplay.resign_threshold
        self.last_check = 0.0

    def _load(self, generation: int) -> Evaluator:
        """Evaluator for the best model and a shard writer in its generation's data folder."""
        self._close_writer()
        evaluator = load_model(self.rd.best_model_path(), self.cfg.inference)
        self.generation = generation
        self.writer = ShardWriter(self.rd.data_dir_for(generation), f"selfplay-w{self.worker_id}",
                                  self.cfg.selfplay.games_per_shard, {**self.meta, "generation": generation})
        self.shards_sent = 0
        return evaluator

    def _close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self._report_shards()

    def _report_shards(self) -> None:
        assert self.writer is not None
        for path in self.writer.written[self.shards_sent:]:
            self.queue.put(("shard", self.worker_id, str(path)))
        self.shards_sent = len(self.writer.written)

    def _on_game(self, game: FinishedGame) -> None:
        assert self.writer is not None
        self.writer.add(game.record)
        self._report_shards()
        self.queue.put(("game", self.worker_id, {
            "plies": game.plies, "winner": game.record.winner, "reason": game.reason,
            "generation": self.generation, "targets": game.full_searches,
            "false_positive": game.false_positive}))

    def _refresh(self) -> Evaluator | None:
        """Between games: a new best model (returned as an Evaluator) and the current resign threshold."""
        now = time.monotonic()
        if now - self.last_check < self.check_interval:
            return None
        self.last_check = now
        self.threshold = load_resign(self.rd, self.cfg).threshold
        best = self.rd.best()
        if best is None or best.generation == self.generation:
            return None
        return self._load(best.generation)

    def run(self, n_games: int) -> None:
        best = self.rd.best()
        if best is None:
            raise RuntimeError(f"{self.rd.root}: no best model; call ensure_best_model first")
        self.threshold = load_resign(self.rd, self.cfg).threshold
        evaluator = self._load(best.generation)
        self.last_check = time.monotonic()
        try:
            stats = play_games(evaluator, self.cfg, n_games, self._on_game, self.rng,
                               resign_threshold=lambda: self.threshold, refresh=self._refresh)
        finally:
            self._close_writer()
        self.queue.put(("done", self.worker_id,
                        {"seconds": stats.seconds, "eval_seconds": stats.eval_seconds}))


def _worker_entry(root: str, cfg_data: dict, worker_id: int, n_games: int, queue: Any,
                  seed: int | None) -> None:
    """Process entry point (spawn): one compute thread unless the config says otherwise."""
    cfg = config_from_dict(cfg_data)
    threads = cfg.inference.threads or 1
    cfg = replace(cfg, inference=replace(cfg.inference, threads=threads))
    import torch

    torch.set_num_threads(threads)
    try:
        Worker(RunDir.open(root), cfg, worker_id, queue, seed).run(n_games)
    except BaseException:
        queue.put(("error", worker_id, traceback.format_exc()))
        raise


@dataclass
class WorkerSummary:
    games: int = 0
    positions: int = 0
    shards: int = 0
    generations: set[int] = field(default_factory=set)
    done: bool = False
    error: str = ""
    exitcode: int | None = None


@dataclass
class SelfplaySummary:
    """What one self-play session produced (for the loop orchestrator and the CLI)."""

    games: int = 0
    positions: int = 0
    targets: int = 0           # positions with visit counts (full searches)
    seconds: float = 0.0
    black_wins: int = 0
    white_wins: int = 0
    draws: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    shards: list[Path] = field(default_factory=list)
    failed_workers: list[int] = field(default_factory=list)
    resign_threshold: float = 0.0

    @property
    def games_per_hour(self) -> float:
        return 3600.0 * self.games / self.seconds if self.seconds > 0 else 0.0


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def run_selfplay(rd: RunDir, cfg: Config, games: int, workers: int | None = None, progress: bool = True,
                 seed: int | None = None) -> SelfplaySummary:
    """Play `games` games in `workers` spawned processes; return the summary once all have ended.

    A worker that dies is reported (its games in progress are lost) and the others carry on.
    """
    ensure_best_model(rd, cfg, seed)
    n_workers = max(1, min(workers or cfg.selfplay.workers, games))
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = []
    for w, n in enumerate(_split(games, n_workers)):
        wseed = None if seed is None else seed + 1000 * w
        p = ctx.Process(target=_worker_entry, args=(str(rd.root), config_to_dict(cfg), w, n, q, wseed),
                        name=f"selfplay-w{w}")
        p.start()
        procs.append(p)
    summary = SelfplaySummary()
    per = [WorkerSummary() for _ in procs]
    resign = load_resign(rd, cfg)
    reasons: Counter[str] = Counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=games, unit="game", dynamic_ncols=True, desc=f"self-play {rd.root.name}")
    start = time.perf_counter()

    def handle(msg: tuple) -> None:
        kind, w, data = msg
        if kind == "game":
            per[w].games += 1
            per[w].positions += data["plies"]
            per[w].generations.add(data["generation"])
            summary.games += 1
            summary.positions += data["plies"]
            summary.targets += data["targets"]
            summary.black_wins += data["winner"] == BLACK_WIN
            summary.white_wins += data["winner"] == WHITE_WIN
            summary.draws += data["winner"] not in (BLACK_WIN, WHITE_WIN)
            reasons[data["reason"]] += 1
            if data["false_positive"] is not None:
                resign.observe(data["false_positive"])
                rd.write_json(STATE_FILE, resign.to_dict())
            if bar is not None:
                hours = (time.perf_counter() - start) / 3600.0
                bar.update(1)
                bar.set_postfix_str(
                    f"pos {summary.positions:,} | {summary.games / max(hours, 1e-9):,.0f} games/h | "
                    f"avg {summary.positions / summary.games:.0f} plies | "
                    f"B/W/D {summary.black_wins}/{summary.white_wins}/{summary.draws}", refresh=False)
        elif kind == "shard":
            per[w].shards += 1
            summary.shards.append(Path(data))
        elif kind == "done":
            per[w].done = True
        elif kind == "error":
            per[w].error = data.strip().splitlines()[-1] if data.strip() else "error"
            print(f"self-play worker {w} failed:\n{data}", file=sys.stderr)

    reported: set[int] = set()
    try:
        while True:
            try:
                handle(q.get(timeout=0.25))
                continue
            except queue_mod.Empty:
                pass
            for w, p in enumerate(procs):
                if w not in reported and p.exitcode not in (None, 0):
                    reported.add(w)
                    print(f"self-play worker {w} (pid {p.pid}) died with exit code {p.exitcode}; "
                          "its games in progress are lost, the others go on", file=sys.stderr)
            if all(not p.is_alive() for p in procs):
                while True:
                    try:
                        handle(q.get(timeout=0.1))
                    except queue_mod.Empty:
                        break
                break
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        raise
    finally:
        for p in procs:
            p.join(timeout=5)
        if bar is not None:
            bar.close()
    summary.seconds = time.perf_counter() - start
    summary.reasons = dict(reasons)
    summary.resign_threshold = resign.threshold
    for w, (p, s) in enumerate(zip(procs, per, strict=True)):
        s.exitcode = p.exitcode
        if not s.done:
            summary.failed_workers.append(w)
        if progress:
            status = "ok" if s.done else f"FAILED (exit code {p.exitcode}{': ' + s.error if s.error else ''})"
            print(f"worker {w} (pid {p.pid}): {s.games} games, {s.positions:,} positions, {s.shards} shards, "
                  f"generations {sorted(s.generations)}, {status}", flush=True)
    return summary
