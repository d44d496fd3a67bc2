"""USI memory benchmark (not a test): how much the engine's memory grows per search-tree node.

    python scripts/usi_memory.py [--model m.pt] --hash 256 --seconds 30 [--warmup-nodes 256]

Starts `python -m dlzero.usi` as a GUI would (the shipped network without --model), sets USI_Hash, sends
`go infinite` from the start position (or --position) and samples the process's resident memory (VmRSS)
against the node count of its `info` lines. Prints the growth, bytes per node (RSS growth / nodes) and the
growth over USI_Hash, and the engine's note when the tree reached its budget. With --warmup-nodes a
`go nodes N` first pays the costs that do not grow with the tree (the network's working set at the full
batch, the batch buffers), and a second line gives the growth after it. Linux only (/proc).
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
    ap.add_argument("--model", help=".pt or .onnx (default: the shipped network, as the engine picks it)")
    ap.add_argument("--hash", type=int, default=256, help="USI_Hash in MiB")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--position", default="startpos")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup-nodes", type=int, default=0,
                    help="a `go nodes N` before the measured `go infinite` (same position, so its tree is reused)")
    args = ap.parse_args()
    model = ["--model", args.model] if args.model else []
    proc = subprocess.Popen([sys.executable, "-m", "dlzero.usi", *model, "--threads", str(args.threads)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x.strip()) for x in proc.stdout], daemon=True).start()

    def send(cmd: str) -> None:
        proc.stdin.write(cmd + "\n")
        proc.stdin.flush()

    def nodes_of(line: str) -> int | None:
        return int(line.split(" nodes ")[1].split()[0]) if " nodes " in line else None

    def wait_for(word: str) -> int:
        """Read up to a line starting with `word`; the last node count seen on the way."""
        seen = 0
        while not (line := lines.get(timeout=120)).startswith(word):
            seen = nodes_of(line) or seen
        return seen

    send("usi")
    wait_for("usiok")
    send(f"setoption name USI_Hash value {args.hash}")
    send("setoption name PVInterval value 250")
    send("isready")
    wait_for("readyok")
    send(f"position {args.position}")
    base = rss_bytes(proc.pid)
    warm_rss, warm_nodes = base, 0
    if args.warmup_nodes:
        send(f"go nodes {args.warmup_nodes}")
        warm_nodes = wait_for("bestmove")
        send(f"position {args.position}")
        send("isready")
        wait_for("readyok")
        warm_rss = rss_bytes(proc.pid)
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
            nodes = nodes_of(line)
            samples.append((nodes, rss_bytes(proc.pid)))
        elif "memory budget" in line or "node limit" in line:
            full_note = line
    end_rss = rss_bytes(proc.pid)
    grown = end_rss - base
    send("stop")
    send("quit")
    proc.wait(timeout=60)
    print(f"hash {args.hash} MiB, {args.seconds:.0f} s: {nodes:,} nodes, RSS +{grown / 2**20:.1f} MiB "
          f"({grown / max(nodes, 1):,.0f} bytes/node including fixed costs; {grown / (args.hash << 20):.2f}x USI_Hash)")
    if args.warmup_nodes:
        # the warm-up's tree stays (same position): the nodes after it fill the rest of the hash
        after, share = end_rss - warm_rss, (args.hash << 20) * (nodes - warm_nodes) / max(nodes, 1)
        print(f"after the warm-up (go nodes {args.warmup_nodes}: {warm_nodes:,} nodes, "
              f"RSS +{(warm_rss - base) / 2**20:.1f} MiB): RSS +{after / 2**20:.1f} MiB "
              f"for {nodes - warm_nodes:,} nodes ({after / max(nodes - warm_nodes, 1):,.0f} bytes/node; "
              f"{after / max(share, 1):.2f}x their share of USI_Hash)")
    growing = [s for s in samples if s[0] < nodes]  # before the tree stopped growing
    if len(growing) >= 4:  # the marginal cost: RSS slope over the second half of the growth
        (n0, r0), (n1, r1) = growing[len(growing) // 2], growing[-1]
        if n1 > n0:
            print(f"marginal: {(r1 - r0) / (n1 - n0):,.0f} bytes/node between {n0:,} and {n1:,} nodes")
    print(full_note or "the tree did not reach its budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
