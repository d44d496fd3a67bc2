"""Test helper: kill a self-play worker process as soon as it has written its first shard."""

from __future__ import annotations

import os
import signal
import threading
import time

from dlzero.rundir import RunDir


class ShardKiller(threading.Thread):
    """SIGKILLs worker `worker`'s process once a shard of it appears; `killed` holds its pid."""

    def __init__(self, rd: RunDir, worker: int = 0, timeout: float = 180.0) -> None:
        super().__init__(daemon=True)
        self.rd, self.worker, self.timeout = rd, worker, timeout
        self.killed: list[int] = []

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            shards = list(self.rd.data_dir.glob(f"gen-*/selfplay-w{self.worker}-*.hcpe3"))
            if shards:
                pid = int(shards[0].name.split("-")[2])  # ShardWriter names: prefix-pid-...
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
                return
            time.sleep(0.02)
