#!/usr/bin/env python
"""The worst move time of `dlzero usi` at a byoyomi, with each USI option at each end of its advertised range
(issue 52: MateGuardNodes 10^7 took 26 s a move at byoyomi 1000, Threads 256 4-6 s, BatchSize 4096 7 s).

    python scripts/byoyomi_extremes.py --byoyomi 1000 --moves 2 [--only BatchSize,Threads] [--model FILE]

For each setting a fresh engine (in this process, as `dlzero usi` runs it, on the default network unless
--model says otherwise) takes `isready`, then plays `--moves` moves of a game from the start against itself,
each `go btime 0 wtime 0 byoyomi B`; the time is from `go` to its `bestmove` line. Options that pick the
network or how it is loaded (ModelPath, Backend, Device, Precision) and the ones with no bearing on a search
(USI_Ponder, Clear Hash) are left out; aliases set the same keys as the options listed. The machine, its
load and the CPU flags are printed first: the figures mean little without them.
"""

from __future__ import annotations

import argparse
import io
import os
import threading
import time
from pathlib import Path

from dlzero.config import Config
from dlzero.usi import UsiEngine
from dlzero.usi.options import OPTIONS

SKIPPED = {"ModelPath", "Backend", "Device", "Precision", "USI_Ponder", "Clear Hash"}


class _Clock:
    """A stdout stand-in for the engine that notes when each `bestmove` line is written."""

    def __init__(self) -> None:
        self.answered = threading.Event()
        self.line = ""
        self.at = 0.0

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.startswith("bestmove"):
                self.line, self.at = line, time.monotonic()
                self.answered.set()

    def flush(self) -> None:
        pass


def settings() -> list[str]:
    """`name value` for each option at each end of its range (each choice of a combo), the defaults first."""
    out = ["(defaults)"]
    for opt in OPTIONS:
        if opt.name in SKIPPED:
            continue
        if opt.kind == "spin":
            out += [f"{opt.name} value {opt.lo}", f"{opt.name} value {opt.hi}"]
        elif opt.kind == "check":
            out += [f"{opt.name} value true", f"{opt.name} value false"]
        elif opt.kind == "combo":
            out += [f"{opt.name} value {choice}" for choice in opt.choices]
    return out


def move_times(setting: str, model: str | None, moves: int, byoyomi: int) -> list[float]:
    """Seconds from `go` to `bestmove` for each move of a self-played game under `setting`."""
    clock = _Clock()
    engine = UsiEngine(Config(), model, clock)
    if setting != "(defaults)":
        engine.handle(f"setoption name {setting}")
    engine.handle("isready")
    played: list[str] = []
    times = []
    for _ in range(moves):
        engine.handle("position startpos" + (" moves " + " ".join(played) if played else ""))
        clock.answered.clear()
        sent = time.monotonic()
        engine.handle(f"go btime 0 wtime 0 byoyomi {byoyomi}")
        if not clock.answered.wait(120):
            times.append(float("inf"))
            break
        times.append(clock.at - sent)
        move = clock.line.split()[1]
        if move in ("resign", "win"):
            break
        played.append(move)
    engine.run(io.StringIO("quit\n"))  # ends the search and the mate helper process
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--byoyomi", type=int, default=1000)
    p.add_argument("--moves", type=int, default=2, help="moves timed for each setting")
    p.add_argument("--model", help="network file (default: the shipped network, as `dlzero usi` plays)")
    p.add_argument("--only", help="comma-separated option names to try (default: all)")
    args = p.parse_args()
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = sorted(set(cpuinfo.split()) & {"avx2", "avx512_vnni"})
    print(f"cores {os.cpu_count()}  load {' '.join(f'{x:.1f}' for x in os.getloadavg())}  flags {' '.join(flags)}")
    wanted = set(args.only.split(",")) if args.only else None
    worst_all = (0.0, "")
    print(f"{'setting':<36} {'worst ms':>9}  moves ms")
    for setting in settings():
        if wanted is not None and setting.split()[0] not in wanted and setting != "(defaults)":
            continue
        times = move_times(setting, args.model, args.moves, args.byoyomi)
        worst = max(times)
        worst_all = max(worst_all, (worst, setting))
        print(f"{setting:<36} {1000 * worst:>9.0f}  {' '.join(f'{1000 * t:.0f}' for t in times)}", flush=True)
    print(f"worst over every setting: {1000 * worst_all[0]:.0f} ms ({worst_all[1]}) at byoyomi {args.byoyomi}")


if __name__ == "__main__":
    main()
