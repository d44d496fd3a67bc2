"""One writer per part of a run: advisory locks that the commands writing a run directory take.

A run directory has parts that exactly one process may write at a time, and a part that many
write by design. Each of the first has a lock file under `runs/NAME/locks/`:

| part    | what it covers                                                    | held by                     |
|---------|-------------------------------------------------------------------|-----------------------------|
| `train` | models/gen-NNNN.pt, train/ (the resume checkpoint), metrics.csv    | `dlzero train --run`, loop  |
| `gate`  | models/best.json, games/ (gating records), ratings.csv             | `dlzero gate --run`, loop   |

`dlzero loop` is every role at once, so it holds both: a second loop, a trainer or a gate on the
same run is refused, which is what stops two loops from training and gating the same generations
over each other. Self-play takes neither while it plays: its writers are many on purpose (the
worker processes of one command, Ray actors on other nodes, `dlzero selfplay` on several machines
sharing the run, self-play beside a trainer or a loop), and every shard has a name of its own
(pid, time, random suffix), so they cannot overwrite one another. The only thing self-play writes
into another part is generation 0 of a new run (a random model and best.json), and `dlzero
selfplay` holds both locks for exactly that. A lock belongs to the command that took it, never to
its workers: self-play workers are spawned processes (which inherit no open file) and a torchrun
training takes the lock in rank 0 alone, the rank that writes.

The lock is `flock(2)` on the file, which the kernel drops when the holder exits however it ends
(kill -9, a crash, a power cut of a node, after the NFS lease on a network file system). So a
lock file whose holder is dead is simply taken over by the next command, with a warning naming
the holder that did not release it; nothing has to be deleted. While the lock is held the file
says who holds it (JSON: pid, host, command, since), and a refused command names that holder.
The file itself stays when released (emptied): removing it could let two processes lock two
different files of the same name.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import logging
import os
import shlex
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dlzero.errors import RunDirError
from dlzero.rundir import RunDir
from dlzero.runfiles import BEST_JSON, LOCKS_DIR, RATINGS_CSV, TRAIN_CSV

log = logging.getLogger(__name__)

PARTS = {"train": f"models, the training checkpoint and {TRAIN_CSV}",
         "gate": f"{BEST_JSON}, the gating games and {RATINGS_CSV}"}
_INFO_MAX = 1 << 16


class RunLockedError(RunDirError):
    """Another live process holds a part of the run this command would write."""


def lock_path(root: str | Path, part: str) -> Path:
    """The lock file of one part of a run."""
    return Path(root) / LOCKS_DIR / f"{part}.lock"


def current_command() -> str:
    """This process's command line as a person would type it."""
    return shlex.join(["dlzero", *sys.argv[1:]])


@contextlib.contextmanager
def hold(root: str | Path, parts: Sequence[str], command: str | None = None, create: bool = False) -> Iterator[None]:
    """Hold the locks of `parts` of the run at `root` for the duration of the block.

    Raises RunLockedError naming the holder if any part is taken (no lock is kept then). Without
    `create` the run must exist already (the error of `RunDir.open` otherwise): a command that
    only opens a run must not leave a `locks/` folder where there is no run.
    """
    root = Path(root)
    if not create:
        RunDir.open(root)
    (root / LOCKS_DIR).mkdir(parents=True, exist_ok=True)
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": command or current_command(),
            "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    held: list[int] = []
    try:
        for part in parts:
            if part not in PARTS:
                raise ValueError(f"unknown part of a run: {part!r}")
            held.append(_acquire(root, part, info))
        yield
    finally:
        for fd in reversed(held):
            _release(fd)


def _acquire(root: Path, part: str, info: dict[str, Any]) -> int:
    """The open, locked file descriptor of `part`'s lock file, with `info` written into it."""
    path = lock_path(root, part)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(fd)
        os.close(fd)
        raise RunLockedError(_refusal(root, part, path, holder)) from None
    except OSError as exc:
        os.close(fd)
        raise RunDirError(f"{path}: cannot lock it ({exc.strerror}); the run's file system has no working "
                          "flock, so dlzero cannot keep two writers apart there") from None
    stale = _read(fd)
    if stale:
        log.warning("%s: taking over the %s lock of PID %s on %s (`%s`, since %s), which ended without "
                    "releasing it", root, part, stale.get("pid"), stale.get("host"), stale.get("command"),
                    stale.get("since"))
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    os.fsync(fd)  # on a shared file system, a refused command on another node reads the holder from the server
    return fd


def _release(fd: int) -> None:
    """Empty the file (no holder to name any more), then unlock and close it."""
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _read(fd: int) -> dict[str, Any] | None:
    """The holder a lock file names, or None (empty, or being written at this moment)."""
    try:
        data = json.loads(os.pread(fd, _INFO_MAX, 0) or b"null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _refusal(root: Path, part: str, path: Path, holder: dict[str, Any] | None) -> str:
    """Who holds the lock, why this command stops, and how a lock is broken."""
    if holder is None:
        who = "another process (it has not written its name into the lock file yet)"
        pid = host = None
    else:
        pid, host = holder.get("pid"), holder.get("host")
        who = f"PID {pid} on host {host}, `{holder.get('command')}`, since {holder.get('since')}"
    gone = ""
    if host == socket.gethostname() and isinstance(pid, int) and not _alive(pid):
        gone = (f" PID {pid} has exited, but a process it started still has the lock file open "
                f"(`fuser -v {path}` names it); stop that one.")
    stop = f"stop it (`kill {pid}` on {host})" if pid is not None else "stop it"
    return (f"{root}: the run's {part} part ({PARTS[part]}) is being written by {who}; two writers would "
            f"overwrite each other's files, so this command stops. Wait for it to end or {stop}.{gone} "
            f"A stale lock needs nothing deleted: the system releases it when its holder dies, and the next "
            f"command takes {path} over.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
