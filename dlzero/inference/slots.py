"""Shared-memory slots between an inference server and its clients.

A slot is one client's window into the server: room for `capacity` encoded positions (float32
planes) and their outputs (policy logits and values), laid out back to back in one file on a
memory-backed filesystem (`/dev/shm` on Linux). The server creates the file, the client maps it,
and the file is unlinked as soon as both hold a mapping, so nothing is left behind however either
process ends (the kernel frees the memory with the last mapping). The bulk data never goes
through a pipe; only a few bytes per request do.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import tempfile
from pathlib import Path

import numpy as np

from dlzero.encoding import NUM_LABELS, NUM_PLANES

_PLANE_FLOATS = NUM_PLANES * 9 * 9


def slot_bytes(capacity: int) -> int:
    """Bytes of a slot for `capacity` positions: planes, policy logits, values (all float32)."""
    return 4 * capacity * (_PLANE_FLOATS + NUM_LABELS + 1)


def shm_dir() -> Path:
    """Where slot files live: a RAM-backed folder when there is one, else the temp folder."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


class Slot:
    """Numpy views of one mapped slot file: `planes` (C,100,9,9), `policy` (C,2187), `value` (C,)."""

    def __init__(self, path: Path, capacity: int, create: bool) -> None:
        self.path = path
        self.capacity = capacity
        size = slot_bytes(capacity)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            elif os.fstat(fd).st_size != size:
                raise ValueError(f"slot file {path} has {os.fstat(fd).st_size} bytes, expected {size}")
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        buf = np.frombuffer(self._map, dtype=np.float32)
        n_planes, n_policy = capacity * _PLANE_FLOATS, capacity * NUM_LABELS
        self.planes = buf[:n_planes].reshape(capacity, NUM_PLANES, 9, 9)
        self.policy = buf[n_planes:n_planes + n_policy].reshape(capacity, NUM_LABELS)
        self.value = buf[n_planes + n_policy:]

    @classmethod
    def create(cls, capacity: int, tag: str = "") -> Slot:
        """A new slot file with a name nobody else can guess or collide with."""
        name = f"dlzero-slot-{os.getpid()}-{tag}-{secrets.token_hex(6)}"
        return cls(shm_dir() / name, capacity, create=True)

    @classmethod
    def attach(cls, path: str | Path, capacity: int) -> Slot:
        return cls(Path(path), capacity, create=False)

    def unlink(self) -> None:
        """Remove the file name; the mappings stay valid until closed."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def close(self) -> None:
        """Drop the views and the mapping (numpy views must go first, or mmap refuses)."""
        del self.planes, self.policy, self.value
        # BufferError: a caller still holds a view; the mapping then goes with the last reference
        with contextlib.suppress(BufferError):
            self._map.close()
