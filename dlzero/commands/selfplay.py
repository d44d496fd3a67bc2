"""`dlzero selfplay`: play self-play games with the run's best model and write hcpe3 shards.

A new run directory is created from the resolved config (with a random generation-0 model as the
first best); an existing one is opened and its stored config.yaml is the base that `--set` and the
flags override, so a run keeps its settings however it is resumed.

Self-play takes no run lock while it plays (see `dlzero.runlock`): any number of self-play commands,
their worker processes and Ray actors may write one run, each shard under a name of its own. It
holds the trainer's and the gate's locks only while it writes generation 0 of a new run, which is
theirs to write; another self-play started on the same new run meanwhile waits for that generation 0
(`selfplay.first_model_wait_s`) rather than stopping.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from dlzero.commands.common import add_config_args, add_inference_args, run_from_args

if TYPE_CHECKING:
    from dlzero.config import Config
    from dlzero.rundir import RunDir

FIRST_MODEL_POLL_S = 0.5  # how often a self-play waiting for another command's generation 0 looks again

SELFPLAY_KEYS = {"games_in_parallel": "selfplay.games_in_parallel", "workers": "selfplay.workers",
                 "ray": "selfplay.ray", "max_restarts": "selfplay.max_restarts", "server": "server.enabled"}


def register(sub) -> None:
    p = sub.add_parser("selfplay", help="play self-play games with the run's best model, write hcpe3 shards")
    add_config_args(p)
    add_inference_args(p)
    p.add_argument("--run", required=True, metavar="DIR", help="run directory (created if it does not exist)")
    p.add_argument("--games", type=int, help="total games (default: selfplay.games_per_generation)")
    p.add_argument("--workers", type=int, help="worker processes (selfplay.workers)")
    p.add_argument("--parallel", dest="games_in_parallel", type=int, metavar="G",
                   help="games each worker plays in lockstep (selfplay.games_in_parallel)")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="place workers on a Ray cluster: local, auto, or an address (selfplay.ray); "
                        "needs pip install 'dlzero[cluster]'")
    p.add_argument("--max-restarts", type=int, help="restarts of a dead worker (selfplay.max_restarts)")
    p.add_argument("--server", action="store_true", default=None,
                   help="workers evaluate through one inference server per GPU (server.enabled)")
    p.add_argument("--seed", type=int, default=None, help="random seed (weights of a new run, game choices)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-worker lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rd, cfg = run_from_args(args, SELFPLAY_KEYS, "dlzero selfplay")
    games = args.games if args.games is not None else cfg.selfplay.games_per_generation
    from dlzero.selfplay.parent import server_lines
    from dlzero.selfplay.session import run_selfplay

    if rd.best() is None:  # a new run: generation 0 and best.json belong to the trainer's and the gate's parts
        _first_model(rd, cfg, args.seed)
    from dlzero.engine.int8_gate import prepare_searched_int8

    prepare_searched_int8(rd.best_model_path(), cfg)  # once here, not in every worker
    s = run_selfplay(rd, cfg, games, cfg.selfplay.workers, progress=not args.quiet, seed=args.seed)
    split = f"black {s.black_wins}, white {s.white_wins}, draw {s.draws}"
    print(f"{s.games} games, {s.positions:,} positions ({s.targets:,} with visit counts) "
          f"in {s.seconds:.1f} s "
          f"({s.games_per_hour:,.0f} games/h); {split}; {len(s.shards)} shards; "
          f"resign threshold {s.resign_threshold:.4f}"
          f"{f'; {s.restarts} worker restarts' if s.restarts else ''}", file=sys.stderr)
    for line in server_lines(s):
        print(line, file=sys.stderr)
    if s.failed_workers:
        print(f"dlzero selfplay: workers {s.failed_workers} failed", file=sys.stderr)
        return 1
    return 0


def _first_model(rd: RunDir, cfg: Config, seed: int | None) -> None:
    """Write generation 0 of a new run under the trainer's and the gate's locks; while another command holds
    them (a second `dlzero selfplay` started on the same new run, say on another machine), wait for the
    best.json it writes, up to `selfplay.first_model_wait_s`, instead of failing at once."""
    from dlzero.runlock import RunLockedError, hold
    from dlzero.selfplay.bootstrap import ensure_best_model

    deadline = time.monotonic() + cfg.selfplay.first_model_wait_s
    told = False
    while rd.best() is None:
        try:
            with hold(rd.root, ("train", "gate")):
                ensure_best_model(rd, cfg, seed)
            return
        except RunLockedError as exc:
            if time.monotonic() >= deadline:
                raise RunLockedError(f"no generation 0 after waiting {cfg.selfplay.first_model_wait_s:g} s "
                                     f"(selfplay.first_model_wait_s): {exc}") from None
            if not told:
                print(f"dlzero selfplay: {rd.root} has no generation 0 yet and another command holds its train "
                      f"and gate locks (it is probably writing it); waiting up to "
                      f"{cfg.selfplay.first_model_wait_s:g} s for models/best.json", file=sys.stderr)
                told = True
            time.sleep(FIRST_MODEL_POLL_S)
