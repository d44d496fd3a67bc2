"""What runs inside a self-play worker process (spawned locally, or a Ray task).

Each worker loads the run's best model, plays its share of games (`play_selfplay_games`, G in lockstep) and
writes them with `ShardWriter` into `data/gen-XXXX/` of the generation that played them. Between
games it re-reads `models/best.json` (and the resign threshold) at most every `check_interval`
seconds and switches to a newly promoted model, starting a new shard in that generation's folder.

It reports each game and shard to its parent (`selfplay.parent`) on a pipe of its own
(`PipeReporter`), not on one shared `multiprocessing.Queue`: a worker SIGKILLed while writing to a
shared queue leaves the queue's write lock taken, and every other worker then blocks forever on its
next report. A message half-written to a private pipe just reads as end-of-file. The parent owns
the resignation bookkeeping and writes the threshold to `selfplay_state.json`; workers only read it.
Shards are atomic, so a killed worker loses only its unfinished games and its unflushed shard.
A disk that refuses writes (full, over quota, read-only: `StorageError`) is not a crash: the worker
reports it as "fatal" and exits with EXIT_STORAGE, and the parent stops every worker instead of
restarting this one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from dlzero.config import Config, config_from_dict, dump_config
from dlzero.data.hcpe3 import ShardWriter, StorageError, storage_error
from dlzero.errors import RunDirError
from dlzero.inference import load_model
from dlzero.inference.base import Evaluator
from dlzero.inference.remote import RemoteEvaluator
from dlzero.inference.server import ServerAddress
from dlzero.rundir import RunDir
from dlzero.runfiles import SELFPLAY_STATE
from dlzero.selfplay.games import FinishedRecord, ResignController, play_selfplay_games

EXIT_STORAGE = 74  # sysexits' EX_IOERR: what a worker process exits with when the disk refuses its shards


def config_hash(cfg: Config) -> str:
    """Short digest of the resolved config, stored in shard sidecars to tell runs' settings apart."""
    return hashlib.sha256(dump_config(cfg).encode()).hexdigest()[:12]


def shard_prefix(worker_id: int) -> str:
    """The name prefix of worker `worker_id`'s shards (`RunDir.shards(prefix)` finds them again)."""
    return f"selfplay-w{worker_id}"


def load_resign(rd: RunDir, cfg: Config) -> ResignController:
    """The resign threshold where the run's self-play left it; a damaged selfplay_state.json is a RunDirError."""
    sp = cfg.selfplay
    data = rd.read_json(SELFPLAY_STATE)
    problem = resign_state_problem(data)
    if problem:
        raise RunDirError(f"{rd.selfplay_state_path}: {problem}; delete it (self-play starts again from "
                          "selfplay.resign_threshold) or restore it from a backup")
    return ResignController.from_dict(data, sp.resign_threshold, sp.resign_fp_target)


def resign_state_problem(data: Any) -> str:
    """What is wrong with the content of a selfplay_state.json (None: no file), or "" (doctor says the same)."""
    if data is None:
        return ""
    if not isinstance(data, dict):
        return "not a JSON object"
    threshold = data.get("resign_threshold", 0.0)
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0.0 <= threshold <= 1.0:
        return f"resign_threshold {threshold!r} is not a win rate in [0, 1]"
    for key in ("checked", "false_positives"):
        if type(data.get(key, 0)) is not int or data.get(key, 0) < 0:
            return f"{key} {data.get(key)!r} is not a count"
    recent = data.get("recent", [])
    if not isinstance(recent, list) or any(x not in (0, 1) or isinstance(x, float) for x in recent):
        return "recent is not a list of 0s and 1s"
    return ""


class Worker:
    """Plays games with the run's best model and writes shards; reports on `queue` (any `.put`)."""

    def __init__(self, rd: RunDir, cfg: Config, worker_id: int, queue: Any, seed: int | None = None,
                 check_interval: float = 2.0, server: ServerAddress | None = None, session: str = "") -> None:
        self.rd, self.cfg, self.worker_id, self.queue = rd, cfg, worker_id, queue
        self.server = server
        self.remote: RemoteEvaluator | None = None
        self.rng = np.random.default_rng(seed)
        self.check_interval = check_interval
        self.meta = {"run": rd.root.name, "worker": worker_id, "config_hash": config_hash(cfg)}
        if session:  # lets the driver count exactly what this session's workers saved
            self.meta["session"] = session
        self.generation = -1
        self.writer: ShardWriter | None = None
        self.shards_sent = 0
        self.threshold = cfg.selfplay.resign_threshold
        self.last_check = 0.0

    def _load(self, generation: int) -> Evaluator:
        """Evaluator for the best model and a shard writer in its generation's data folder."""
        self._close_writer()
        evaluator = load_model(self.rd.best_model_path(), self.cfg.inference)
        self._open_writer(generation)
        return evaluator

    def _open_writer(self, generation: int) -> None:
        self._close_writer()
        self.generation = generation
        self.writer = ShardWriter(self.rd.data_dir_for(generation), shard_prefix(self.worker_id),
                                  self.cfg.selfplay.games_per_shard, {**self.meta, "generation": generation})
        self.shards_sent = 0
        # before its first shard: should this process die, the parent removes what it left half written
        self.queue.put(("writer", self.worker_id, {"directory": str(self.writer.directory), "stem": self.writer.stem}))

    def _close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self._report_shards()

    def _report_shards(self) -> None:
        assert self.writer is not None
        for path, games in zip(self.writer.written[self.shards_sent:], self.writer.written_games[self.shards_sent:],
                               strict=True):
            self.queue.put(("shard", self.worker_id, {"path": str(path), "games": games}))
        self.shards_sent = len(self.writer.written)

    def _on_game(self, game: FinishedRecord) -> None:
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
        if self.remote is not None:  # the server swaps models; file the games under what it now runs
            if self.remote.generation != self.generation:
                self._open_writer(self.remote.generation)
            return None
        best = self.rd.best()
        if best is None or best.generation == self.generation:
            return None
        return self._load(best.generation)

    def run(self, n_games: int) -> None:
        best = self.rd.best()
        if best is None:
            raise RuntimeError(f"{self.rd.root}: no best model; call ensure_best_model first")
        self.threshold = load_resign(self.rd, self.cfg).threshold
        if self.server is not None:
            capacity = min(self.cfg.inference.max_batch, self.cfg.server.max_batch)
            evaluator = self.remote = RemoteEvaluator(self.server, capacity, self.cfg.server.timeout_s)
            self._open_writer(self.remote.generation)
        else:
            evaluator = self._load(best.generation)
        self.last_check = time.monotonic()
        try:
            stats = play_selfplay_games(evaluator, self.cfg, n_games, self._on_game, self.rng,
                                        resign_threshold=lambda: self.threshold, refresh=self._refresh)

        finally:
            self._close_writer()
            if self.remote is not None:
                self.remote.close()
        self.queue.put(("done", self.worker_id,
                        {"seconds": stats.seconds, "eval_seconds": stats.eval_seconds}))


class WorkerStopped(BaseException):
    """A worker told to stop (SIGINT, SIGTERM) or left without a parent: it saves its finished
    games and exits with `exitcode`. A BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way swallows it."""

    def __init__(self, why: str, exitcode: int) -> None:
        super().__init__(why)
        self.exitcode = exitcode


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise WorkerStopped once (later ones are ignored, so the save can finish).

    Without this, Ctrl-C or the parent's terminate() killed a worker before it wrote its finished
    games. Signal handlers can only be set from the main thread; elsewhere (a threaded Ray
    worker) signals keep their defaults. The previous handlers come back afterwards, since a Ray
    worker process runs many tasks.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        if not stopping:  # not SIG_IGN: a signal caught mid-switch would then raise OSError in the save
            stopping = True
            raise WorkerStopped(f"stopped by {signal.Signals(signum).name}", 128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        if not stopping:  # a stopped process is exiting; leave the handler that ignores late signals
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def play_worker(root: str, cfg_data: dict, worker_id: int, n_games: int, queue: Any, seed: int | None,
                server: ServerAddress | None = None, session: str = "") -> None:
    """Run one worker in this process with one compute thread unless the config says otherwise.

    The entry point of Ray tasks (and, through `process_main`, of spawned worker processes); errors
    are reported on `queue` as well as raised, so the parent can show the traceback. A stopped
    worker (see WorkerStopped) exits with its code and no traceback, once its finished games are on
    disk. A disk that refuses writes is reported as ("fatal", worker, message), without a traceback,
    and raised as a StorageError.
    """
    cfg = config_from_dict(cfg_data)
    threads = cfg.inference.threads or 1
    cfg = replace(cfg, inference=replace(cfg.inference, threads=threads))
    if cfg.selfplay.nice:  # below a trainer on the same cores (the async loop), never above anything
        os.nice(cfg.selfplay.nice)
    import torch

    torch.set_num_threads(threads)
    with _stop_on_signals():
        try:
            Worker(RunDir.open(root), cfg, worker_id, queue, seed, server=server, session=session).run(n_games)
        except WorkerStopped as stop:
            print(f"self-play worker {worker_id} {stop}: its finished games are saved", file=sys.stderr, flush=True)
            raise SystemExit(stop.exitcode) from None
        except BaseException as exc:
            fatal = storage_error(exc)
            if fatal is None:
                queue.put(("error", worker_id, traceback.format_exc()))
                raise
            queue.put(("fatal", worker_id, str(fatal)))
            if fatal is exc:
                raise
            raise fatal from exc


def process_main(root: str, cfg_data: dict, worker_id: int, n_games: int, queue: Any, seed: int | None,
                 server: ServerAddress | None = None, session: str = "") -> None:
    """`play_worker` as the target of a spawned process: a StorageError (already reported on `queue`)
    becomes exit code EXIT_STORAGE without a traceback, which multiprocessing would print."""
    try:
        play_worker(root, cfg_data, worker_id, n_games, queue, seed, server, session)
    except StorageError:
        raise SystemExit(EXIT_STORAGE) from None


class PipeReporter:
    """A worker's report channel to its parent: `put` sends one message down the worker's own pipe.

    When the parent is gone (its end is closed), the first `put` raises WorkerStopped, so an
    orphaned worker saves its finished games and exits instead of playing on for nobody; later
    puts (the reports of that last save) are dropped.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.parent_gone = False

    def put(self, msg: tuple) -> None:
        if self.parent_gone:
            return
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError):
            self.parent_gone = True
            raise WorkerStopped("lost its parent process", 1) from None
