"""Inference server: one process per device owns the network and serves many worker processes.

Why: a GPU is fed well only by large batches, and one self-play process cannot fill one (its tree
work is Python on one core). So W workers on the same node send their leaves to one server per
GPU, which concatenates the requests that arrive within `max_wait_ms` (or until `max_batch`
positions, or until every connected worker is waiting) and runs them in one network call.

Transport (same node only):
- a Unix socket (`multiprocessing.connection`, with an authkey) carries a few bytes per request:
  `("eval", n)` from the worker, `("ok", version, generation, metadata | None)` back;
- the planes and outputs go through a shared-memory `Slot` per worker (see `slots.py`).
Each worker has its own connection, so nothing is shared that a killed worker could leave locked:
the server sees the connection close, drops that worker's slot and goes on; an answer to a dead
worker is simply discarded.

Model: the server follows a `ModelSource` (the run's best.json, or a model file replaced in
place). A new model is loaded in a helper thread while the old one keeps serving, then swapped in
between two batches; every answer says which model version produced it.

Lifecycle: `start_server` spawns the process and waits for it to load the model. The server stops
when its parent says so, or when the parent's end of the control pipe closes (the parent died).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import secrets
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Listener, wait
from pathlib import Path
from typing import Any

import numpy as np

from dlzero.config import InferenceConfig, ServerConfig
from dlzero.encoding import NUM_PLANES
from dlzero.errors import DlzeroError, ModelFileError, ServerError
from dlzero.inference.base import Evaluator
from dlzero.inference.loader import load_model
from dlzero.inference.slots import Slot


@dataclass(frozen=True)
class ServerAddress:
    """How a worker reaches a server: a Unix socket path and the key that authenticates it."""

    path: str
    authkey: bytes


@dataclass(frozen=True)
class ModelSource:
    """What a server runs: `run` follows a run directory's best.json; `file` follows one model file
    (replaced atomically in place to hot-swap it)."""

    kind: str
    path: str

    @classmethod
    def run(cls, root: str | Path) -> ModelSource:
        return cls("run", str(root))

    @classmethod
    def file(cls, path: str | Path) -> ModelSource:
        return cls("file", str(path))

    def poll(self) -> tuple[tuple, Path]:
        """(key, model path): the key changes exactly when a different model should be served."""
        if self.kind == "run":
            from dlzero.rundir import RunDir

            rd = RunDir(self.path)
            best = rd.best()
            if best is None:
                raise ServerError(f"{self.path}: the run has no best model yet")
            return ("run", best.generation, best.model), rd.best_model_path()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise ModelFileError(f"model file '{self.path}' does not exist") from None
        return ("file", st.st_ino, st.st_mtime_ns, st.st_size), Path(self.path)


@dataclass
class ServerStats:
    """Counters a client can ask for (`RemoteEvaluator.server_stats`) and the server logs at exit."""

    device: str = ""
    model: str = ""
    generation: int = 0
    version: int = 0
    positions: int = 0
    batches: int = 0
    eval_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)
    clients: int = 0
    clients_seen: int = 0
    clients_lost: int = 0
    swaps: int = 0
    errors: int = 0

    def snapshot(self) -> dict[str, Any]:
        wall = max(time.monotonic() - self.started, 1e-9)
        data = dataclasses.asdict(self)
        data.pop("started")
        data.update(seconds=round(wall, 3), mean_batch=round(self.positions / max(self.batches, 1), 2),
                    evals_per_s=round(self.positions / wall, 1), busy=round(self.eval_seconds / wall, 4))
        return data


@dataclass
class _Client:
    conn: Connection
    slot: Slot
    pid: int
    version_sent: int = -1
    pending: int = 0  # positions of the request being served (0: none)


class InferenceServer:
    """The serving loop (runs in the server process; `serve_forever` returns when told to stop)."""

    def __init__(self, source: ModelSource, inference: InferenceConfig, server: ServerConfig,
                 address: ServerAddress, verbose: bool = True) -> None:
        self.source, self.inference, self.cfg, self.address = source, inference, server, address
        self.verbose = verbose
        self.evaluator, self.key, self.model_path = self._load()
        self.version = 0
        self.stats = ServerStats(device=self.evaluator.describe(), model=str(self.model_path),
                                 generation=self.evaluator.metadata.generation)
        self.batch = np.empty((server.max_batch, NUM_PLANES, 9, 9), dtype=np.float32)
        self.clients: dict[Connection, _Client] = {}
        self.listener = Listener(address.path, family="AF_UNIX", authkey=address.authkey)
        self._wake_r, self._wake_w = socket.socketpair()
        self._incoming: list[Connection] = []
        self._incoming_lock = threading.Lock()
        self._next: tuple[Evaluator, tuple, Path] | None = None
        self._loading = False
        self._last_poll = time.monotonic()
        self._poll_problem = ""
        self._stopping = False
        self._carry: list[_Client] = []

    # -- model ----------------------------------------------------------------------------------
    def _load(self, key_path: tuple[tuple, Path] | None = None) -> tuple[Evaluator, tuple, Path]:
        key, path = key_path or self.source.poll()
        cfg = dataclasses.replace(self.inference, max_batch=self.cfg.max_batch)
        return load_model(path, cfg), key, path

    def _poll_model(self) -> None:
        """Every `check_interval_s`: start loading a new model in a helper thread if the source moved."""
        now = time.monotonic()
        if self._loading or now - self._last_poll < self.cfg.check_interval_s:
            return
        self._last_poll = now
        try:
            key, path = self.source.poll()
        except (OSError, DlzeroError) as exc:
            if str(exc) != self._poll_problem:
                self._poll_problem = str(exc)
                self.log(f"cannot check the model source ({exc}); serving {self.model_path}")
            return
        if key == self.key:
            return
        self._loading = True

        def load() -> None:
            try:
                self._next = self._load((key, path))
            except Exception as exc:  # a bad file must not stop serving: keep the old model
                self.log(f"new model {path} failed to load, keeping {self.model_path}: {exc}")
                self.key = key  # do not retry the same broken file every few seconds
                self._loading = False
            self._wake_w.send(b"m")

        threading.Thread(target=load, name="dlzero-model-load", daemon=True).start()

    def _swap(self) -> None:
        if self._next is None:
            return
        old = self.evaluator
        self.evaluator, self.key, self.model_path = self._next
        self._next = None
        self._loading = False
        self.version += 1
        old.close()
        s = self.stats
        s.swaps, s.version, s.model = s.swaps + 1, self.version, str(self.model_path)
        s.generation = self.evaluator.metadata.generation
        self.log(f"now serving {self.model_path} (generation {s.generation}, version {self.version})")

    # -- connections ----------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stopping:
            try:
                conn = self.listener.accept()
            except OSError:
                if self._stopping:
                    return
                continue  # a client that failed the handshake or vanished during it
            except Exception:  # AuthenticationError and friends: refuse that client, keep accepting
                continue
            with self._incoming_lock:
                self._incoming.append(conn)
            try:
                self._wake_w.send(b"c")
            except OSError:
                return

    def _welcome(self, conn: Connection) -> None:
        """Handshake: ("hello", pid, capacity) -> ("slot", path, capacity, version, generation, meta, describe)."""
        try:
            if not conn.poll(5.0):
                raise ServerError("no hello within 5 s")
            msg = conn.recv()
            if not (isinstance(msg, tuple) and len(msg) == 3 and msg[0] == "hello"):
                raise ServerError(f"expected hello, got {msg!r:.80}")
            capacity = max(1, min(int(msg[2]), self.cfg.max_batch))
            slot = Slot.create(capacity, tag=str(msg[1]))
            try:
                conn.send(("slot", str(slot.path), capacity, self.version, self.stats.generation,
                           dataclasses.asdict(self.evaluator.metadata), self.evaluator.describe()))
            except Exception:
                slot.unlink()
                slot.close()
                raise
        except (OSError, EOFError, ValueError, TypeError, ServerError) as exc:
            self.log(f"refused a client: {exc}")
            conn.close()
            return
        client = _Client(conn, slot, int(msg[1]), version_sent=self.version)
        self.clients[conn] = client
        self.stats.clients = len(self.clients)
        self.stats.clients_seen += 1
        if self.verbose:
            self.log(f"worker pid {client.pid} connected ({len(self.clients)} now)")

    def _drop(self, client: _Client, why: str) -> None:
        self.clients.pop(client.conn, None)
        client.conn.close()
        client.slot.unlink()  # normally gone already: the client unlinks once it has mapped it
        client.slot.close()
        client.pending = 0
        self.stats.clients = len(self.clients)
        if why != "bye":
            self.stats.clients_lost += 1
            self.log(f"worker pid {client.pid} {why}; its slot is freed ({len(self.clients)} connected)")

    def _send(self, client: _Client, msg: tuple) -> None:
        try:
            client.conn.send(msg)
        except (OSError, EOFError, ValueError):
            self._drop(client, "went away before its answer")

    # -- serving --------------------------------------------------------------------------------
    def _handle(self, client: _Client, requests: list[_Client]) -> None:
        try:
            msg = client.conn.recv()
        except (EOFError, OSError):
            self._drop(client, "disconnected")
            return
        except Exception as exc:  # a garbled message: that client is unusable, the others are not
            self._drop(client, f"sent an unreadable message ({type(exc).__name__})")
            return
        kind = msg[0] if isinstance(msg, tuple) and msg else None
        if kind == "eval" and len(msg) == 2 and isinstance(msg[1], int):
            n = msg[1]
            if client.pending or not 1 <= n <= client.slot.capacity:
                self._send(client, ("error", f"bad request: {n} positions (slot holds {client.slot.capacity}, "
                                             f"{client.pending} already pending)"))
                return
            client.pending = n
            requests.append(client)
        elif kind == "stats":
            self._send(client, ("stats", self.stats.snapshot()))
        elif kind == "bye":
            self._drop(client, "bye")
        else:
            self._send(client, ("error", f"unknown request {msg!r:.60}"))

    def _gather(self) -> list[_Client]:
        """Requests for one batch: wait for the first, then up to `max_wait_ms` for more."""
        requests, self._carry = self._carry, []
        deadline = time.monotonic() if requests else None
        max_wait = self.cfg.max_wait_ms / 1000.0
        while not self._stopping:
            total = sum(c.pending for c in requests)
            if requests:
                idle = len(self.clients) - len(requests)
                remaining = deadline - time.monotonic()
                if total >= self.cfg.max_batch or idle <= 0 or remaining <= 0:
                    break
                timeout = remaining
            else:
                timeout = 0.25
            ready = wait([self._wake_r, self._control, *self.clients], timeout)
            for obj in ready:
                if obj is self._wake_r:
                    self._on_wake()
                elif obj is self._control:
                    self._on_control()
                elif obj in self.clients:
                    before = len(requests)
                    self._handle(self.clients[obj], requests)
                    if deadline is None and len(requests) > before:
                        deadline = time.monotonic() + max_wait
            requests = [c for c in requests if c.conn in self.clients]
            if not requests:
                deadline = None
                self._poll_model()
                self._swap()
        return requests

    def _on_wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_r.recv(4096)
        with self._incoming_lock:
            incoming, self._incoming = self._incoming, []
        for conn in incoming:
            self._welcome(conn)

    def _on_control(self) -> None:
        try:
            msg = self._control.recv()
        except (EOFError, OSError):
            msg = ("stop",)  # the parent is gone: nobody will use us any more
        if msg and msg[0] == "stop":
            self._stopping = True
        elif msg and msg[0] == "stats":
            self._control.send(("stats", self.stats.snapshot()))

    def _evaluate(self, requests: list[_Client]) -> None:
        """One network call over as many requests as fit in `max_batch`; the rest wait for the next."""
        batch, total = [], 0
        for client in requests:
            if batch and total + client.pending > self.cfg.max_batch:
                self._carry.append(client)
                continue
            np.copyto(self.batch[total:total + client.pending], client.slot.planes[:client.pending])
            batch.append((client, total))
            total += client.pending
        t0 = time.perf_counter()
        try:
            policy, value = self.evaluator.evaluate(self.batch[:total])
        except Exception as exc:
            self.stats.errors += 1
            self.log(f"evaluation of {total} positions failed: {exc}")
            for client, _ in batch:
                client.pending = 0
                self._send(client, ("error", f"evaluation failed on the server: {type(exc).__name__}: {exc}"))
            return
        self.stats.eval_seconds += time.perf_counter() - t0
        self.stats.positions += total
        self.stats.batches += 1
        for client, offset in batch:
            n = client.pending
            client.slot.policy[:n] = policy[offset:offset + n]
            client.slot.value[:n] = value[offset:offset + n]
            client.pending = 0
            meta = None
            if client.version_sent != self.version:
                meta = dataclasses.asdict(self.evaluator.metadata)
                client.version_sent = self.version
            self._send(client, ("ok", self.version, self.stats.generation, meta))

    def serve_forever(self, control: Connection) -> None:
        """Serve until `control` says stop or closes."""
        self._control = control
        accept = threading.Thread(target=self._accept_loop, name="dlzero-accept", daemon=True)
        accept.start()
        self.log(f"serving {self.model_path} on {self.evaluator.describe()}, max batch {self.cfg.max_batch}, "
                 f"wait {self.cfg.max_wait_ms} ms")
        try:
            while not self._stopping:
                requests = self._gather()
                if requests:
                    self._evaluate(requests)
                self._poll_model()
                self._swap()
        finally:
            self._stopping = True
            self.listener.close()
            for client in list(self.clients.values()):
                self._drop(client, "bye")
            s = self.stats.snapshot()
            self.log(f"stopped: {s['positions']:,} positions in {s['batches']:,} batches "
                     f"(mean {s['mean_batch']}), {s['evals_per_s']:,.0f}/s, busy {s['busy']:.0%}, "
                     f"{s['clients_seen']} workers served, {s['clients_lost']} lost")

    def log(self, msg: str) -> None:
        if self.verbose:
            print(f"[inference server pid {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def default_devices() -> list[str]:
    """One server per visible CUDA GPU; on a machine without one, a single CPU server."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [f"cuda:{i}" for i in range(n)] or ["cpu"]


def _serve_entry(source: ModelSource, inference: dict, server: dict, address: ServerAddress,
                 control: Connection, verbose: bool) -> None:
    """Server process entry point (spawned).

    SIGINT is ignored: a Ctrl-C reaches the whole process group, and the server must keep answering
    while the workers save their games; its parent stops it afterwards (or its death does).
    """
    from dlzero.config import InferenceConfig as Inf
    from dlzero.config import ServerConfig as Srv

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    try:
        srv = InferenceServer(source, Inf(**inference), Srv(**server), address, verbose)
    except BaseException as exc:
        msg = str(exc) if isinstance(exc, (DlzeroError, OSError)) else traceback.format_exc()
        control.send(("failed", msg))
        return
    control.send(("ready", srv.evaluator.describe(), srv.stats.generation))
    srv.serve_forever(control)


class ServerProcess:
    """Handle on a running server process (what `start_server` returns)."""

    def __init__(self, process: mp.process.BaseProcess, control: Connection, address: ServerAddress,
                 describe: str, generation: int, sock_dir: str) -> None:
        self.process, self.control, self.address = process, control, address
        self.describe, self.generation, self._sock_dir = describe, generation, sock_dir
        self._lock = threading.Lock()

    def stats(self, timeout: float = 10.0) -> dict[str, Any]:
        """The server's counters (`ServerStats.snapshot`)."""
        with self._lock:
            self.control.send(("stats",))
            if not self.control.poll(timeout):
                raise ServerError("the inference server did not report its stats")
            return self.control.recv()[1]

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to finish, then make sure it has (terminate after `timeout`)."""
        try:
            with self._lock:
                self.control.send(("stop",))
        except OSError:
            pass
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        self.control.close()
        try:
            Path(self.address.path).unlink(missing_ok=True)
            os.rmdir(self._sock_dir)
        except OSError:
            pass

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(source: ModelSource, inference: InferenceConfig, server: ServerConfig,
                 device: str | None = None, verbose: bool = True, ready_timeout: float = 900.0) -> ServerProcess:
    """Spawn a server for `source` on `device` (default: `inference.device`) and wait until it serves.

    `ready_timeout` is generous because a TensorRT engine build takes minutes. A model that cannot
    be loaded is a `ServerError` carrying the server's own message.
    """
    if device is not None:
        inference = dataclasses.replace(inference, device=device)
    sock_dir = tempfile.mkdtemp(prefix="dlzero-srv-")
    address = ServerAddress(os.path.join(sock_dir, "sock"), secrets.token_bytes(16))
    ctx = mp.get_context("spawn")
    parent_end, child_end = ctx.Pipe()
    proc = ctx.Process(target=_serve_entry, name=f"dlzero-server-{inference.device}",
                       args=(source, dataclasses.asdict(inference), dataclasses.asdict(server), address,
                             child_end, verbose), daemon=True)
    proc.start()
    child_end.close()
    ready = parent_end.poll(ready_timeout)
    try:
        msg = parent_end.recv() if ready else ("failed", f"not ready within {ready_timeout:.0f} s")
    except EOFError:
        msg = ("failed", f"the server process died while starting (exit code {proc.exitcode})")
    if msg[0] != "ready":
        proc.terminate()
        proc.join(5)
        raise ServerError(f"inference server for {source.path} on {inference.device} failed: {msg[1]}")
    return ServerProcess(proc, parent_end, address, msg[1], msg[2], sock_dir)
