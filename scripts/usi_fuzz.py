#!/usr/bin/env python
"""A seeded USI fuzz of `dlzero usi` (issue 52): valid and invalid commands, every kind of `go` mixed, sent
as a GUI would, line by line with short pauses. Each `isready` waits for its `readyok` and the time it took
is the figure: the engine's reader must never wait on a search, so every one comes within `--ready-limit`.
At the end every `go` must have had one `bestmove` or `checkmate`, and `quit` must end the process.

    python scripts/usi_fuzz.py --model model.pt --lines 100000 --seed 1

Options that reload the network (Threads, Backend, Device, Precision, ModelPath) are left out: a reload at
`isready` is the one wait USI allows there. Exit status 0 when every check held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import cshogi

USI_LINE = re.compile(r"^(id (name|author) |option name |usiok$|readyok$|usi_tunablesok$|info |bestmove |checkmate )")
BAD_POSITIONS = [
    "sfen 9/9/9/9/4k4/4K4/9/9/9 b - 1",                # kings adjacent
    "sfen 4k4/4R4/9/9/9/9/9/9/4K4 b - 1",              # the side not to move in check
    "sfen 4k4/9/9/9/9/9/9/9/9 b - 1",                   # a king missing
    "sfen 4k4/9/9/9/4P4/9/4P4/9/4K4 b - 1",             # two pawns on a file
    "sfen P3k4/9/9/9/9/9/9/9/4K4 b - 1",                # a pawn with no move
    f"sfen {cshogi.STARTING_SFEN.split()[0]} b R 1",    # three rooks
    f"sfen {cshogi.STARTING_SFEN.split()[0]} b - 2147483647",
    "sfen lnsgkgsnl/9/ppppppppp b - 1", "sfen", "startpos moves 7g7f 7g7f", "startpos moves zz", "frob",
]
GOOD_SFENS = ["4k4/9/4G4/9/9/9/9/9/4K4 b G 1", "9/9/9/9/4k4/9/9/9/4K4 b RBSNL 1", "4k4/9/9/9/9/9/9/9/4K4 b RB 1"]
OPTIONS = [
    "MultiPV value 1", "MultiPV value 3", "MultiPV value 100", "BatchSize value 1", "BatchSize value 4096",
    "BatchSize value 64", "EvalStreams value 0", "EvalStreams value 2", "EvalStreams value 64",
    "MateGuardNodes value 0", "MateGuardNodes value 30000", "MateGuardNodes value 10000000",
    "RootMateDepth value 7", "RootMateDepth value 31", "LeafMateDepth value 0", "LeafMateDepth value 7",
    "PVInterval value 0", "PVInterval value 50", "USI_Ponder value true", "USI_Ponder value false",
    "ByoyomiMargin value 300", "ByoyomiMargin value 0", "SearchAlgorithm value gumbel",
    "SearchAlgorithm value puct", "Playouts value 0", "Playouts value 200", "USI_Hash value 16",
    "USI_Hash value 0", "Clear Hash", "USI_ShowWDL value true", "ReuseTree value false", "ReuseTree value true",
    "MultiPV value 0", "BatchSize value 5000", "Threads value 9999", "NoSuchOption value 1", "MultiPV",
]


def go_command(rng: random.Random) -> str:
    """One `go` of any kind, now and then a malformed one (every `go` is still answered once)."""
    byoyomi = rng.choice([0, 100, 300, 1000, 30000])
    clock = rng.choice([0, 1000, 60000, 10**9])
    return rng.choice([
        f"go nodes {rng.choice([1, 10, 100, 1000, 10**9])}", "go infinite", "go ponder",
        f"go ponder btime {clock} wtime {clock} byoyomi {byoyomi}", f"go btime {clock} wtime {clock} byoyomi {byoyomi}",
        f"go btime {clock} wtime {clock} binc 100 winc 100", f"go movetime {rng.choice([1, 50, 500])}",
        f"go mate {rng.choice([1, 100, 1000])}", "go mate infinite", "go mate", "go mate nodes 1000",
        "go nodes 50 infinite", "go depth 5", "go nodes \u00b2", "go", "go searchmoves 7g7f 2g2f 1a1b",
        "go btime 99999999999999999999 wtime 99999999999999999999 byoyomi 99999999999999999999",
        "go nodes -5", "go frob 3",
    ])


def position_command(rng: random.Random) -> str:
    """`position` of the start, of a random game's prefix (sometimes with an illegal move after it), of a few
    SFENs, or one the engine must refuse."""
    roll = rng.random()
    if roll < 0.15:
        return "position " + rng.choice(BAD_POSITIONS)
    if roll < 0.25:
        return f"position sfen {rng.choice(GOOD_SFENS)}"
    board = cshogi.Board()
    moves = []
    for _ in range(rng.randrange(0, 60)):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        moves.append(cshogi.move_to_usi(move))
        board.push(move)
    if rng.random() < 0.05:
        moves.append("5e5d")  # most likely illegal here
    return "position startpos" + (" moves " + " ".join(moves) if moves else "")


def fuzz_lines(seed: int, count: int) -> Iterator[str]:
    """`count` command lines, the same for the same seed; no `quit` (the driver sends it last)."""
    rng = random.Random(seed)
    kinds = [("isready", 10), ("position", 15), ("go", 22), ("stop", 10), ("ponderhit", 7), ("usinewgame", 3),
             ("gameover", 2), ("setoption", 8), ("junk", 5), ("usi", 1), ("usi_tunables", 1)]
    names, weights = zip(*kinds, strict=True)
    for _ in range(count):
        kind = rng.choices(names, weights)[0]
        if kind == "position":
            yield position_command(rng)
        elif kind == "go":
            yield go_command(rng)
        elif kind == "gameover":
            yield "gameover " + rng.choice(["win", "lose", "draw"])
        elif kind == "setoption":
            yield "setoption name " + rng.choice(OPTIONS)
        elif kind == "junk":
            yield rng.choice(["", "   ", "frobnicate", "position", "setoption", "go go go", "isreadyy",
                              "".join(chr(rng.randrange(33, 127)) for _ in range(rng.randrange(1, 40)))])
        else:
            yield kind


class Engine:
    """`dlzero usi` on pipes; a thread reads its output, counts the answers and hands `readyok`s over."""

    def __init__(self, model: str) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "usi", "--model", model, "--threads", "1"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1, env=env)
        self.ready: queue.Queue[float] = queue.Queue()
        self.answers = 0
        self.bad_lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if line == "readyok":
                self.ready.put(time.monotonic())
            elif line.startswith(("bestmove ", "checkmate ")):
                self.answers += 1
            if not USI_LINE.match(line):
                self.bad_lines.append(line)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def isready(self, timeout: float) -> float | None:
        """Seconds from `isready` to its `readyok`; None when none came within `timeout`."""
        sent = time.monotonic()
        self.send("isready")
        try:
            return self.ready.get(timeout=timeout) - sent
        except queue.Empty:
            return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="network file for the engine")
    p.add_argument("--lines", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--pause-ms", type=float, default=3.0, help="longest pause after a line (a GUI's pace)")
    p.add_argument("--ready-limit", type=float, default=1.0, help="seconds every isready must be answered in")
    p.add_argument("--hang-s", type=float, default=60.0, help="an isready unanswered this long ends the run")
    args = p.parse_args()

    engine = Engine(args.model)
    if engine.isready(args.hang_s) is None:
        print("the engine never answered its first isready")
        return 1
    rng = random.Random(args.seed + 1)  # the pauses, apart from the lines
    waits: list[tuple[float, int]] = []
    before: dict[int, list[str]] = {}  # the lines sent since the last isready, for the slowest ones
    recent: list[str] = []
    gos = 0
    start = time.monotonic()
    for number, line in enumerate(fuzz_lines(args.seed, args.lines), start=1):
        if engine.proc.poll() is not None:
            print(f"the engine ended at line {number} (status {engine.proc.returncode})")
            return 1
        if line == "isready":
            took = engine.isready(args.hang_s)
            if took is None:
                print(f"no readyok within {args.hang_s} s at line {number}")
                engine.proc.kill()
                return 1
            waits.append((took, number))
            before[number], recent = recent[-6:], []
            continue
        recent.append(line)
        gos += line.startswith("go") and line.split()[0] == "go"
        engine.send(line)
        pause = rng.random()  # one line in a hundred, a longer pause: a search runs on for a while
        time.sleep(pause * args.pause_ms / 1000.0 if pause < 0.99 else 0.05 + pause * 0.15)
    engine.send("stop")
    final = engine.isready(args.hang_s)
    deadline = time.monotonic() + 5.0
    while engine.answers < gos and time.monotonic() < deadline:
        time.sleep(0.01)
    quit_sent = time.monotonic()
    engine.send("quit")
    try:
        engine.proc.wait(timeout=30)
        quit_s = time.monotonic() - quit_sent
    except subprocess.TimeoutExpired:
        engine.proc.kill()
        quit_s = None
    elapsed = time.monotonic() - start
    times = sorted(t for t, _ in waits)
    worst, worst_line = max(waits) if waits else (0.0, 0)
    print(f"lines {args.lines}  seed {args.seed}  seconds {elapsed:.1f}")
    print(f"isready {len(waits)}  median {1000 * statistics.median(times):.1f} ms  "
          f"p99 {1000 * times[int(0.99 * (len(times) - 1))]:.1f} ms  worst {1000 * worst:.1f} ms (line {worst_line})  "
          f"over {args.ready_limit} s: {sum(t > args.ready_limit for t in times)}")
    for took, number in sorted(waits, reverse=True)[:3]:
        print(f"  {1000 * took:.0f} ms at line {number}, after: {' | '.join(text[:60] for text in before[number])}")
    print(f"go {gos}  answers {engine.answers}  quit {'never' if quit_s is None else f'{quit_s:.2f} s'}")
    failures = []
    if worst > args.ready_limit or final is None:
        failures.append(f"an isready took over {args.ready_limit} s")
    if engine.answers != gos:
        failures.append(f"{gos} go, {engine.answers} bestmove/checkmate")
    if quit_s is None or quit_s > max(args.ready_limit, 1.0):
        failures.append("quit did not end the engine at once")
    if engine.bad_lines:
        failures.append(f"{len(engine.bad_lines)} lines that are not USI, e.g. {engine.bad_lines[:3]}")
    print("all isready answered; every go answered once; quit obeyed" if not failures else
          "FAILED: " + "; ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
