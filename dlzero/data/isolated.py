"""Run a function on each of many files in a child process that is allowed to crash.

cshogi's record parsers are C++ and can take the whole process down on bad input (its CSA parser
segfaults on kifu-for-js-csa/9fu_komabetsu.csa). Everything that parses a user's record file goes
through here: a child process (`python -c`, not multiprocessing, whose spawn mode re-runs the
caller's main script) imports the job function by name, calls it on each path and sends one
pickled outcome per file back over a framed pipe. When the child dies or a file takes longer than
`timeout_s`, that file gets the reason ("parser crashed (signal 11, SIGSEGV)", "parser timed out
after 120 s") and a new child carries on with the rest; an exception the job raises is that file's
reason too. Results come back in the order of the paths.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

DEFAULT_TIMEOUT_S = 120.0

_FRAME_HEADER = struct.Struct("<Q")
_WORKER_CODE = "import sys; from dlzero.data.isolated import _worker_main; sys.exit(_worker_main())"


class Outcome(NamedTuple):
    """One file's result: the job's return value, or why there is none."""

    path: str
    value: Any
    error: str | None


def _worker_main() -> int:
    """Child process: read {"job": "module:function", "paths": [...]} on stdin, send one pickled
    (ok, value or error text) frame per path.

    Frames go to the original stdout; fd 1 is then pointed at stderr, because cshogi's C++ code
    prints diagnostics to stdout and would corrupt the stream.
    """
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    request = json.load(sys.stdin)
    module, name = request["job"].split(":")
    job = getattr(importlib.import_module(module), name)
    for path in request["paths"]:
        try:
            outcome: tuple[bool, Any] = (True, job(path))
        except Exception as e:  # the parent reports it as this file's reason
            outcome = (False, f"{type(e).__name__}: {e}")
        payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        frames.write(_FRAME_HEADER.pack(len(payload)) + payload)
        frames.flush()
    return 0


def _read_frames(stream: IO[bytes], out: queue.Queue) -> None:
    """Reader thread: unpickle frames from the child until its output ends, then put None."""
    try:
        while len(header := stream.read(_FRAME_HEADER.size)) == _FRAME_HEADER.size:
            payload = stream.read(_FRAME_HEADER.unpack(header)[0])
            out.put(pickle.loads(payload))
    except (EOFError, pickle.UnpicklingError, OSError):
        pass  # a torn frame from a dying child: the parent reports the file as crashed
    finally:
        out.put(None)


def _child_env() -> dict[str, str]:
    """The parent's environment, with this checkout (or site-packages) first on the path, so the
    child imports the same dlzero as the parent."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _death_reason(returncode: int | None, stderr: IO[bytes]) -> str:
    """Why a child stopped early, with the last line it wrote to stderr (often the real cause)."""
    stderr.seek(0)
    text = stderr.read()
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        reason = f"parser crashed (signal {-returncode}, {name})"
    else:
        reason = f"parser process exited with status {returncode}"
    lines = text.decode("utf-8", "replace").strip().splitlines()
    return f"{reason}: {lines[-1][:200]}" if lines and returncode is not None and returncode > 0 else reason


def run_isolated(job: str, paths: list[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[Outcome]:
    """`job` ("module:function", importable in a fresh interpreter) on each path, in child processes;
    one Outcome per path, in order, whatever the files do to the child."""
    todo = list(paths)
    while todo:
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=_child_env(),
            )  # fmt: skip
            frames: queue.Queue = queue.Queue()
            reader = threading.Thread(target=_read_frames, args=(proc.stdout, frames), daemon=True)
            reader.start()
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(json.dumps({"job": job, "paths": todo}).encode("utf-8"))
                proc.stdin.close()
            done, failure = 0, None
            try:
                while done < len(todo):
                    try:
                        frame = frames.get(timeout=timeout_s)
                    except queue.Empty:
                        failure = f"parser timed out after {timeout_s:g} s"
                        break
                    if frame is None:
                        break
                    ok, value = frame
                    path, done = todo[done], done + 1
                    yield Outcome(path, value, None) if ok else Outcome(path, None, value)
            finally:
                if proc.poll() is None and done < len(todo):
                    proc.kill()
                proc.wait()
                reader.join()
                proc.stdout.close()
            if done < len(todo):
                yield Outcome(todo[done], None, failure or _death_reason(proc.returncode, stderr))
        todo = todo[done + 1 :]
