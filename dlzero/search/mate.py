"""Deep mate searches that cannot freeze the engine: df-pn in a helper process the engine can kill.

Why a process: cshogi's mate searches (`Board.mate_move`, `DfPn.search`) hold the GIL for their
whole run and cannot be interrupted, so while one runs no other thread of the engine answers
`stop`, `isready` or `quit`. Neither a depth nor a node limit bounds their time: on a bare king
against rook and bishop in hand `mate_move` took 1.2 s at 15 plies and over 60 s at 21; a df-pn
node cost from 1.5 us to 100 us depending on the position (20k nodes took 0.8 s, 600k took 62 s on
a loaded core). Nor can a search go on in slices: a second `DfPn.search` starts from scratch (its
table is cleared), so a slice would redo the work of the last. In a helper process the engine's
threads keep running, and a search that is stopped or out of time ends when the process is
killed; another starts at once, ready for the next search (about 0.1 s of CPU for Python and
cshogi; `dlzero.search.mate_child` imports nothing else).

Short mates stay in-process: `mate_move` up to `config.MATE_MOVE_MAX_PLIES` (7) took at most 60 ms
in the positions above, and a helper would cost more than it saves there.
"""

from __future__ import annotations

import json
import logging
import os
import select  # the standard library's (absolute import), not dlzero/search/select.py
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cshogi

from dlzero.config import DFPN_NODES_MAX
from dlzero.position import start_position

__all__ = ["DFPN_NODES_MAX", "MateSolver"]

log = logging.getLogger(__name__)
POLL_S = 0.01  # how often a waiting search looks at `stop`
# runpy runs the helper by its path without putting dlzero/search on sys.path (its select.py would
# shadow the standard library's there)
_BOOT = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
_CHILD = Path(__file__).with_name("mate_child.py")


class MateSolver:
    """df-pn mate searches in a helper process, started on first use and replaced after each kill.

    One search at a time (the engine's search thread, or the analysis engine's main thread). The
    helper ends with this process however it ends, a `kill -9` included (a watcher in the helper
    holds the read end of a pipe whose write end, `_lifeline`, only this process holds: see
    `dlzero.search.mate_child`), and when `close` lets it go.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lifeline: int | None = None

    def search(self, board: cshogi.Board, depth: int, nodes: int, seconds: float | None = None,
               stop: Callable[[], bool] | None = None) -> list[str] | None:
        """The USI moves of a mate df-pn proves for the side to move within `depth` plies and `nodes`
        nodes ([]: none proved, or the side to move is in check), or None when `stop()` turned true
        or `seconds` passed first. The mate is not always the shortest one.
        """
        answer = self.search_counted(board, depth, nodes, seconds, stop)
        return None if answer is None else answer[0]

    def search_counted(self, board: cshogi.Board, depth: int, nodes: int, seconds: float | None = None,
                       stop: Callable[[], bool] | None = None) -> tuple[list[str], int] | None:
        """`search`'s mate and the df-pn nodes it spent (0 when none ran: the side to move in check, a
        failed helper), or None as `search`: the mate guard shares one node budget among its searches."""
        if board.is_check():
            return [], 0
        request = {"sfen": start_position(board), "moves": [cshogi.move_to_usi(m) for m in board.history],
                   "depth": depth, "nodes": max(1, min(nodes, DFPN_NODES_MAX))}
        proc = self.start()
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
        except OSError as exc:
            log.warning("mate search: the helper process could not take the request (%s); no mate searched", exc)
            self.close()
            return [], 0
        deadline = None if seconds is None else time.monotonic() + seconds
        fd = proc.stdout.fileno()
        data = b""
        while not data.endswith(b"\n"):
            if stop is not None and stop():
                self._replace()
                return None
            wait = POLL_S
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    self._replace()
                    return None
            if select.select([fd], [], [], wait)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # the helper ended (a crash, a kill from outside)
                    log.warning("mate search: the helper process ended (exit status %s); no mate found",
                                proc.wait())
                    self.close()
                    return [], 0
                data += chunk
        answer = json.loads(data)
        return answer["pv"], answer["nodes"]

    def start(self) -> subprocess.Popen:
        """The helper process, started now unless it runs (a warm-up: a search waits for its start,
        about 0.1 s of CPU, and a deep root mate search has only a share of a move's time)."""
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            read, self._lifeline = os.pipe()
            try:
                self._proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(_CHILD), str(read)],
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                              pass_fds=(read,))
            finally:
                os.close(read)
        return self._proc

    def close(self) -> None:
        """End the helper process (a search in progress is abandoned)."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        if self._lifeline is not None:
            os.close(self._lifeline)  # its watcher sees the pipe close and ends too
            self._lifeline = None

    def _replace(self) -> None:
        """Kill the helper mid-search and start the next one now, so it is ready for the next search."""
        self.close()
        self.start()
