"""Test helpers: kill a self-play worker process as soon as it has written its first shard,
child-process targets that report like workers and die in awkward places, and the CLI as a child that
Ctrl-C can stop."""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from dlzero.rundir import RunDir

# `python -c CLI_WITH_SIGINT ARGS...` runs `dlzero ARGS...` with SIGINT's default handler set explicitly: a
# suite started in the background (`pytest &`, nohup, some CI runners) starts with SIGINT ignored and every
# child inherits that, so a Ctrl-C test's signal would be lost (four of four background runs failed so)
CLI_WITH_SIGINT = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                   "from dlzero.cli import main; sys.exit(main(sys.argv[1:]))")


class ShardKiller(threading.Thread):
    """SIGKILLs worker `worker`'s process once a shard of it is committed (its sidecar, written after
    the shard, appears); `killed` holds its pid."""

    def __init__(self, rd: RunDir, worker: int = 0, timeout: float = 180.0) -> None:
        super().__init__(daemon=True)
        self.rd, self.worker, self.timeout = rd, worker, timeout
        self.killed: list[int] = []

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            shards = list(self.rd.data_dir.glob(f"gen-*/selfplay-w{self.worker}-*.hcpe3.json"))
            if shards:
                pid = int(shards[0].name.split("-")[2])  # ShardWriter names: prefix-pid-...
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
                return
            time.sleep(0.02)


def report_then_die_mid_message(conn: Connection, n_before: int) -> None:
    """Child-process target: send `n_before` reports, then half a message, then die (exit code 9).

    The half message is a frame header promising 1000 bytes followed by only 10 of them, what a
    worker SIGKILLed inside `Connection.send` leaves in its pipe.
    """
    from dlzero.selfplay.worker import PipeReporter

    reporter = PipeReporter(conn)
    for i in range(n_before):
        reporter.put(("game", 0, {"i": i}))
    os.write(conn.fileno(), struct.pack("!i", 1000) + b"x" * 10)
    os._exit(9)


def report_and_exit(conn: Connection, worker: int, n: int) -> None:
    """Child-process target: send `n` reports and exit cleanly."""
    from dlzero.selfplay.worker import PipeReporter

    reporter = PipeReporter(conn)
    for i in range(n):
        reporter.put(("game", worker, {"i": i}))


def assert_restarted_once(rd: RunDir, summary: Any, killer: ShardKiller, games: int, stderr: str) -> None:
    """Worker 0 was killed once and restarted: every game asked for is on disk exactly once."""
    from dlzero.data.hcpe3 import read_hcpe3, read_sidecar

    assert killer.killed, "no shard appeared to trigger the kill"
    assert summary.restarts == 1 and not summary.failed_workers
    assert "restarting it" in stderr
    shards = rd.shards()
    # whatever the dead worker had played but not written, its replacement played again
    assert sum(read_sidecar(p)["games"] for p in shards) == games
    assert sum(len(read_hcpe3(p)) for p in shards) == games
    w0_pids = {p.name.split("-")[2] for p in shards if p.name.startswith("selfplay-w0-")}
    assert len(w0_pids) == 2 and str(killer.killed[0]) in w0_pids  # the first process and its replacement
