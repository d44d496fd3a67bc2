"""The tree's own cost in CPU time (not a test): one checkout or two side by side, on a machine others share.

    python scripts/tree_cpu_time.py [--before /tmp/dlzero-before-REV] [--playouts 20000] [--rounds 2]

One tree from a mid-game position, the null network (uniform priors, value 0: what is left is the tree),
`leaves_per_tree` 32, `--playouts` simulations, timed with the process's CPU clock rather than the wall clock:
on a machine running other jobs the wall clock counts the time the search waited for a core, the CPU clock
only the time it ran (it still counts the cache and memory bandwidth it shares). Each measurement is the best
of five searches in one process; every round runs each checkout once, alternating which goes first, in a
process of its own (`--before`: that checkout's code on PYTHONPATH, its compiled modules built there). Prints
the CPU's vector flags, each side's microseconds of CPU a simulation per round, and the ratio of the means.
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

# Run in a fresh interpreter with the checkout first on sys.path; prints microseconds of CPU a simulation.
_PROBE = """
import sys, time
import cshogi
from dlzero.config import load_config
from dlzero.inference import NullEvaluator
from dlzero.search import Search, Tree
playouts = int(sys.argv[1])
search = Search(NullEvaluator(), load_config(None).search)
board = cshogi.Board("ln1g1g1nl/1ks2r3/1ppppsbpp/p4pp2/9/P1P1P1P1P/1P1PSP3/1BK1GS1R1/LN1G3NL b - 21")
best = float("inf")
for _ in range(5):
    tree = Tree(board)
    t0 = time.process_time()
    search.run([tree], playouts, leaves_per_tree=32)
    best = min(best, time.process_time() - t0)
print(best / playouts * 1e6)
"""


def cpu_us_per_simulation(checkout: Path, playouts: int) -> float:
    """The best of five searches' CPU microseconds a simulation, `checkout`'s code in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _PROBE, str(playouts)], cwd=checkout, env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="another checkout (its compiled modules built) to compare with")
    p.add_argument("--playouts", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    sides = {"this": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    print(f"cpu flags: {cpu_flags()}")
    got: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
        for name, checkout in order:
            got[name].append(cpu_us_per_simulation(checkout, args.playouts))
        print(f"round {r + 1}: " + ", ".join(f"{name} {got[name][-1]:.2f} us" for name in sides), flush=True)
    means = {name: statistics.mean(v) for name, v in got.items()}
    for name, m in means.items():
        print(f"{name}: {m:.2f} us of CPU a simulation ({1e6 / m:,.0f} simulations a CPU-second)")
    if args.before:
        print(f"before / this: {means['before'] / means['this']:.3f}")


if __name__ == "__main__":
    main()
