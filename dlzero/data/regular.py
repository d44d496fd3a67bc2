"""Opening only regular files: what every reader of a run's files, shards and manifests goes through.

A run directory or a networks folder is listed by name (`gen-*/*.hcpe3`, `metrics/*.csv`, `*.json`),
and a name says nothing of what it is. A FIFO named like a shard blocks `open` until a writer comes
(forever: doctor and the dashboard's `/api/state` hung on one), a link to `/dev/zero` reads without
end, and a symlink loop raises ELOOP where the callers expected a missing or damaged file. So a file
is opened without blocking (`O_NONBLOCK`: a FIFO opens at once) and checked with `fstat` on the very
descriptor that is then read, before a byte is read; anything but a regular file is a NotRegularFile
(a DataError) that names the path and what it is, in one line, and the caller skips it as it skips a
damaged file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from dlzero.errors import DataError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotRegularFile(DataError):
    """`path` exists but is no regular file (a FIFO, a device, a socket, a directory, a symlink loop)."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(str(path), None, f"{kind}, not a regular file: skipped")
        self.kind = kind


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What `path` is when it exists and is no regular file ("a FIFO", "a symlink loop", ...); None for a
    regular file, and for a path that does not exist or cannot be looked at (its reader says why)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else None
    return None if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading in binary; NotRegularFile when it is not a regular file (checked on the
    open descriptor, so nothing can be swapped in between). OSError for a missing or unreadable file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(path, "a symlink loop") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, _kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file `path` (at most `max_bytes` + 1 of them when given, so the caller
    can tell a file over its limit without reading it whole); NotRegularFile or OSError as `open_regular`."""
    with open_regular(path) as fh:
        return fh.read() if max_bytes is None else fh.read(max_bytes + 1)


def read_regular_text(path: Path) -> str:
    """The regular file `path` as UTF-8 text (UnicodeDecodeError for other bytes)."""
    return read_regular(path).decode("utf-8")
