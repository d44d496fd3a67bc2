"""Playouts a move at a byoyomi, and how long each move really took: the engine as a GUI runs it.

`dlzero bench search --byoyomi 1000` starts `python -m dlzero.usi` (this interpreter's dlzero) with
`Threads 1` and `EvalStreams 1`, one core's worth of search as the equal-time matches play it, and sends
`go btime 0 wtime 0 byoyomi B` from the end positions of the first `positions` lines of the rating suite
(configs/openings/rating.txt). Each move gives two figures:

- its playouts, from the engine's last `info` line (`nps` x `time`: the search's own count, not the tree's
  nodes, which hold a reused subtree);
- its wall time, `go` written to `bestmove` read (`dlzero.play.usi_client.SearchResult.time_ms`): what a
  clock run by the GUI charges, the pipe included. A move later than the byoyomi would lose on time;
- the engine's own `time` in that last `info` line (from `go` to the end of its search): the wall time
  less it is what came after the search (the answer's lines, the pipe, waiting for a core).

Each `ByoyomiMargin` of `margins` is measured once a round, alone (one engine) and with `side_by_side`
two engines searching the same positions at once (two games on one machine: what a match with
`--parallel 2` or an opponent thinking on the other core costs). Rounds alternate the margins' order:
on a shared machine whose speed drifts from one minute to the next, only figures of the same run compare.
"""

from __future__ import annotations

import math
import statistics
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from dlzero.config import Config
from dlzero.errors import ConfigError
from dlzero.gating.rating import rating_suite
from dlzero.play.usi_client import UsiClient


@dataclass
class MoveTime:
    """One timed move: the search's playouts, the wall ms from `go` to `bestmove`, the engine's own ms."""

    playouts: int
    time_ms: float
    search_ms: int


def _search(infos: list[str]) -> tuple[int, int]:
    """The playouts and ms of the search that the last `info` line with `nps` and `time` reports."""
    for line in reversed(infos):
        words = line.split()
        if "nps" in words and "time" in words:
            try:
                nps, ms = int(words[words.index("nps") + 1]), int(words[words.index("time") + 1])
            except (IndexError, ValueError):
                continue
            return round(nps * ms / 1000), ms
    return 0, 0


def engine_command(model: str | None) -> list[str]:
    """This interpreter's `dlzero usi` on one inference thread (`model`: a file or network name, None: the
    default network)."""
    return [sys.executable, "-m", "dlzero.usi", "--threads", "1"] + (["--model", model] if model else [])


def _play(engine: UsiClient, positions: list[str], byoyomi: int, out: list[MoveTime],
          start: threading.Barrier | None) -> None:
    engine.new_game()
    if start is not None:
        start.wait()
    for position in positions:
        infos, _ = engine.search(position, f"btime 0 wtime 0 byoyomi {byoyomi}")
        playouts, search_ms = _search(infos)
        out.append(MoveTime(playouts, engine.last_search_ms, search_ms))


def time_moves(model: str | None, positions: list[str], byoyomi: int, margin: int, engines: int) -> list[MoveTime]:
    """Every move of `engines` engines (each with ByoyomiMargin `margin`) searching `positions` at once."""
    clients = [UsiClient(engine_command(model), name=f"dlzero usi #{i}", timeout_s=max(60.0, 10 * byoyomi / 1000),
                         options={"EvalStreams": 1, "ByoyomiMargin": margin}) for i in range(engines)]
    results: list[list[MoveTime]] = [[] for _ in clients]
    try:
        for client in clients:
            client.start()  # loading the network is not part of any move
        if engines == 1:
            _play(clients[0], positions, byoyomi, results[0], None)
        else:
            start = threading.Barrier(engines)
            errors: list[BaseException] = []

            def run(i: int) -> None:
                try:
                    _play(clients[i], positions, byoyomi, results[i], start)
                except BaseException as exc:  # raised below, in the caller's thread
                    errors.append(exc)
                    start.abort()

            threads = [threading.Thread(target=run, args=(i,)) for i in range(engines)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
    finally:
        for client in clients:
            client.close()
    return [m for r in results for m in r]


def bench_byoyomi(cfg: Config, model: str | None, byoyomi: int, margins: list[int], positions: int,
                  side_by_side: bool, rounds: int = 1) -> Iterator[dict]:
    """Rows per margin and engine count: mean playouts a move, and the wall time's median, 95th percentile
    and largest value, with the moves later than the byoyomi (`late`); `search_ms_max`, the engine's own
    longest time, and `after_ms_max`, the most a move's wall time exceeded it."""
    if byoyomi <= 0 or positions <= 0 or rounds <= 0 or not margins:
        raise ConfigError("--byoyomi, --positions and --rounds must be positive and --margins not empty")
    lines = rating_suite(cfg)[0][:positions]
    counts = [1, 2] if side_by_side else [1]
    runs = [(margin, n) for margin in margins for n in counts]
    moves: dict[tuple[int, int], list[MoveTime]] = {run: [] for run in runs}
    for r in range(rounds):
        for margin, n in runs if r % 2 == 0 else runs[::-1]:
            moves[(margin, n)] += time_moves(model, lines, byoyomi, margin, n)
    for margin, n in runs:
        timed = moves[(margin, n)]
        ms = sorted(m.time_ms for m in timed)
        yield {"byoyomi": byoyomi, "margin": margin, "engines": n, "moves": len(timed),
               "playouts_per_move": round(statistics.mean(m.playouts for m in timed)),
               "time_ms_median": round(statistics.median(ms)), "time_ms_p95": round(ms[math.ceil(0.95 * len(ms)) - 1]),
               "time_ms_max": round(ms[-1]), "late": sum(t > byoyomi for t in ms),
               "search_ms_max": max(m.search_ms for m in timed),
               "after_ms_max": round(max(m.time_ms - m.search_ms for m in timed))}
