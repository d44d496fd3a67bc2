"""Learning benchmark (not a test): run the tiny loop for a fixed time, then rate it on the anchored scale.

    python scripts/learning_benchmark.py --minutes 60 --run runs/learning --out docs/benchmarks/learning-tiny-1h

1. `dlzero loop --config tiny` runs for `--minutes` (interrupted with SIGINT at the deadline; the
   loop is resumable, so rerunning continues the same run). Extra arguments go to the loop.
2. `dlzero rate`: the run's promoted models (at most `--sample`, evenly spread) play the anchor pool
   (`rate.anchors` of the run's config: random mover = 0, alpha-beta rungs, generation 0), `--games`
   games per pairing at `--playouts`; one maximum-likelihood fit over all games (they accumulate in
   runs/NAME/rating/, so a rerun only adds what is missing).
3. writes OUT-anchored.csv (the run's metrics/elo.csv: player, generation, elo, elo_low, elo_high,
   games, anchor, wall_seconds, relative_to, prior_draws, wins, draws, losses) and OUT-anchored.png
   (Elo against minutes since generation 0, with 95 % intervals, on the scale most models are connected
   to), and prints the rating table: every pairing's W-D-L and score first, then the Elo of each group
   connected by informative pairings, named by its prior and its zero (`dlzero.gating.elo_fit`).

Earlier target (issue: training, gating and the loop): after one hour on a 2-core CPU the best model
wins >= 90 % against generation 0 and 100 % against the random mover. The anchored curve says how far
above those floors it is, in units that mean the same in every run (the alpha-beta rungs never change).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_loop(run: Path, minutes: float, extra: list[str], cwd: Path | None = None,
             python: str = sys.executable) -> int | None:
    """`dlzero loop --config tiny` for `minutes` (SIGINT at the deadline); its exit status. `cwd`: the
    folder it runs in, whose dlzero package `python -m` imports first (another checkout, for a before/after);
    `python`: the interpreter (another checkout's own virtual environment)."""
    cmd = [python, "-m", "dlzero.cli", "loop", "--config", "tiny", "--run", str(run.resolve()), "--quiet",
           *extra]
    # SIGINT back to its default in the child: a script started in the background (`cmd &`) inherits
    # SIGINT ignored, and Python then never turns it into KeyboardInterrupt, so the loop would not stop
    proc = subprocess.Popen(cmd, cwd=cwd, preexec_fn=_default_sigint if os.name == "posix" else None)
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
    return proc.poll()


def measure(run: Path, out: Path, games: int | None, playouts: int | None, sample: int | None,
            threads: int) -> None:
    from dlzero.gating.elo_fit import report_lines
    from dlzero.gating.rating import rate, select_generations
    from dlzero.progress.plots import plot_anchored_curve, plot_progress
    from dlzero.rundir import RunDir

    rd = RunDir.open(run)
    cfg = rd.config()
    cfg.rate.games = games or cfg.rate.games
    cfg.rate.playouts = playouts or cfg.rate.playouts
    cfg.rate.sample = cfg.rate.sample if sample is None else sample
    cfg.inference.threads = threads
    gens = select_generations(rd, cfg)
    print(f"rating generations {gens} against {cfg.rate.anchors}: {cfg.rate.games} games per pairing, "
          f"{cfg.rate.playouts} playouts", flush=True)
    t0 = time.perf_counter()
    report = rate(rd, cfg, gens)
    for line in report.problems:
        print(f"warning: {line}")
    print(f"{report.played} games in {time.perf_counter() - t0:.0f} s")
    if report.ratings is None:
        print("no ratings")
        return
    print("\n".join(report_lines(report.ratings)))
    csv_out = out.with_name(out.name + "-anchored.csv")
    csv_out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(rd.elo_csv, csv_out)
    png = plot_anchored_curve(csv_out, out.with_name(out.name + "-anchored.png"),
                              f"{run.name}: Elo against time")
    print(f"anchored curve: {png}, {csv_out}; progress plot: {plot_progress(rd)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="runs/learning", help="run directory (resumed if present)")
    parser.add_argument("--minutes", type=float, default=60.0, help="loop time budget (0: only rate)")
    parser.add_argument("--out", default="docs/benchmarks/learning-tiny-1h",
                        help="prefix of the CSV and PNG written (OUT-anchored.csv, OUT-anchored.png)")
    parser.add_argument("--games", type=int, help="games per pairing, even (default: the run's rate.games)")
    parser.add_argument("--playouts", type=int, help="playouts per move of the models (default: rate.playouts)")
    parser.add_argument("--sample", type=int, help="rate at most this many promoted models, 0: all "
                        "(default: rate.sample)")
    parser.add_argument("--threads", type=int, default=2, help="inference threads while rating")
    args, extra = parser.parse_known_args()
    if args.minutes > 0:
        run_loop(Path(args.run), args.minutes, extra)
    measure(Path(args.run), Path(args.out), args.games, args.playouts, args.sample, args.threads)


if __name__ == "__main__":
    main()
