"""Learning benchmark (not a test): run the tiny loop for a fixed time, then measure the best model.

    python scripts/learning_benchmark.py --minutes 60 --run runs/learning

1. `dlzero loop --config tiny` runs for `--minutes` (interrupted with SIGINT at the deadline; the
   loop is resumable, so rerunning continues the same run);
2. the run's best model plays generation 0 and a uniformly random mover, `--games` games each,
   alternating colours, fixed playouts, no noise;
3. prints win rates, Elo with a 95 % interval, and the path of the Elo/loss curve (progress.png).

Target (issue: training, gating and the loop): after one hour on a 2-core CPU the best model wins
>= 90 % against generation 0 and 100 % against the random mover over >= 40 games each.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_loop(run: Path, minutes: float, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "dlzero.cli", "loop", "--config", "tiny", "--run", str(run), "--quiet", *extra]
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + minutes * 60.0
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(1.0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()


def measure(run: Path, games: int, playouts: int) -> None:
    from dlzero.config import InferenceConfig
    from dlzero.gating.arena import RANDOM, play_match
    from dlzero.inference import load_model
    from dlzero.rundir import RunDir, generation_name
    from selfplay.plots import plot_progress

    rd = RunDir.open(run)
    cfg = rd.config()
    inference = InferenceConfig(backend="onnx", threads=2)
    best = rd.best()
    best_ev = load_model(rd.best_model_path(), inference)
    gen0 = load_model(rd.model_path(0), inference)
    print(f"best model: generation {best.generation} ({best.model})")
    for name, opponent in (("generation 0", gen0), ("random mover", RANDOM)):
        result = play_match(best_ev, opponent, games, cfg, playouts=playouts, parallel=min(games, 20),
                            names=(generation_name(best.generation), name))
        elo, low, high = result.elo()
        print(f"vs {name}: {result.wins}-{result.draws}-{result.losses} "
              f"(win rate {result.wins / max(1, games):.1%}, score {result.score:.3f}), "
              f"Elo {elo:+.0f} [{low:+.0f}, {high:+.0f}]", flush=True)
    print(f"curve: {plot_progress(rd)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="runs/learning", help="run directory (resumed if present)")
    parser.add_argument("--minutes", type=float, default=60.0, help="loop time budget (0: only measure)")
    parser.add_argument("--games", type=int, default=40, help="games against each opponent")
    parser.add_argument("--playouts", type=int, default=64, help="playouts per move in the matches")
    args, extra = parser.parse_known_args()
    if args.minutes > 0:
        run_loop(Path(args.run), args.minutes, extra)
    measure(Path(args.run), args.games, args.playouts)


if __name__ == "__main__":
    main()
