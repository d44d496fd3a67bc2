"""Atomic file writes: a reader sees the old file or the complete new one, never a partial one.

Every role in a run (self-play workers, trainer, arena, promotion) meets the others only through
files, and any process may be killed at any moment. So every file that another process may read
(shards, checkpoints, best.json, configs) is written to a temporary file in the same directory,
flushed and fsynced, then renamed over the target with `os.replace`, which is atomic on POSIX and
Windows when both names are on the same filesystem.

Temporary names start with "." and end with ".tmp", so a reader that globs `*.hcpe3` or `*.pt`
never picks one up; a crash leaves at most such a hidden file behind, never a torn target.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TEMP_SUFFIX = ".tmp"
# A disk that is full, over quota or read-only refuses every later write too: retrying cannot help.
STORAGE_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EROFS) if e is not None)
_MODES = {"wb": "wb", "w": "w", "wt": "w"}


def _create_exclusive(target: Path) -> tuple[int, Path]:
    """Create a new temporary file beside `target`; O_EXCL so two writers never share one.

    `os.open` with mode 0o666 lets the umask decide the permissions, as for a plain `open`
    (`tempfile.mkstemp` would force 0600, which other users of a shared run folder could not read).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; not possible (nor needed) on Windows."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb", encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file for writing; on a clean exit it replaces `path` in one step.

    If the block raises, the temporary file is removed and `path` is left as it was. `mode` is
    "wb" (default) or "w"/"wt" (text, `encoding`, UTF-8 by default). A disk that refuses the write
    (STORAGE_ERRNOS: a failed write names no file, a failed create the temporary one) raises its
    OSError naming `path`, so the one line the CLI prints for it says which file could not be written.
    """
    if mode not in _MODES:
        raise ValueError(f"atomic_open: mode must be one of {sorted(_MODES)}, not {mode!r}")
    target = Path(path)
    try:
        fd, tmp = _create_exclusive(target)
    except OSError as exc:
        if exc.errno in STORAGE_ERRNOS:
            exc.filename = str(target)
        raise
    try:
        text_kwargs = {} if mode == "wb" else {"encoding": encoding}
        with os.fdopen(fd, _MODES[mode], **text_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS and exc.filename in (None, str(tmp)):
            exc.filename = str(target)
        raise
    _fsync_directory(target.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` atomically (see module docstring)."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` atomically (see module docstring)."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)


def atomic_write_png(path: str | os.PathLike[str], figure: Figure) -> None:
    """Write a matplotlib figure to `path` as a 100 dpi PNG atomically, and close the figure.

    The one place a plot becomes a file (progress plots, review graphs): drawn into memory first, so a
    reader (the dashboard, a browser) never sees half a picture, and closed, which frees it: pyplot
    would otherwise keep every figure for the life of a long loop."""
    import matplotlib.pyplot as plt  # only the code that draws needs matplotlib; it has imported it already

    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=100)
    plt.close(figure)
    atomic_write_bytes(path, buf.getvalue())
