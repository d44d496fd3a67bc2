"""What the parent process of a self-play session runs: it starts worker processes, collects
their reports, keeps the resignation state, and restarts the workers that die.

`Collector` is shared by local worker processes (`run_local`) and Ray tasks (`selfplay.cluster`),
which report the same messages. The parent feeds no-resign games to a `ResignController` and writes
the threshold to `selfplay_state.json`, which every worker reads back: one writer, many readers, so
concurrent workers never lose an update. A dead worker is reported, and started again for the games
its shards do not hold (up to `selfplay.max_restarts` times) while the others go on.

A disk that refuses writes (full, over quota, read-only) is not such a death: the first worker (or
the parent) that meets it makes the session stop every worker, restart none, and raise one
StorageError. A restarted worker could only play games it cannot save (the loop that replayed
124 games and saved none).
"""

from __future__ import annotations

import multiprocessing as mp
import secrets
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from dlzero.config import Config, config_to_dict
from dlzero.data.hcpe3 import BLACK_WIN, WHITE_WIN, StorageError, discard_uncommitted, read_sidecar, storage_error
from dlzero.errors import DlzeroError
from dlzero.inference.server import ModelSource, ServerProcess, default_devices, start_server
from dlzero.rundir import RunDir
from dlzero.runfiles import SELFPLAY_STATE
from dlzero.selfplay.bootstrap import ensure_best_model
from dlzero.selfplay.worker import PipeReporter, load_resign, process_main, shard_prefix


@dataclass
class WorkerSummary:
    games: int = 0
    games_saved: int = 0  # games in shards on disk (a killed worker loses the rest)
    unsaved: int = 0  # games played and not yet in a shard (0 once the worker is dead: they are lost)
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


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` as `parts` shares that differ by at most one (the first ones get the remainder)."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def saved_games(rd: RunDir, session: str, worker: int) -> int:
    """Games on disk from `worker` in this session, read from the shards' sidecars.

    The disk, not the worker's messages, is the truth: a worker killed between writing a shard and
    reporting it would otherwise have that shard's games played twice when it is restarted.
    """
    total = 0
    for shard in rd.shards(shard_prefix(worker)):
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
        self.writers: list[list[tuple[str, str]]] = [[] for _ in range(n_workers)]  # (directory, stem) per worker
        self.resign = load_resign(rd, cfg)
        self.reasons: Counter[str] = Counter()
        self.start = time.perf_counter()
        self.fatal = ""  # the storage error that stops the session ("" while none)
        self.on_fatal: Callable[[int | None], None] | None = None  # stops the running workers but this one
        self.bar = None
        if progress:
            from tqdm import tqdm

            self.bar = tqdm(total=games, unit="game", dynamic_ncols=True, desc=f"self-play {rd.root.name}")

    def handle(self, msg: tuple) -> None:
        kind, w, data = msg
        summary, per = self.summary, self.per[w]
        if kind == "game":
            per.games += 1
            per.unsaved += 1
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
                self._write_state()
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
            per.unsaved = max(0, per.unsaved - data["games"])
            summary.shards.append(Path(data["path"]))
        elif kind == "done":
            per.done = True
        elif kind == "writer":
            self.writers[w].append((data["directory"], data["stem"]))
        elif kind == "error":
            per.error = data.strip().splitlines()[-1] if data.strip() else "error"
            if not self.fatal:  # once stopping, the others' errors are the stop itself (a cancelled Ray task)
                print(f"self-play worker {w} failed:\n{data}", file=sys.stderr)
        elif kind == "fatal":
            self.fail(data, w)

    def _write_state(self) -> None:
        try:
            self.rd.write_json(SELFPLAY_STATE, self.resign.to_dict())
        except OSError as exc:
            fatal = storage_error(exc, self.rd.selfplay_state_path)
            if fatal is None:
                raise
            self.fail(str(fatal))

    def fail(self, message: str, w: int | None = None) -> None:
        """Stop the session on a storage error met by worker `w` (None: the parent). The first message
        is kept; the other workers are stopped (`w` is exiting by itself)."""
        if self.fatal:
            return
        self.fatal = message
        if self.on_fatal is not None:
            self.on_fatal(w)

    def worker_died(self, w: int, reason: str) -> None:
        """Say that worker `w` died (unless the session is stopping anyway: then its death is expected),
        and remove what it left half written: a shard without its sidecar (killed between the two),
        temp files. Its committed shards stay; its replacement plays the uncommitted games again."""
        if not self.fatal:
            print(f"self-play worker {w} died ({reason}); its games in progress are lost", file=sys.stderr,
                  flush=True)
        for directory, stem in self.writers[w]:
            discard_uncommitted(directory, stem)
        self.writers[w].clear()
        self.per[w].unsaved = 0

    @property
    def unsaved_games(self) -> int:
        """Games the live workers have finished but not yet written (a shard holds `games_per_shard`):
        what a count of games on disk does not see yet."""
        return sum(p.unsaved for p in self.per)

    def replay_share(self, w: int, session: str, assigned: int, attempts: int, reason: str) -> int:
        """How many games dead worker `w` must be started again for (0: leave it dead).

        `assigned`: its share of the session's games; `attempts`: how many times it has been started.
        """
        left = assigned - saved_games(self.rd, session, w)
        if left <= 0 and not self.fatal:
            # it died after its last shard was on disk but before it said so: its share is played, and
            # nothing is missing, so it is not a failed worker
            print(f"self-play worker {w} died ({reason}) after saving all its {assigned} games; "
                  "nothing to play again", file=sys.stderr, flush=True)
            self.per[w].done = True
            self.per[w].error = ""
            return 0
        if attempts > self.max_restarts or self.fatal:
            return 0
        print(f"self-play worker {w} died ({reason}); restarting it for its {left} unsaved games "
              f"(restart {attempts} of at most {self.max_restarts})", file=sys.stderr, flush=True)
        self.per[w].error = ""
        self.summary.restarts += 1
        return left

    def finish(self, describe: list[str]) -> SelfplaySummary:
        """Close the bar, fill in the totals; `describe[w]` names worker w (pid or Ray node).

        Raises the StorageError that stopped the session, if one did, after the per-worker lines.
        """
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
                status = ("ok" if s.done else "stopped: the disk refuses writes" if self.fatal
                          else f"FAILED (exit code {s.exitcode}{': ' + s.error if s.error else ''})")
                print(f"worker {w} ({describe[w]}): {s.games} games ({s.games_saved} in {s.shards} shards), "
                      f"{s.positions:,} positions, "
                      f"generations {sorted(s.generations)}, {status}", flush=True)
        if self.fatal:
            raise StorageError(self.fatal)
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


Running = dict[int, tuple[BaseProcess, Connection]]


def gather(running: Running, handle: Callable[[tuple], None],
           on_death: Callable[[int, str], tuple[BaseProcess, Connection] | None] | None = None,
           poll_s: float = 0.25) -> dict[int, int | None]:
    """Pass workers' messages to `handle` until every worker has exited and its pipe is drained.

    `running` maps worker number to (process, read end of its pipe) and is emptied. Whatever a
    worker sent before dying is handled; a message it was cut off in the middle of is dropped. A
    worker that exits with a non-zero code is passed to `on_death(w, reason)`, which reports it and
    may return a replacement (process, pipe) that carries on as worker w; without `on_death` it is
    reported on stderr. Returns the last exit codes.
    """
    exitcodes: dict[int, int | None] = {}

    def finish(w: int) -> None:
        proc, conn = running.pop(w)
        conn.close()
        proc.join()  # its pipe is closed, so it is exiting
        exitcodes[w] = proc.exitcode
        if proc.exitcode != 0:
            reason = f"pid {proc.pid}, exit code {proc.exitcode}"
            if on_death is None:
                print(f"self-play worker {w} died ({reason}); its games in progress are lost", file=sys.stderr,
                      flush=True)
                return
            replacement = on_death(w, reason)
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


def run_local(rd: RunDir, cfg: Config, games: int, workers: int | None = None, progress: bool = True,
                 seed: int | None = None, stop: threading.Event | None = None,
                 on_start: Callable[[Collector], None] | None = None) -> SelfplaySummary:
    """Play `games` games in `workers` spawned processes; return the summary once all have ended.

    Setting `stop` (from another thread: the asynchronous loop's trainer) ends the session early: every
    worker saves its finished games and exits, and none is restarted. `on_start` is handed the session's
    Collector (its counters, read from another thread, say how far the session is).

    With `server.enabled`, workers evaluate through inference servers (one per device) started here,
    worker w using server w mod S. A worker that dies is reported (its games in progress are
    lost) and the others carry on. A StorageError (see the module docstring) stops them all and is
    raised once they have exited.
    """
    ensure_best_model(rd, cfg, seed)
    n_workers = max(1, min(workers or cfg.selfplay.workers, games))
    servers = start_servers(rd, cfg, progress) if cfg.server.enabled else []
    ctx = mp.get_context("spawn")
    session = secrets.token_hex(6)
    assigned = split_evenly(games, n_workers)
    procs: list[list[BaseProcess]] = [[] for _ in range(n_workers)]  # each worker's processes, restarts included
    running: Running = {}
    collector = Collector(rd, cfg, games, n_workers, progress)
    if on_start is not None:
        on_start(collector)

    def start(w: int, n: int) -> tuple[BaseProcess, Connection]:
        wseed = None if seed is None else seed + 1000 * w + len(procs[w])
        address = servers[w % len(servers)].address if servers else None
        reader, writer = ctx.Pipe(duplex=False)
        p = ctx.Process(target=process_main, name=f"selfplay-w{w}",
                        args=(str(rd.root), config_to_dict(cfg), w, n, PipeReporter(writer), wseed, address, session))
        # the child starts with SIGINT ignored (inherited through exec) until play_worker installs its own
        # handler: a Ctrl-C during its imports would otherwise print a KeyboardInterrupt traceback
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            p.start()
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        writer.close()  # the worker holds the only write end, so its death reads as end-of-file
        procs[w].append(p)
        return p, reader

    def restart(w: int, reason: str) -> tuple[BaseProcess, Connection] | None:
        if stop is not None and stop.is_set():  # told to stop: a SIGTERM exit is no death
            return None
        collector.worker_died(w, reason)
        left = collector.replay_share(w, session, assigned[w], len(procs[w]), reason)
        return start(w, left) if left else None

    def stop_others(failed: int | None) -> None:  # SIGTERM: each saves what it can and exits; none restarts
        for w, (p, _) in running.items():
            if w != failed and p.is_alive():
                p.terminate()

    collector.on_fatal = stop_others

    def stop_when_told() -> None:
        assert stop is not None
        stop.wait()
        for p, _ in list(running.values()):
            if p.is_alive():
                p.terminate()

    exitcodes: dict[int, int | None] = {}
    try:
        for w, n in enumerate(assigned):
            running[w] = start(w, n)
        if stop is not None:
            threading.Thread(target=stop_when_told, name="selfplay-stop", daemon=True).start()
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
        for w, (p, reader) in running.items():
            reader.close()
            if p.exitcode == -signal.SIGTERM:  # still starting: its SIGTERM handler was not yet in place
                print(f"self-play worker {w} stopped before it began playing: it had no games to save",
                      file=sys.stderr, flush=True)
        collect_server_stats(servers, collector.summary)
        for srv in servers:
            srv.stop()
    for w, s in enumerate(collector.per):
        s.exitcode = exitcodes.get(w)
    return collector.finish([f"pid{'s' if len(ps) > 1 else ''} {', '.join(str(p.pid) for p in ps)}" for ps in procs])
