"""`dlzero loop`: the one-command learning loop (self-play -> train -> gate -> promote)."""

from __future__ import annotations

import argparse

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args, run_from_args

FLAGS = {
    "games": "selfplay.games_per_generation",
    "workers": "selfplay.workers",
    "parallel": "selfplay.games_in_parallel",
    "steps": "train.steps_per_generation",
    "reuse": "train.reuse",
    "mode": "loop.mode",
    "gate_games": "gate.max_games",
    "rate": "rate.loop",
    "teacher_fraction": "train.teacher_fraction",
    "relabel": "train.relabel",
}


def register(sub) -> None:
    p = sub.add_parser("loop", help="run self-play -> train -> gate -> promote, generation after generation")
    add_config_args(p)
    add_inference_args(p)
    p.add_argument("--run", required=True, help="run directory (created if missing, resumed if present)")
    p.add_argument("--generations", type=int, default=1_000_000,
                   help="iterations to run now (default: until interrupted; Ctrl-C and rerun to resume)")
    p.add_argument("--games", type=int, help="self-play games per iteration (selfplay.games_per_generation)")
    p.add_argument("--workers", type=int, help="self-play processes (selfplay.workers)")
    p.add_argument("--parallel", type=int, help="games per worker in lockstep (selfplay.games_in_parallel)")
    p.add_argument("--steps", type=int, help="most training steps per iteration, or the fixed count with "
                   "--reuse 0 (train.steps_per_generation)")
    p.add_argument("--reuse", type=float, help="samples per new training position; sets the steps of each "
                   "iteration (train.reuse)")
    p.add_argument("--mode", choices=["sequential", "async"],
                   help="sequential phases, or self-play that never stops with training beside it (loop.mode)")
    p.add_argument("--gate-games", type=int, help="max games of a gating match (gate.max_games)")
    p.add_argument("--rate", action="store_const", const="true",
                   help="rate each promoted model against the anchor pool as the loop goes (rate.loop)")
    p.add_argument("--init-from", nargs="+", metavar="SOURCE",
                   help="a new run's generation 0: a shipped network (NAME, or 'default'; its architecture and "
                        ".pt weights), a model file (.pt), a chain folder (`dlzero chain save`), or teacher "
                        "data (.hcpe3 from `dlzero teach`, .hcpe) to train it on; default: the default shipped "
                        "network where the config's architecture is its own. Ignored once the run has a best "
                        "model. Data files are copied into the run's teacher/ and listed in train.teacher_data")
    p.add_argument("--from-scratch", action="store_true",
                   help="a new run's generation 0 is random weights, not the shipped network")
    p.add_argument("--init-steps", type=int,
                   help="training steps of that generation 0 (default: train.steps_per_generation)")
    p.add_argument("--init-minutes", type=float, metavar="M",
                   help="train that generation 0 for M minutes instead of a step count: the steps are fixed "
                        "from the speed of its first 50, so the cosine schedule ends on time on any machine")
    p.add_argument("--teacher-fraction", type=float, metavar="F",
                   help="share of every training batch drawn from the teacher data (train.teacher_fraction; "
                        "default 0: self-play data alone after generation 0)")
    p.add_argument("--relabel", metavar="TEACHER",
                   help="have this teacher (miniosl, usi:COMMAND[;Option=value...]) relabel the self-play games "
                        "before each generation trains on them (train.relabel)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from dlzero.commands.common import overrides, resolve_config_path
    from dlzero.errors import ConfigError
    from dlzero.loop import run_loop
    from dlzero.loop_start import plan_start, start_config
    from dlzero.rundir import RunDir
    from dlzero.runlock import PARTS, hold

    if args.init_steps is not None and args.init_minutes is not None:
        raise ConfigError("--init-steps and --init-minutes both say how long generation 0 trains: give one")
    start = added = None
    if not RunDir(args.run).info_path.exists():  # a bad config stops a new run here, before the lock makes a folder
        start = plan_start(args.init_from, args.from_scratch, config_from_args(args, FLAGS).model)
        new_cfg, added = start_config(resolve_config_path(args.config), overrides(args, FLAGS), start)
    with hold(args.run, tuple(PARTS), create=True):  # the loop is every role: it writes every part
        if start is not None and not RunDir(args.run).info_path.exists():
            rd, cfg = RunDir.create(args.run, new_cfg), new_cfg
        else:
            rd, cfg = run_from_args(args, FLAGS, "dlzero loop")
        if cfg.train.relabel:
            from dlzero.teacher import parse_spec

            parse_spec(cfg.train.relabel)  # a bad teacher fails now, not after the first generation's games
        if rd.best() is None:
            start = start or plan_start(args.init_from, args.from_scratch, cfg.model)
            print(f"dlzero loop: {start.note}", file=sys.stderr)
            if added:
                print(f"dlzero loop: settings for improving a trained network (loop.from_network, before --set): "
                      f"{' '.join(added)}", file=sys.stderr)
            if start.trained and cfg.gate.mode == "off":
                print("dlzero loop: warning: gate.mode is off, so this run promotes candidates of a trained "
                      "network without a match", file=sys.stderr)
            if start.kind != "scratch":
                from dlzero.train.supervised import warm_start
                from dlzero.train.teacher_files import adopt_teacher_data

                cfg, sources = adopt_teacher_data(rd, cfg, start.sources)
                if start.chain is not None:
                    from dlzero.chain import adopt_chain

                    games = adopt_chain(rd, start.chain)  # before generation 0: a rerun unpacks them again
                    print(f"dlzero loop: {games} games of the chain's self-play are in the replay window",
                          file=sys.stderr)
                warm_start(rd, cfg, sources, args.init_steps, progress=not args.quiet, minutes=args.init_minutes)
        elif args.init_from or args.from_scratch:
            print(f"dlzero loop: {rd.root} already has a best model (generation {rd.best().generation}): "
                  "--init-from and --from-scratch are ignored", file=sys.stderr)
        run_loop(rd, cfg, args.generations, progress=not args.quiet)
    return 0
