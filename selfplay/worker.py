"""Self-play worker processes and the parent that drives them.

Each worker loads the run's best model, plays its share of games (`play_games`, G in lockstep) and
writes them with `ShardWriter` into `data/gen-XXXX/` of the generation that played them. Between
games it re-reads `models/best.json` (and the resign threshold) at most every `check_interval`
seconds and switches to a newly promoted model, starting a new shard in that generation's folder.

The parent owns the resignation bookkeeping: workers report each game on a pipe, the parent feeds
no-resign games to a `ResignController` and writes the threshold to `selfplay_state.json`, which
every worker reads back. One writer, many readers, so concurrent workers never lose an update.

Shards are atomic, so a killed worker loses only its unfinished games and its unflushed shard; the
parent reports the death, starts the worker again for the games its shards do not hold (up to
`selfplay.max_restarts` times) and lets the other workers go on. Each worker reports on a pipe of its own
(`PipeReporter`), not on one shared `multiprocessing.Queue`: a worker SIGKILLed while writing to a
shared queue leaves the queue's write lock taken, and every other worker then blocks forever on its
next report. A message half-written to a private pipe just reads as end-of-file.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing as mp
import secrets
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np

from dlzero.config import Config, config_from_dict, config_to_dict, dump_config
from dlzero.data.hcpe3 import BLACK_WIN, SHARD_SUFFIX, WHITE_WIN, ShardWriter, read_sidecar
from dlzero.errors import DlzeroError
from dlzero.inference import load_model
from dlzero.inference.base import Evaluator
from dlzero.inference.remote import RemoteEvaluator
from dlzero.inference.server import ModelSource, ServerAddress, ServerProcess, default_devices, start_server
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
        self.writer = ShardWriter(self.rd.data_dir_for(generation), f"selfplay-w{self.worker_id}",
                                  self.cfg.selfplay.games_per_shard, {**self.meta, "generation": generation})
        self.shards_sent = 0

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
            stats = play_games(evaluator, self.cfg, n_games, self._on_game, self.rng,
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

    The entry point of spawned worker processes and of Ray tasks; errors are reported on `queue`
    as well as raised, so the parent can show the traceback. A stopped worker (see WorkerStopped)
    exits with its code and no traceback, once its finished games are on disk.
    """
    cfg = config_from_dict(cfg_data)
    threads = cfg.inference.threads or 1
    cfg = replace(cfg, inference=replace(cfg.inference, threads=threads))
    import torch

    torch.set_num_threads(threads)
    with _stop_on_signals():
        try:
            Worker(RunDir.open(root), cfg, worker_id, queue, seed, server=server, session=session).run(n_games)
        except WorkerStopped as stop:
            print(f"self-play worker {worker_id} {stop}: its finished games are saved", file=sys.stderr, flush=True)
            raise SystemExit(stop.exitcode) from None
        except BaseException:
            queue.put(("error", worker_id, traceback.format_exc()))
            raise


@dataclass
class WorkerSummary:
    games: int = 0
    games_saved: int = 0  # games in shards on disk (a killed worker loses the rest)
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
    restarts: int = 0
    servers: list[dict] = field(default_factory=list)  # inference servers' final counters

    @property
    def games_per_hour(self) -> float:
        return 3600.0 * self.games / self.seconds if self.seconds > 0 else 0.0


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def saved_games(rd: RunDir, session: str, worker: int) -> int:
    """Games on disk from `worker` in this session, read from the shards' sidecars.

    The disk, not the worker's messages, is the truth: a worker killed between writing a shard and
    reporting it would otherwise have that shard's games played twice when it is restarted.
    """
    total = 0
    for shard in rd.data_dir.glob(f"gen-*/selfplay-w{worker}-*{SHARD_SUFFIX}"):
        try:
            side = read_sidecar(shard)
        except (OSError, DlzeroError):
            continue
        if side.get("meta", {}).get("session") == session:
            total += int(side.get("games", 0))
    return total


class Collector:
    """The parent's side of the workers' reports: tallies games and shards, owns resignation and
    restarts, draws the bar.

    Shared by local worker processes and Ray tasks, which report the same messages.
    """

    def __init__(self, rd: RunDir, cfg: Config, games: int, n_workers: int, progress: bool) -> None:
        self.rd = rd
        self.max_restarts = cfg.selfplay.max_restarts
        self.summary = SelfplaySummary()
        self.per = [WorkerSummary() for _ in range(n_workers)]
        self.resign = load_resign(rd, cfg)
        self.reasons: Counter[str] = Counter()
        self.start = time.perf_counter()
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=games, unit="game", dynamic_ncols=True, desc=f"self-play {rd.root.name}")

    def handle(self, msg: tuple) -> None:
        kind, w, data = msg
        summary, per = self.summary, self.per[w]
        if kind == "game":
            per.games += 1
            per.positions += data["plies"]
            per.generations.add(data["generation"])
            summary.games += 1
            summary.positions += data["plies"]
            summary.targets += data["targets"]
            summary.black_wins += data["winner"] == BLACK_WIN
            summary.white_wins += data["winner"] == WHITE_WIN
            summary.draws += data["winner"] not in (BLACK_WIN, WHITE_WIN)
            self.reasons[data["reason"]] += 1
            if data["false_positive"] is not None:
                self.resign.observe(data["false_positive"])
                self.rd.write_json(STATE_FILE, self.resign.to_dict())
            if self.bar is not None:
                hours = (time.perf_counter() - self.start) / 3600.0
                self.bar.update(1)
                self.bar.set_postfix_str(
                    f"pos {summary.positions:,} | {summary.games / max(hours, 1e-9):,.0f} games/h | "
                    f"avg {summary.positions / summary.games:.0f} plies | "
                    f"B/W/D {summary.black_wins}/{summary.white_wins}/{summary.draws}", refresh=False)
        elif kind == "shard":
            per.shards += 1
            per.games_saved += data["games"]
            summary.shards.append(Path(data["path"]))
        elif kind == "done":
            per.done = True
        elif kind == "error":
            per.error = data.strip().splitlines()[-1] if data.strip() else "error"
            print(f"self-play worker {w} failed:\n{data}", file=sys.stderr)

    def replay_share(self, w: int, session: str, assigned: int, attempts: int, reason: str) -> int:
        """How many games dead worker `w` must be started again for (0: leave it dead).

        `assigned`: its share of the session's games; `attempts`: how many times it has been started.
        """
        left = assigned - saved_games(self.rd, session, w)
        if left <= 0 or attempts > self.max_restarts:
            return 0
        print(f"self-play worker {w} died ({reason}); restarting it for its {left} unsaved games "
              f"(restart {attempts} of at most {self.max_restarts})", file=sys.stderr, flush=True)
        self.per[w].error = ""
        self.summary.restarts += 1
        return left

    def finish(self, describe: list[str]) -> SelfplaySummary:
        """Close the bar, fill in the totals; `describe[w]` names worker w (pid or Ray node)."""
        if self.bar is not None:
            self.bar.close()
        summary = self.summary
        summary.seconds = time.perf_counter() - self.start
        summary.reasons = dict(self.reasons)
        summary.resign_threshold = self.resign.threshold
        for w, s in enumerate(self.per):
            if not s.done:
                summary.failed_workers.append(w)
            if self.bar is not None:
                status = "ok" if s.done else f"FAILED (exit code {s.exitcode}{': ' + s.error if s.error else ''})"
                print(f"worker {w} ({describe[w]}): {s.games} games ({s.games_saved} in {s.shards} shards), "
                      f"{s.positions:,} positions, "
                      f"generations {sorted(s.generations)}, {status}", flush=True)
        return summary


def start_servers(rd: RunDir, cfg: Config, verbose: bool = True) -> list[ServerProcess]:
    """One inference server per `server.devices` entry (default: per GPU, else one on the CPU)."""
    servers: list[ServerProcess] = []
    try:
        for device in cfg.server.devices or default_devices():
            servers.append(start_server(ModelSource.run(rd.root), cfg.inference, cfg.server, device, verbose))
    except BaseException:
        for srv in servers:
            srv.stop()
        raise
    return servers


def collect_server_stats(servers: list[ServerProcess], summary: SelfplaySummary) -> None:
    """Each server's final counters into the summary (a dead server's entry says why it has none)."""
    for srv in servers:
        try:
            summary.servers.append(srv.stats())
        except Exception as exc:
            summary.servers.append({"device": srv.describe, "error": str(exc)})


def server_lines(summary: SelfplaySummary) -> list[str]:
    """One readable line per inference server of a session."""
    lines = []
    for s in summary.servers:
        if "error" in s:
            lines.append(f"inference server ({s['device']}): no counters ({s['error']})")
        else:
            lines.append(f"inference server ({s['device']}): {s['positions']:,} evaluations, "
                         f"{s['evals_per_s']:,.0f}/s, mean batch {s['mean_batch']}, busy {s['busy']:.0%}, "
                         f"{s['swaps']} model swaps, {s['clients_lost']} workers lost")
    return lines


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


Running = dict[int, tuple[BaseProcess, Connection]]


def gather(running: Running, handle: Callable[[tuple], None],
           on_death: Callable[[int, str], tuple[BaseProcess, Connection] | None] | None = None,
           poll_s: float = 0.25) -> dict[int, int | None]:
    """Pass workers' messages to `handle` until every worker has exited and its pipe is drained.

    `running` maps worker number to (process, read end of its pipe) and is emptied. Whatever a
    worker sent before dying is handled; a message it was cut off in the middle of is dropped. A
    worker that exits with a non-zero code is reported on stderr, and `on_death(w, reason)` may
    return a replacement (process, pipe) that carries on as worker w. Returns the last exit codes.
    """
    exitcodes: dict[int, int | None] = {}

    def finish(w: int) -> None:
        proc, conn = running.pop(w)
        conn.close()
        proc.join()  # its pipe is closed, so it is exiting
        exitcodes[w] = proc.exitcode
        if proc.exitcode != 0:
            reason = f"pid {proc.pid}, exit code {proc.exitcode}"
            print(f"self-play worker {w} died ({reason}); its games in progress are lost", file=sys.stderr, flush=True)
            replacement = on_death(w, reason) if on_death is not None else None
            if replacement is not None:
                running[w] = replacement

    while running:
        by_conn = {conn: w for w, (_, conn) in running.items()}
        for conn in wait(list(by_conn), timeout=poll_s):
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the worker exited (cleanly or in the middle of a message)
                finish(by_conn[conn])
                continue
            handle(msg)
        for w, (proc, conn) in list(running.items()):
            if not proc.is_alive() and not conn.poll(0):  # exited with nothing left to read
                finish(w)
    return exitcodes


def run_selfplay(rd: RunDir, cfg: Config, games: int, workers: int | None = None, progress: bool = True,
                 seed: int | None = None) -> SelfplaySummary:
    """Play `games` games in `workers` spawned processes; return the summary once all have ended.

    With `selfplay.ray` set, the workers are Ray tasks instead (`selfplay.cluster`). With
    `server.enabled`, workers evaluate through inference servers (one per device) started here,
    worker w using server w mod S. A worker that dies is reported (its games in progress are
    lost) and the others carry on.
    """
    if cfg.selfplay.ray:
        from selfplay.cluster import run_selfplay_ray

        return run_selfplay_ray(rd, cfg, games, cfg.selfplay.ray, workers, progress, seed)
    ensure_best_model(rd, cfg, seed)
    n_workers = max(1, min(workers or cfg.selfplay.workers, games))
    servers = start_servers(rd, cfg, progress) if cfg.server.enabled else []
    ctx = mp.get_context("spawn")
    session = secrets.token_hex(6)
    assigned = _split(games, n_workers)
    procs: list[list[BaseProcess]] = [[] for _ in range(n_workers)]  # each worker's processes, restarts included
    running: Running = {}
    collector = Collector(rd, cfg, games, n_workers, progress)

    def start(w: int, n: int) -> tuple[BaseProcess, Connection]:
        wseed = None if seed is None else seed + 1000 * w + len(procs[w])
        address = servers[w % len(servers)].address if servers else None
        reader, writer = ctx.Pipe(duplex=False)
        p = ctx.Process(target=play_worker, name=f"selfplay-w{w}",
                        args=(str(rd.root), config_to_dict(cfg), w, n, PipeReporter(writer), wseed, address, session))
        p.start()
        writer.close()  # the worker holds the only write end, so its death reads as end-of-file
        procs[w].append(p)
        return p, reader

    def restart(w: int, reason: str) -> tuple[BaseProcess, Connection] | None:
        left = collector.replay_share(w, session, assigned[w], len(procs[w]), reason)
        return start(w, left) if left else None

    exitcodes: dict[int, int | None] = {}
    try:
        for w, n in enumerate(assigned):
            running[w] = start(w, n)
        exitcodes = gather(running, collector.handle, restart)
    except KeyboardInterrupt:
        if collector.bar is not None:
            collector.bar.close()
        print(f"interrupted: the {len(running)} running workers save their finished games and stop",
              file=sys.stderr, flush=True)
        raise
    finally:
        for p, _ in running.values():  # only after an error or Ctrl-C: workers still playing
            p.terminate()  # SIGTERM: a worker writes its finished games, then exits
        deadline = time.monotonic() + 30.0
        for p in (p for ps in procs for p in ps):
            p.join(timeout=max(0.1, deadline - time.monotonic()))
            if p.is_alive():  # an error in the parent must not leave workers playing on
                p.kill()
                p.join()
        for _, reader in running.values():
            reader.close()
        collect_server_stats(servers, collector.summary)
        for srv in servers:
            srv.stop()
    for w, s in enumerate(collector.per):
        s.exitcode = exitcodes.get(w)
    return collector.finish([f"pid{'s' if len(ps) > 1 else ''} {', '.join(str(p.pid) for p in ps)}" for ps in procs])
