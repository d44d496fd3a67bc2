"""USI memory benchmark (not a test): how much the engine's memory grows per search-tree node.

    python scripts/usi_memory.py --model m.pt --hash 256 --seconds 30

Starts `python -m dlzero.usi` as a GUI would, sets USI_Hash, sends `go infinite` from the start
position (or --position) and samples the process's resident memory (VmRSS) against the node count
of its `info` lines. Prints bytes per node (RSS growth / nodes) and the engine's own estimate
(`info string` when the hash budget is reached). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import threading
import time


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--hash", type=int, default=256, help="USI_Hash in MiB")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--position", default="startpos")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    proc = subprocess.Popen([sys.executable, "-m", "dlzero.usi", "--model", args.model, "--threads",
                             str(args.threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x.strip()) for x in proc.stdout], daemon=True).start()

    def send(cmd: str) -> None:
        proc.stdin.write(cmd + "\n")
        proc.stdin.flush()

    def wait_for(word: str) -> None:
        while lines.get(timeout=120) != word:
            pass

    send("usi")
    wait_for("usiok")
    send(f"setoption name USI_Hash value {args.hash}")
    send("setoption name PVInterval value 250")
    send("isready")
    wait_for("readyok")
    send(f"position {args.position}")
    base = rss_bytes(proc.pid)
    send("go infinite")
    nodes, full_note = 0, ""
    samples: list[tuple[int, int]] = []  # (nodes, RSS) at each info line
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if " nodes " in line:
            nodes = int(line.split(" nodes ")[1].split()[0])
            samples.append((nodes, rss_bytes(proc.pid)))
        elif "memory budget" in line or "node limit" in line:
            full_note = line
    grown = rss_bytes(proc.pid) - base
    send("stop")
    send("quit")
    proc.wait(timeout=60)
    print(f"hash {args.hash} MiB, {args.seconds:.0f} s: {nodes:,} nodes, RSS +{grown / 2**20:.1f} MiB "
          f"({grown / max(nodes, 1):,.0f} bytes/node including fixed costs)")
    growing = [s for s in samples if s[0] < nodes]  # before the tree stopped growing
    if len(growing) >= 4:  # the marginal cost: RSS slope over the second half of the growth
        (n0, r0), (n1, r1) = growing[len(growing) // 2], growing[-1]
        if n1 > n0:
            print(f"marginal: {(r1 - r0) / (n1 - n0):,.0f} bytes/node between {n0:,} and {n1:,} nodes")
    print(full_note or "the tree did not reach its budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
