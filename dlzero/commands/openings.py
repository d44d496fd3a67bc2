"""`dlzero openings`: make an opening suite for matches (see `dlzero.play.openings`)."""

from __future__ import annotations

import argparse
import shlex
import sys

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args

SUITE_KEYS = {"min_plies": "gate.suite_min_plies", "max_plies": "gate.suite_max_plies", "margin": "gate.suite_margin",
              "temperature": "gate.suite_temperature", "playouts": "gate.suite_playouts",
              "value_margin": "gate.suite_value_margin"}


def register(sub) -> None:
    p = sub.add_parser("openings", help="make a suite of distinct balanced openings for gating and matches")
    p.add_argument("--out", required=True, help="suite file to write (one 'startpos moves ...' line each)")
    p.add_argument("--count", type=int, required=True, help="openings to make")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same suite)")
    p.add_argument("--from", dest="starts", help="file of lines to start from (a random prefix of one each time)")
    p.add_argument("--exclude", action="append", default=[], metavar="FILE",
                   help="suite to share no start position with: no new line ends at a position along one of its "
                        "lines, none passes through where one of them ends (repeatable; rating.txt excludes gate.txt)")
    p.add_argument("--model", help="sample the model's policy and filter by its search; default: uniform moves")
    p.add_argument("--min-plies", type=int, help="gate.suite_min_plies")
    p.add_argument("--max-plies", type=int, help="gate.suite_max_plies")
    p.add_argument("--margin", type=float, help="gate.suite_margin (pawns of material imbalance allowed)")
    p.add_argument("--temperature", type=float, help="gate.suite_temperature (with --model)")
    p.add_argument("--playouts", type=int, help="gate.suite_playouts (with --model; 0: no value filter)")
    p.add_argument("--value-margin", type=float, help="gate.suite_value_margin (with --model)")
    add_config_args(p)
    add_inference_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.errors import ConfigError
    from dlzero.play.openings import (
        SuiteSettings,
        generate_suite,
        load_openings,
        network_policy,
        uniform_policy,
        value_filter,
        write_suite,
    )

    cfg = config_from_args(args, SUITE_KEYS)
    if args.count <= 0:
        raise ConfigError(f"--count must be > 0, got {args.count}")
    gate = cfg.gate
    settings = SuiteSettings(gate.suite_min_plies, gate.suite_max_plies, gate.suite_margin)
    starts = load_openings(args.starts) if args.starts else []
    exclude = [line for path in args.exclude for line in load_openings(path)]
    policy, value_ok, evaluator = uniform_policy, None, None
    how = "uniform over legal moves"
    if args.model:
        from dlzero.inference import load_model
        from dlzero.search import Search

        evaluator = load_model(args.model, cfg.inference)
        search = Search(evaluator, cfg.search)
        policy = network_policy(search, gate.suite_temperature)
        how = f"{args.model} priors at temperature {gate.suite_temperature}"
        if gate.suite_playouts:
            value_ok = value_filter(search, gate.suite_playouts, gate.leaves_per_tree, gate.suite_value_margin)
            how += f"; kept if a {gate.suite_playouts}-playout search's win rate is within {gate.suite_value_margin}"
    try:
        lines = generate_suite(args.count, args.seed, settings, policy=policy, value_ok=value_ok, starts=starts,
                               exclude=exclude)
    finally:
        if evaluator is not None:
            evaluator.close()
    header = [
        "dlzero opening suite: one start position per colour-swapped pair of a match",
        "made by: dlzero openings " + shlex.join(_command_args(args)),
        f"{len(lines)} distinct positions; {settings.min_plies}-{settings.max_plies} plies sampled "
        f"{'after a random prefix of ' + args.starts if args.starts else 'from the start position'}; policy: {how}",
        f"balance: not in check, no mate in 3, material within {settings.margin} pawns after the side to move's "
        "best move and the captures that follow",
    ]
    if args.exclude:
        header.append(f"clear of {', '.join(args.exclude)}: no line ends at a position along one of its lines "
                      "(their start included), and none passes through where one of them ends")
    write_suite(args.out, lines, header)
    print(f"wrote {args.out}: {len(lines)} openings", file=sys.stderr)
    return 0


def _command_args(args: argparse.Namespace) -> list[str]:
    """The arguments that decide the suite's contents (not --out), to repeat the run."""
    out = ["--count", str(args.count), "--seed", str(args.seed)]
    for flag, value in (("--from", args.starts), ("--model", args.model), ("--config", args.config)):
        if value:
            out += [flag, value]
    for path in args.exclude:
        out += ["--exclude", path]
    for dest in SUITE_KEYS:
        if getattr(args, dest) is not None:
            out += ["--" + dest.replace("_", "-"), str(getattr(args, dest))]
    for item in args.set:
        out += ["--set", item]
    return out
