"""The helper process of `dlzero.search.mate`: df-pn mate searches, one JSON line in, one out.

It imports only cshogi (a start costs about 0.1 s of CPU), so the engine can kill it mid-search
and start another. A request is `{"sfen": S, "moves": [USI...], "depth": plies, "nodes": n}`;
the answer `{"pv": [USI...], "nodes": n}` holds the mate df-pn proved for the side to move (empty:
none within the limits, or the side to move is in check, where df-pn's attacker cannot start) and
the nodes df-pn spent (0 in check), which the mate guard takes from the budget it shares among
the moves it checks (`dlzero.search.guard`).

Run as `mate_child.py LIFELINE`: LIFELINE is the read end of a pipe whose write end only the
engine holds. A watcher forked at the start waits on it and kills the helper when it closes: the
engine ended (a `kill -9` included, which leaves the engine no chance to end its helper) or let
this helper go. The helper cannot watch for itself: nothing else runs in it while df-pn holds
its GIL, for as long as a search takes (minutes, for `go mate infinite`).
"""

from __future__ import annotations

import json
import os
import signal
import sys

import cshogi


def solve(request: dict) -> dict:
    """The answer to `request`: the USI moves of the mate df-pn proves within its plies and nodes (or
    []), and the nodes df-pn spent."""
    board = cshogi.Board(request["sfen"])
    for usi in request["moves"]:
        board.push_usi(usi)
    if board.is_check():
        return {"pv": [], "nodes": 0}
    dfpn = cshogi.DfPn(request["depth"], request["nodes"])
    found = dfpn.search(board)
    pv = [cshogi.move_to_usi(m) for m in dfpn.get_pv(board)] if found else []
    return {"pv": pv, "nodes": dfpn.searched_node}


def watch(lifeline: int) -> None:
    """Fork the watcher: it kills this process once the engine's end of `lifeline` is closed."""
    helper = os.getpid()
    if os.fork() == 0:
        os.close(0)  # the helper's pipes must close with the helper, not stay open in here
        os.close(1)
        while os.read(lifeline, 1):
            pass
        if os.getppid() == helper:  # still the helper's child: the helper is alive
            os.kill(helper, signal.SIGKILL)
        os._exit(0)
    os.close(lifeline)


def main() -> None:
    """Answer requests until stdin ends (the engine closed it, or ended). Ctrl-C in a terminal is the
    engine's to handle: it ends this process by closing its input or killing it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(int(sys.argv[1]))
    for line in sys.stdin:
        sys.stdout.write(json.dumps(solve(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
