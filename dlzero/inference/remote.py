"""Evaluator that sends its batches to an inference server (see `server.py`) on the same node.

To search and self-play it is just another Evaluator; `generation` says which model produced the
latest answer, so a self-play worker can file its games under the model that played them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from multiprocessing.connection import Client
from typing import Any

import numpy as np

from dlzero.errors import ServerError
from dlzero.inference.base import Evaluator
from dlzero.inference.server import ServerAddress
from dlzero.inference.slots import Slot
from dlzero.model.checkpoint import ModelMetadata


class RemoteEvaluator(Evaluator):
    """Batches go through a shared-memory slot; one request in flight at a time per evaluator."""

    backend = "server"

    def __init__(self, address: ServerAddress, capacity: int = 256, timeout_s: float = 600.0) -> None:
        self.address, self.timeout_s = address, timeout_s
        try:
            self.conn = Client(address.path, family="AF_UNIX", authkey=address.authkey)
        except (OSError, EOFError) as exc:
            raise ServerError(f"cannot reach the inference server at {address.path}: {exc}") from None
        except Exception as exc:  # multiprocessing.AuthenticationError: wrong key
            raise ServerError(f"the inference server at {address.path} refused us: {exc}") from None
        self.conn.send(("hello", os.getpid(), capacity))
        reply = self._recv("slot")
        _, path, granted, self.version, self.generation, meta, self.server_describe = reply
        self.slot = Slot.attach(path, granted)
        self.slot.unlink()  # both sides hold a mapping now: the name is not needed any more
        self._lock = threading.Lock()
        super().__init__(granted, ModelMetadata.from_dict(meta))

    def _recv(self, expect: str) -> tuple:
        try:
            if not self.conn.poll(self.timeout_s):
                raise ServerError(f"the inference server at {self.address.path} did not answer "
                                  f"within {self.timeout_s:.0f} s")
            reply = self.conn.recv()
        except (EOFError, OSError):
            raise ServerError(f"the inference server at {self.address.path} closed the connection "
                              "(stopped or died)") from None
        if reply[0] == "error":
            raise ServerError(f"inference server: {reply[1]}")
        if reply[0] != expect:
            raise ServerError(f"inference server: expected '{expect}', got {reply[0]!r}")
        return reply

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = planes.shape[0]
        with self._lock:
            self.slot.planes[:n] = planes
            try:
                self.conn.send(("eval", n))
            except OSError:
                raise ServerError(f"the inference server at {self.address.path} closed the connection "
                                  "(stopped or died)") from None
            _, self.version, self.generation, meta = self._recv("ok")
            if meta is not None:
                self.metadata = ModelMetadata.from_dict(meta)
            return self.slot.policy[:n].copy(), self.slot.value[:n].copy()

    def server_stats(self) -> dict[str, Any]:
        """The server's counters: positions, batches, mean batch, busy share, clients, swaps."""
        with self._lock:
            self.conn.send(("stats",))
            return self._recv("stats")[1]

    def describe(self) -> str:
        return f"server {self.server_describe} via {self.address.path}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(("bye",))
        self.conn.close()
        self.slot.close()
