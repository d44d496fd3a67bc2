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
    from dlzero.config import Config
    from dlzero.gating.match import MatchResult
    from dlzero.player_names import PlayerName

MATCH_KEYS = {"games": "gate.max_games", "playouts": "gate.playouts", "parallel": "gate.games_in_parallel",
              "openings": "rate.openings", "tolerance": "rate.clock_tolerance_ms"}


def register(sub) -> None:
    m = sub.add_parser("match", help="play two models (or a model and 'random'): W-D-L, score, Elo")
    players = (".pt/.onnx model, a run directory, 'default' (the default network), 'network:NAME' (a network), "
               "'random', alphabeta:N, miniosl:sample=N, or an outside engine as a rating anchor names it "
               "(gpsshogi:depth=10:byoyomi=1000, fairy-stockfish:skill=20:byoyomi=1000, usi:COMMAND;...;byoyomi=MS) "
               "or rate.engines does (NAME=COMMAND, go from rate.engine_go): any player name (docs/ratings.md)")
    m.add_argument("model_a", help=players)
    m.add_argument("model_b", help=players)
    m.add_argument("--games", type=int, help="games to play (gate.max_games)")
    m.add_argument("--playouts", type=int, help="playouts per move (gate.playouts)")
    m.add_argument("--parallel", type=int, help="games played at once (gate.games_in_parallel)")
    m.add_argument("--openings", type=json.dumps, metavar="FILE",
                   help="opening suite (rate.openings; default: the shipped configs/openings/rating.txt)")
    m.add_argument("--start", metavar="HANDICAP", help="every game from this handicap start (香落ち, 角落ち, "
                   "飛車落ち, 二枚落ち, ... or lance, bishop, rook, two-piece, ...): the giver plays White and moves "
                   "first; each pair has A on both sides (dlzero.play.handicap)")
    m.add_argument("--tolerance", type=int, help="ms an engine given a byoyomi may take past it before the move "
                   "loses on time (rate.clock_tolerance_ms)")
    m.add_argument("--byoyomi", type=int, metavar="MS",
                   help="equal time: each dlzero player (a model file, a run directory, a network, 'default') "
                        "plays as `dlzero usi` at MS a move with Threads 1 and EvalStreams 1, one core's worth of "
                        "search, on the clock like an outside engine (instead of --playouts a move)")
    m.add_argument("--time", type=int, metavar="MS",
                   help="a game clock instead: MS of main time a game for every dlzero player (as `dlzero usi` "
                        "on one core, like --byoyomi) and, with --inc or --byoyomi, that after it; outside "
                        "engines take theirs from their names (time=MS:inc=MS)")
    m.add_argument("--inc", type=int, metavar="MS", help="with --time: a Fischer increment a move")
    m.add_argument("--sprt", metavar="ELO0,ELO1", help="the match fixed in advance: stop once Wald's SPRT on "
                   "independent games (--alpha, --beta) decides, looking every --step games; at --games "
                   "undecided, the LLR's sign decides")
    m.add_argument("--step", type=int, default=10, help="with --sprt: games between looks (even)")
    m.add_argument("--alpha", type=float, default=0.1, help="with --sprt: the false-H1 rate")
    m.add_argument("--beta", type=float, default=0.1, help="with --sprt: the false-H0 rate")
    m.add_argument("--csv", metavar="FILE", help="append the match's row (players, time control, W-D-L, time "
                   "losses, searched a move, CPU flags, load, the --records folder) to this CSV file; a row "
                   "whose records are kept can be recounted from them (dlzero.gating.recount)")
    m.add_argument("--csa-dir", "--records", dest="csa_dir", metavar="DIR",
                   help="write each game as a CSA record into this folder (its moves, result and reason)")
    m.add_argument("--resume", action="store_true", help="go on with the match whose games --records kept: count "
                   "its complete pairs and play only the missing ones, from the same openings (same players, time "
                   "control, suite and --seed; dlzero.gating.resume)")
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


def handicap_line_for(result: MatchResult, start: str) -> str:
    """A's W-D-L giving the handicap `start` (A plays White, the side without the pieces) and taking it, apart:
    a colour-swapped pair of a handicap match is two different games."""
    from dlzero.gating.match import MatchResult

    parts = []
    for label, giving in (("giving", True), ("taking", False)):
        side = MatchResult()
        for game in result.games:
            if game.a_is_black != giving:
                side.add(game)
        parts.append(f"{label} it {side.wins}-{side.draws}-{side.losses}")
    return f"A from {start}: " + ", ".join(parts)


def clock_control(byoyomi: int | None, time_ms: int | None, inc_ms: int | None) -> str | None:
    """The time control of --byoyomi, --time and --inc in words (None: none given, playouts a move); a
    ConfigError for a clock no GUI keeps."""
    from dlzero.errors import ConfigError

    for flag, value in (("--byoyomi", byoyomi), ("--time", time_ms), ("--inc", inc_ms)):
        if value is not None and value <= 0:
            raise ConfigError(f"{flag} {value}: give milliseconds, more than 0")
    if inc_ms is not None and (time_ms is None or byoyomi is not None):
        raise ConfigError("--inc is a Fischer increment: it needs --time and no --byoyomi (a clock has one or the "
                          "other)")
    if time_ms is None:
        return None if byoyomi is None else f"byoyomi {byoyomi} ms, Threads 1, EvalStreams 1"
    after = f" + byoyomi {byoyomi} ms" if byoyomi else f" + {inc_ms} ms a move (Fischer)" if inc_ms else ""
    return f"{time_ms} ms a game{after}, Threads 1, EvalStreams 1"


def clock_left(move_ms: list[float | None], time_ms: int, inc_ms: int) -> float:
    """What a side's game clock held after its timed moves `move_ms` (main time `time_ms`, `inc_ms` added after
    each move), as the match kept it."""
    from dlzero.play.game import clock_after

    left = float(time_ms)
    for ms in move_ms:
        if ms is not None:
            left = clock_after(left, ms, inc_ms)
    return left


def clock_lines(result: MatchResult, searched: dict[str, float | None],
                clock: tuple[int, int] | None = None) -> list[str]:
    """A line per side that played on the clock: its timed moves' median, 95th percentile and longest wall
    time, the games it lost on time, and what it searched a move (`searched`, by side: nodes, dlzero's
    playouts, from its `info` lines' nps x time); with a game `clock` (main time, increment), what was left of
    it when each game ended: the median and the least."""
    import math
    import statistics

    import cshogi

    from dlzero.play.game import END_TIME

    times: dict[str, list[int]] = {"A": [], "B": []}
    left: dict[str, list[float]] = {"A": [], "B": []}  # each game's clock at its end, by side
    for game in result.games:
        first = cshogi.Board(game.start_sfen).turn
        a_colour = cshogi.BLACK if game.a_is_black else cshogi.WHITE
        mine: dict[str, list[float]] = {"A": [], "B": []}
        for ply, ms in enumerate(game.move_ms):
            if ms is not None:
                side = "A" if (first ^ (ply & 1)) == a_colour else "B"
                times[side].append(ms)
                mine[side].append(ms)
        if clock is not None:
            for side, moves in mine.items():
                if moves:
                    lost = game.reason == END_TIME and (game.winner == a_colour) == (side == "B")
                    left[side].append(0.0 if lost else clock_left(moves, *clock))
    flags = time_losses(result)
    lines = []
    for side, ms in times.items():
        if ms:
            ms.sort()
            per_move = searched.get(side)
            lines.append(f"{side} on the clock: {len(ms)} moves, median {statistics.median(ms):.0f} ms, 95th "
                         f"{ms[math.ceil(0.95 * len(ms)) - 1]} ms, longest {ms[-1]} ms; lost on time: {flags[side]}"
                         + (f"; {per_move:,.0f} nodes a move (median of nps x time)" if per_move is not None else "")
                         + (f"; clock left at the end: median {statistics.median(left[side]):,.0f} ms, least "
                            f"{min(left[side]):,.0f} ms of {clock[0]:,}" if clock is not None and left[side] else ""))
    return lines


def usi_player(spec: str, byoyomi: int | None, time_ms: int | None = None, inc_ms: int | None = None) -> str:
    """The anchor name of dlzero's own engine playing `spec` (`--model` of `dlzero usi`) on one core at `byoyomi`
    ms a move, or on a game clock of `time_ms` (with `inc_ms` a move, or `byoyomi` after it), as a GUI runs it:
    the equal-time form of a dlzero player."""
    import shutil
    from pathlib import Path

    dlzero = shutil.which("dlzero") or str(Path(sys.executable).with_name("dlzero"))
    model = str(Path(spec).resolve()) if Path(spec).exists() else spec
    clock = [f"{key}={value}" for key, value in (("byoyomi", byoyomi), ("time", time_ms), ("inc", inc_ms))
             if value is not None]
    return ";".join([f"usi:{dlzero} usi --model {model}", "Threads=1", "EvalStreams=1", *clock])


def match_player(text: str, byoyomi: int | None, cfg: Config, side: str, time_ms: int | None = None,
                 inc_ms: int | None = None) -> PlayerName:
    """Player `side`'s name parsed (a ConfigError names the side and the accepted forms); with `byoyomi` or
    `time_ms`, a dlzero model becomes dlzero's own engine playing it on the clock (`usi_player`)."""
    from dlzero.engine.shipped import require_model
    from dlzero.errors import ConfigError
    from dlzero.player_names import MODEL_KINDS, parse_player

    try:
        name = parse_player(text)
    except ValueError as exc:
        raise ConfigError(f"player {side}: {exc}") from None
    if (byoyomi is None and time_ms is None) or name.kind not in MODEL_KINDS:
        return name
    require_model(name, cfg)  # a bad name stops here, not in the engine's stderr
    return parse_player(usi_player(text, byoyomi, time_ms, inc_ms))


def record_header(texts: tuple[str, str], names: list[PlayerName], control: str, cfg: Config,
                  openings: str) -> list[str]:
    """The comment lines that open each kept game: each player as written and as played (a shipped network's
    name beside `default`), the time control, dlzero's version and the machine (cores, CPU flags, the load
    when the match began), so that a record says how it was played without the command line."""
    import datetime as dt
    import os

    from dlzero.cpu import cpu_flags
    from dlzero.engine.shipped import require_model
    from dlzero.player_names import MODEL_KINDS, parse_player
    from dlzero.version import __version__

    lines = []
    for side, text, name in zip("AB", texts, names, strict=True):
        written = parse_player(text)
        network = f" ({require_model(written, cfg).label()})" if written.kind in MODEL_KINDS else ""
        played = f", played as {name.canonical()}" if name.canonical() != written.canonical() else ""
        lines.append(f"{side}: {text}{network}{played}")
    lines += [f"time control: {control}", f"openings: {openings}",
              f"dlzero {__version__}; {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores, cpu "
              f"flags {cpu_flags()}, load average {os.getloadavg()[0]:.2f} at the start"]
    return lines


def _close(sides: list) -> None:
    """Close the players that hold a process or a session (engines, models)."""
    for side in sides:
        if callable(close := getattr(side, "close", None)):
            close()


def sprt_bounds(text: str, step: int) -> tuple[float, float]:
    """--sprt ELO0,ELO1 checked, with its --step."""
    from dlzero.errors import ConfigError

    try:
        elo0, elo1 = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"--sprt wants ELO0,ELO1 (e.g. 0,50), not {text!r}") from None
    if not elo0 < elo1 or step < 2 or step % 2:
        raise ConfigError("--sprt wants ELO0 < ELO1 and an even --step of 2 or more")
    return elo0, elo1


def append_csv(path: str, row: dict[str, object]) -> None:
    """Add `row` to the CSV at `path` (header first when the file is new), atomically. A file written before
    a column was added is rewritten with the new header, its rows kept under their own names (the new columns
    empty), never appended to under a header whose columns no longer line up."""
    import csv
    import io
    from pathlib import Path

    from dlzero.data.atomic import atomic_write_text

    target = Path(path)
    old = target.read_text(encoding="utf-8") if target.is_file() else ""
    reader = csv.DictReader(io.StringIO(old))
    rows = list(reader)
    header = list(reader.fieldnames or [])
    columns = header + [key for key in row if key not in header]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    if columns == header:
        writer.writerow(row)
        atomic_write_text(target, old + buf.getvalue())
        return
    writer.writeheader()
    writer.writerows([*rows, row])
    atomic_write_text(target, buf.getvalue())


def run(args: argparse.Namespace) -> int:
    import os

    from dlzero.cpu import cpu_flags
    from dlzero.errors import ConfigError
    from dlzero.gating.match import MatchResult, play_match
    from dlzero.gating.rating import rating_suite
    from dlzero.gating.resume import kept_pairs, missing_chunks
    from dlzero.gating.sprt import truncated_verdict
    from dlzero.play.registry import PlayContext, build_player
    from dlzero.play.usi_opponent import UsiOpponent

    cfg = config_from_args(args, MATCH_KEYS)
    bounds = sprt_bounds(args.sprt, args.step) if args.sprt else None
    control = clock_control(args.byoyomi, args.time, args.inc)
    if args.resume and not args.csa_dir:
        raise ConfigError("--resume goes on with the games a match kept: give its --records folder")
    if args.start:
        from dlzero.play.handicap import handicap_line

        openings = [handicap_line(args.start)]
        suite = f"the handicap start {args.start}"
    else:
        openings, suite = rating_suite(cfg)
    texts = (args.model_a, args.model_b)
    names = [match_player(text, args.byoyomi, cfg, side, args.time, args.inc)
             for side, text in zip("AB", texts, strict=True)]
    sides = []
    try:
        for side, name in zip("AB", names, strict=True):
            sides.append(build_player(name, PlayContext(cfg, args.seed, note=lambda line, side=side: print(
                f"dlzero match: {side}: {line}", file=sys.stderr))))
    except BaseException:
        _close(sides)
        raise
    control = control or f"{cfg.gate.playouts} playouts a move"
    header = record_header(texts, names, control, cfg, f"{suite}, seed {args.seed}") if args.csa_dir else []
    print(f"dlzero match: A={args.model_a} vs B={args.model_b}, {control}; cpu flags: {cpu_flags()}; "
          f"load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    result = MatchResult()
    kept = kept_pairs(args.csa_dir, header, cfg.gate.max_games) if args.resume else {}
    for games in kept.values():
        for game in games:
            result.add(game)
        if len(games) == 2:
            result.add_pair(*games)
    if args.resume:
        print(f"dlzero match: resuming: {result.n_games} games kept in {args.csa_dir} ({result.wins}-{result.draws}-"
              f"{result.losses} for A), {cfg.gate.max_games - result.n_games} to play", file=sys.stderr)

    def look() -> str | None:
        """The SPRT's verdict on the games so far (None: play on)."""
        done = result.n_games >= cfg.gate.max_games
        verdict = truncated_verdict(result.wins, result.draws, result.losses, bounds, args.alpha, args.beta, done,
                                    ("A by the rule", "B by the rule"))
        print(f"after {result.n_games} games: {result.wins}-{result.draws}-{result.losses}"
              + (f"; {verdict}" if verdict else ""), file=sys.stderr)
        return verdict

    verdict = look() if bounds and kept else None
    try:
        for first_slot, chunk in missing_chunks(set(kept), cfg.gate.max_games, args.step // 2 if bounds else None):
            if verdict:
                break
            part = play_match(sides[0], sides[1], chunk, cfg, openings=openings, seed=args.seed,
                              record_dir=args.csa_dir, names=("A", "B"), header=header,
                              opening_offset=first_slot, first_record=2 * first_slot)
            for game in part.games:
                result.add(game)
            result.pairs = [a + b for a, b in zip(result.pairs, part.pairs, strict=True)]
            if not part.games:
                break  # nothing more could be played (an empty suite)
            if bounds:
                verdict = look()
    finally:
        _close(sides)
    print(summary(result, args.model_a, args.model_b))
    if args.start:
        print(handicap_line_for(result, args.start))
    if verdict:
        print(f"SPRT({bounds[0]:g}, {bounds[1]:g}, alpha {args.alpha:g}, beta {args.beta:g}): {verdict}")
    searched = {side: player.searched_per_move() for side, player in zip("AB", sides, strict=True)
                if isinstance(player, UsiOpponent)}
    lines = clock_lines(result, searched, (args.time, args.inc or 0) if args.time else None)
    if lines:  # the speed an engine searched at depends on the CPU's vector units
        lines.append(f"cpu flags: {cpu_flags()}; load average {os.getloadavg()[0]:.2f}")
    for line in lines:
        print(line)
    reasons = Counter(g.reason for g in result.games)
    print("game ends: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())), file=sys.stderr)
    if args.csv:
        flags = time_losses(result)
        append_csv(args.csv, {"a": args.model_a, "b": args.model_b, "time_control": control,
                              "start": args.start or "", "wins": result.wins,
                              "draws": result.draws, "losses": result.losses, "a_time_losses": flags["A"],
                              "b_time_losses": flags["B"],
                              "a_searched_per_move": _round(searched.get("A")),
                              "b_searched_per_move": _round(searched.get("B")),
                              "cpu_flags": cpu_flags(), "load_average": f"{os.getloadavg()[0]:.2f}",
                              "records": args.csa_dir or ""})
    return 0


def _round(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def time_losses(result: MatchResult) -> Counter[str]:
    """Games each side lost on time."""
    import cshogi

    from dlzero.play.game import END_TIME

    flags: Counter[str] = Counter()
    for game in result.games:
        if game.reason == END_TIME:
            a_colour = cshogi.BLACK if game.a_is_black else cshogi.WHITE
            flags["B" if game.winner == a_colour else "A"] += 1
    return flags
