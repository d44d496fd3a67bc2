"""Playouts a move at a fixed time (not a test): the engine as a GUI runs it, one checkout or two side by side.

    python scripts/playouts_per_move.py [--model M] [--byoyomi 1000] [--positions 12] [--rounds 2] \
        [--before /tmp/dlzero-before-REV] [--networks STAGING]

Starts `python -m dlzero.usi` (this checkout's, and with --before another checkout's, each with its own
.venv when it has one) with Threads 1 and EvalStreams 1 (one core, as the equal-time matches play), sends
`go byoyomi B` from the end positions of the first `--positions` lines of the rating suite, and reads the
`nodes` of the last `info` line before each `bestmove`. Every round runs each side once, alternating which
goes first (this machine's speed drifts from one minute to the next: only figures of the same rounds
compare). Prints the CPU's vector flags, each side's mean playouts a move, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.cpu import cpu_flags  # noqa: E402
from dlzero.play.openings import load_openings  # noqa: E402


def python_of(checkout: Path) -> str:
    """The checkout's own interpreter (its .venv), else this one."""
    venv = checkout / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def playouts(checkout: Path, model: str | None, lines: list[str], byoyomi: int,
             networks: Path | None = None) -> list[int]:
    """The nodes of each search, one `go byoyomi` a position, in one engine process (`networks`: its
    DLZERO_NETWORKS_DIR, else the checkout's shipped networks)."""
    cmd = [python_of(checkout), "-m", "dlzero.usi", "--threads", "1"] + (["--model", model] if model else [])
    env = {k: v for k, v in os.environ.items() if k != "DLZERO_NETWORKS_DIR"}
    if networks is not None:
        env["DLZERO_NETWORKS_DIR"] = str(networks.resolve())
    proc = subprocess.Popen(cmd, cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1, env=env)

    def send(line: str) -> None:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    def until(prefix: str) -> list[str]:
        seen = []
        for line in proc.stdout:
            seen.append(line.strip())
            if line.startswith(prefix):
                return seen
        raise RuntimeError(f"{checkout}: the engine ended before '{prefix}'")

    out = []
    try:
        send("usi")
        until("usiok")
        send("setoption name EvalStreams value 1")
        send("isready")
        until("readyok")
        for moves in lines:  # each `startpos moves ...` or `sfen ...`
            send(f"position {moves}")
            send(f"go byoyomi {byoyomi}")
            info = [x for x in until("bestmove") if x.startswith("info") and " nodes " in x]
            out.append(int(info[-1].split(" nodes ")[1].split()[0]) if info else 0)
    finally:
        send("quit")
        proc.wait(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="network file (default: the shipped network, as each side picks it)")
    ap.add_argument("--byoyomi", type=int, default=1000)
    ap.add_argument("--positions", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", type=Path, help="another checkout to run beside this one")
    ap.add_argument("--networks", type=Path, help="this checkout's DLZERO_NETWORKS_DIR (e.g. a staging manifest "
                    "with an int8 file); the other side plays its own shipped networks")
    args = ap.parse_args()
    lines = load_openings(ROOT / "configs" / "openings" / "rating.txt")[: args.positions]
    sides = [("after", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    got: dict[str, list[int]] = {name: [] for name, _ in sides}
    print(f"cpu: {cpu_flags()}; byoyomi {args.byoyomi} ms, Threads 1, EvalStreams 1, {len(lines)} positions")
    for r in range(args.rounds):
        for name, checkout in (sides if r % 2 == 0 else sides[::-1]):
            nodes = playouts(checkout, args.model, lines, args.byoyomi, args.networks if name == "after" else None)
            got[name] += nodes
            print(f"round {r + 1} {name}: mean {statistics.mean(nodes):,.0f} playouts a move ({checkout})", flush=True)
    for name, nodes in got.items():
        print(f"{name}: mean {statistics.mean(nodes):,.0f}, median {statistics.median(nodes):,.0f} over {len(nodes)}")
    if args.before:
        print(f"after / before: {statistics.mean(got['after']) / statistics.mean(got['before']):.2f}")


if __name__ == "__main__":
    main()
