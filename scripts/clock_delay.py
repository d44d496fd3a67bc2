"""The delay a USI client adds between an engine writing `bestmove` and the client reading it (not a test).

    python scripts/clock_delay.py [--moves 200] [--think-ms 50]

A stand-in engine (a few lines of Python, started as a subprocess as any engine is) answers each `go`
after `--think-ms`, and just before it writes its `bestmove` line it writes `info string sent T` with
T its CLOCK_MONOTONIC in nanoseconds (system-wide on Linux, so the two processes read the same clock).
Each client below reads T and stamps the moment the `bestmove` line reaches it; the difference is the
time the pipe and the client took, the part of a move's time that the engine cannot see:

- dlzero's own client (`dlzero.play.usi_client.UsiClient`: a reader thread, a queue, the caller);
- cshogi's `cshogi.usi.Engine` (reads the pipe in the caller's thread), which cshogi.cli's matches use.

Prints the CPU's flags, the load average, and each client's median, 95th percentile and largest delay
in milliseconds. GUIs and floodgate add a network on top (docs/usi-options.md, "ByoyomiMargin").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cshogi.usi  # noqa: E402

from dlzero.cpu import cpu_flags  # noqa: E402
from dlzero.play.usi_client import UsiClient  # noqa: E402

STAND_IN = '''import sys, time
for line in sys.stdin:
    word = line.split()[0] if line.split() else ""
    if word == "usi":
        print("id name clock-delay stand-in")
        print("usiok", flush=True)
    elif word == "isready":
        print("readyok", flush=True)
    elif word == "go":
        time.sleep({think} / 1000)
        sys.stdout.write(f"info string sent {{time.monotonic_ns()}}\\nbestmove 7g7f\\n")
        sys.stdout.flush()
    elif word == "quit":
        break
'''


def _sent_ns(lines: list[str]) -> int:
    return int(next(x for x in lines if x.startswith("info string sent")).split()[-1])


def dlzero_client(argv: list[str], moves: int) -> list[float]:
    """Delays in ms through `UsiClient.search`: the `bestmove` line's arrival as the caller sees it."""
    out = []
    with UsiClient(argv, name="stand-in") as engine:
        for _ in range(moves):
            infos, _ = engine.search("startpos", "btime 0 wtime 0 byoyomi 1000")
            read = time.monotonic_ns()
            out.append((read - _sent_ns(infos)) / 1e6)
    return out


def cshogi_client(argv: list[str], moves: int) -> list[float]:
    """Delays in ms through `cshogi.usi.Engine.go`, stamped by its listener as each line is read."""
    engine = cshogi.usi.Engine(argv[-1])
    out = []
    seen: dict[str, int] = {}

    def listener(line: str) -> None:
        if line.startswith("info string sent"):
            seen["sent"] = int(line.split()[-1])
        elif line.startswith("bestmove"):
            seen["read"] = time.monotonic_ns()

    engine.isready()
    for _ in range(moves):
        engine.position()
        engine.go(btime=0, wtime=0, byoyomi=1000, listener=listener)
        out.append((seen["read"] - seen["sent"]) / 1e6)
    engine.quit()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=200, help="moves timed per client")
    ap.add_argument("--think-ms", type=int, default=50, help="how long the stand-in thinks before answering")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "stand_in.py"
        script.write_text(f"#!{sys.executable}\n" + STAND_IN.format(think=args.think_ms))
        script.chmod(0o755)
        argv = [str(script)]
        print(f"cpu: {cpu_flags()}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for name, measure in (("dlzero UsiClient", dlzero_client), ("cshogi.usi.Engine", cshogi_client)):
            delays = sorted(measure(argv, args.moves))
            p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
            print(f"{name}: {len(delays)} moves, delay median {statistics.median(delays):.2f} ms, "
                  f"95th {p95:.2f} ms, max {delays[-1]:.2f} ms")


if __name__ == "__main__":
    main()
