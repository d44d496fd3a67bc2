"""CPU seconds used on this machine, split by what each process is pinned to (not a test; for benchmarks).

    python scripts/cpu_by_core.py runs/cpu.csv &      # one line every 10 s: seconds, cpu0, cpu1, other

Two benchmark arms pinned to one core each (`taskset`/`--cpus`) and everything else (unpinned) land in
three columns: how much CPU each arm really got, and how much other work took from them. Each process's
user + system time is read from /proc/PID/stat every 10 s; a process that ends between two readings loses
its last interval (at most 10 s of it). The first line holds the start time (UTC, ISO 8601).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time


def main() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    last: dict[int, float] = {}
    total = {"cpu0": 0.0, "cpu1": 0.0, "other": 0.0}
    t0 = time.time()
    with open(sys.argv[1], "a", encoding="utf-8") as out:
        out.write(f"# start {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}\n")
        out.write("seconds,cpu0,cpu1,other\n")
        while True:
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    used = (int(fields[11]) + int(fields[12])) / tick
                    cores = os.sched_getaffinity(int(entry))
                except (OSError, ValueError, IndexError):  # gone between listing and reading
                    continue
                key = "cpu0" if cores == {0} else "cpu1" if cores == {1} else "other"
                before = last.get(int(entry))
                last[int(entry)] = used
                if before is not None and used >= before:
                    total[key] += used - before
            out.write(f"{time.time() - t0:.0f},{total['cpu0']:.1f},{total['cpu1']:.1f},{total['other']:.1f}\n")
            out.flush()
            time.sleep(10)


if __name__ == "__main__":
    main()
