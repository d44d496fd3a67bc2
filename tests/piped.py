"""A `dlzero` engine command (`dlzero usi`, `dlzero analyze`) on pipes, driven as a GUI or a client would: the
helpers of the tests that hold the real engine to answering every command in time."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable

# a bare king against rook, bishop, silver, knight and lance in hand: df-pn searches 600k nodes (62 s on a loaded
# core), so `go mate infinite` here keeps the engine's mate search busy while other commands must be answered
MANY_CHECKS = "sfen 9/9/9/9/4k4/9/9/9/4K4 b RBSNL 1"


class Piped:
    """A `dlzero` engine command on pipes; its output lines are collected by a thread, so a wait can time out
    and say how long the answer took."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "dlzero.cli", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.lines.put(line.rstrip("\n")) for line in self.proc.stdout],
                         daemon=True).start()

    def send(self, *lines: str) -> None:
        self.proc.stdin.write("".join(line + "\n" for line in lines))
        self.proc.stdin.flush()

    def wait(self, pred, timeout: float = 60.0) -> tuple[str, float]:
        """The first line from now on that `pred` accepts, and the seconds it took."""
        start = time.monotonic()
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, start + timeout - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer in {timeout} s; last lines: "
                                     f"{[seen[:200] for seen in self.seen[-5:]]}") from None
            self.seen.append(line)
            if pred(line):
                return line, time.monotonic() - start

    def arrived(self) -> list[str]:
        """The lines that came since the last wait, without waiting (kept in `seen` too)."""
        lines = []
        while not self.lines.empty():
            lines.append(self.lines.get())
        self.seen.extend(lines)
        return lines

    def end(self, last: str) -> None:
        """Send `last` (`quit`, or an analysis' `terminate_all`), close the input and wait; kill if it lingers."""
        if self.proc.poll() is None:
            try:
                self.send(last)
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def is_line(word: str) -> Callable[[str], bool]:
    """A `Piped.wait` predicate: the line is the command `word`, bare or with arguments."""
    return lambda line: line == word or line.startswith(word + " ")
