"""`dlzero match`: play any two players (model files, shipped networks, 'random', or outside USI engines
named as rating anchors are: `usi:COMMAND;OPTION=VALUE;byoyomi=MS`, `fairy-stockfish:skill=S:byoyomi=MS`,
`gpsshogi:depth=D`): W-D-L, score, Elo.

An engine given a byoyomi plays on the clock (`dlzero.play.usi_opponent`): a move that takes longer than
the byoyomi plus `--tolerance` ms (`rate.clock_tolerance_ms`) loses the game on time, and the game ends
say how many did. So `dlzero match "usi:dlzero usi;Threads=1;EvalStreams=1;byoyomi=1000" ... --games 200`
checks the engine's ByoyomiMargin on this machine (issue 51).

The games start from the rating suite (`--openings`, `rate.openings`; default configs/openings/rating.txt),
as `dlzero rate`'s do: no teacher or self-play game starts there, so neither side plays from a book it
trained on.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import TYPE_CHECKING

from dlzero.commands.common import add_config_args, add_inference_args, config_from_args

if TYPE_CHECKING:
    from dlzero.gating.arena import MatchResult

MATCH_KEYS = {"games": "gate.max_games", "playouts": "gate.playouts", "parallel": "gate.games_in_parallel",
              "openings": "rate.openings", "tolerance": "rate.clock_tolerance_ms"}


def register(sub) -> None:
    m = sub.add_parser("match", help="play two models (or a model and 'random'): W-D-L, score, Elo")
    players = (".pt/.onnx model, 'default' (the default network), 'network:NAME' (a network), 'random', or an "
               "outside engine as a rating anchor names it (usi:COMMAND;...;byoyomi=MS)")
    m.add_argument("model_a", help=players)
    m.add_argument("model_b", help=players)
    m.add_argument("--games", type=int, help="games to play (gate.max_games)")
    m.add_argument("--playouts", type=int, help="playouts per move (gate.playouts)")
    m.add_argument("--parallel", type=int, help="games played at once (gate.games_in_parallel)")
    m.add_argument("--openings", type=json.dumps, metavar="FILE",
                   help="opening suite (rate.openings; default: the shipped configs/openings/rating.txt)")
    m.add_argument("--tolerance", type=int, help="ms an engine given a byoyomi may take past it before the move "
                   "loses on time (rate.clock_tolerance_ms)")
    m.add_argument("--csa-dir", help="write each game as a CSA record into this folder")
    m.add_argument("--seed", type=int, default=0, help="seed for the opening order and the random mover")
    add_config_args(m)
    add_inference_args(m)
    m.set_defaults(func=run)


def summary(result: MatchResult, name_a: str, name_b: str) -> str:
    """The match in one line, what is known first: W-D-L and the score with its 95 % Wilson interval
    (`dlzero.gating.elo_fit.score_interval`); then A's Elo named by its prior and zero ("no prior, B = 0":
    the score's logistic, the gate's normal interval over colour-swapped pairs), except after a sweep,
    which has no finite Elo: the score's interval bound is turned into a bound on it instead."""
    from dlzero.gating.elo_fit import scale_label, score_interval
    from dlzero.gating.sprt import elo_from_score

    score, low, high = score_interval(result.wins, result.draws, result.losses)
    line = (f"A={name_a} vs B={name_b}: {result.n_games} games, W-D-L {result.wins}-{result.draws}-{result.losses} "
            f"(for A), score {score:.3f} [{low:.3f}, {high:.3f}] (95%, Wilson); {scale_label('B', 0)} of A: ")
    if result.n_games and (result.wins + result.draws == 0 or result.losses + result.draws == 0):
        side, bound = ("at least", low) if result.losses + result.draws == 0 else ("at most", high)
        return line + f"none (a sweep has no finite Elo; the score's bound {bound:.3f} is {side} " \
                      f"{elo_from_score(bound):+.0f})"
    elo, elo_low, elo_high = result.elo()
    return line + f"{elo:+.0f} [{elo_low:+.0f}, {elo_high:+.0f}] (95%)"


def clock_lines(result: MatchResult, searched: dict[str, float | None]) -> list[str]:
    """A line per side that played on the clock: its timed moves' median, 95th percentile and longest wall
    time, the games it lost on time, and what it searched a move (`searched`, by side: nodes, dlzero's
    playouts, from its `info` lines' nps x time)."""
    import math
    import statistics

    import cshogi

    from dlzero.play.game import END_TIME

    times: dict[str, list[int]] = {"A": [], "B": []}
    flags: Counter[str] = Counter()
    for game in result.games:
        first = cshogi.Board(game.start_sfen).turn
        a_colour = cshogi.BLACK if game.a_is_black else cshogi.WHITE
        for ply, ms in enumerate(game.move_ms):
            if ms is not None:
                times["A" if (first ^ (ply & 1)) == a_colour else "B"].append(ms)
        if game.reason == END_TIME:
            flags["B" if game.winner == a_colour else "A"] += 1
    lines = []
    for side, ms in times.items():
        if ms:
            ms.sort()
            per_move = searched.get(side)
            lines.append(f"{side} on the clock: {len(ms)} moves, median {statistics.median(ms):.0f} ms, 95th "
                         f"{ms[math.ceil(0.95 * len(ms)) - 1]} ms, longest {ms[-1]} ms; lost on time: {flags[side]}"
                         + (f"; {per_move:,.0f} nodes a move (nps x time)" if per_move is not None else ""))
    return lines


def run(args: argparse.Namespace) -> int:
    from dlzero.engine.shipped import require_model
    from dlzero.gating.anchors import engine_anchor, is_engine
    from dlzero.gating.arena import RANDOM, play_match
    from dlzero.gating.rating import rating_suite
    from dlzero.inference import load_model
    from dlzero.play.usi_opponent import UsiOpponent

    cfg = config_from_args(args, MATCH_KEYS)
    openings, _ = rating_suite(cfg)
    names = (args.model_a, args.model_b)
    sides = []
    for side, name in zip("AB", names, strict=True):
        if name == RANDOM:
            sides.append(name)
            continue
        if is_engine(name):
            sides.append(engine_anchor(name, cfg.rate.engine_timeout_s, cfg.rate.clock_tolerance_ms))
            continue
        choice = require_model(name, cfg, flag=f"player {side}")
        if choice.network is not None:
            print(f"dlzero match: {side}: {choice.note('another player name')}", file=sys.stderr)
        sides.append(load_model(choice.path, cfg.inference))
    try:
        result = play_match(sides[0], sides[1], cfg.gate.max_games, cfg, openings=openings, seed=args.seed,
                            record_dir=args.csa_dir, names=("A", "B"))
    finally:
        for side in sides:
            if not isinstance(side, str):
                side.close()
    print(summary(result, args.model_a, args.model_b))
    searched = {side: player.searched_per_move() for side, player in zip("AB", sides, strict=True)
                if isinstance(player, UsiOpponent)}
    lines = clock_lines(result, searched)
    if lines:  # the speed an engine searched at depends on the CPU's vector units
        from dlzero.cpu import cpu_flags

        lines.append(f"cpu flags: {cpu_flags()}")
    for line in lines:
        print(line)
    reasons = Counter(g.reason for g in result.games)
    print("game ends: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())), file=sys.stderr)
    return 0
