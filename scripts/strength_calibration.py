"""Calibrate the USI `Strength` levels 1-19 on the ladder (not a test; issue 53's measurement).

    nice -n 5 python scripts/strength_calibration.py --work runs/strength --deadline 10:33 \
        --spans 1,7,13,19 --dear-level 17 --dear-games 4
    python scripts/strength_calibration.py --work runs/strength --report-only --markdown \
        --csv docs/benchmarks/strength-levels.csv --games-tar docs/benchmarks/games/strength-levels.tar.xz
    python scripts/strength_calibration.py --check-cap 19     # 4096 playouts in far less than 5,000 ms?

When only some levels change (`dlzero.engine.strength.LEVELS`), only they are played again: `--carry` reads the
earlier table's games (its --games-tar) and keeps those whose levels are all in `--carry-levels` (unchanged),
so the report, the fit and the new tar cover both:

    python scripts/strength_calibration.py --work runs/strength2 --levels 1-7 --start-rung alphabeta:10 \
        --carry docs/benchmarks/games/strength-levels.tar.xz --carry-levels 7-19 --spans 1,4,7

Why playouts and not the clock: levels 1-19 stop at their playout cap (`level_playouts`: 1 at level 1, 4,096 at
19), so a level plays the same moves on a loaded machine as on an idle one as long as its byoyomi is generous
enough that the cap, not the clock, ends each search (`--byoyomi` 5,000 ms against ~1-1.5 s for 4,096 playouts
on one core here). The rungs are load-independent too: `random`, `alphabeta:N` (fixed nodes), Fairy-Stockfish
at a fixed node count and GPS Shogi at a fixed depth. Level 20 (the clock's playouts) is not measured here: on
a shared machine its strength is the load's; docs/benchmarks/networks.md measures it at equal time.

What is played, in colour-swapped pairs from the rating suite (configs/openings/rating.txt), each level as
`dlzero usi` (the default network, `Strength` N, Threads 1, EvalStreams 1) named as a `usi:` anchor:
- each level against the rungs around it: the first rung is where the level below ended (`--start-rung` for the
  first level); after the first block of games a sweep (>= 5/6) moves one rung up, a wipe-out one rung down,
  so a level's score is measured where it says something;
- each level against the level below it (L vs L-1): the monotonicity check, by a measured margin.
Pairings are topped up in phases (`--phases`, e.g. 6,12,20 games), cheap levels first in each phase, and no
new pair of games starts after `--deadline` (UTC, HH:MM): what was measured by then is what is reported.
The games are `dlzero rate` batch files in WORK, so a rerun tops up and replays nothing.

The report (`--csv`) has one row per pairing: level, playouts, temperature, opponent, W-D-L, score with its 95 %
Wilson interval, the Elo difference that score means with its interval, and the level's Elo from one fit over
these games and the ladder's (docs/benchmarks/ladder.csv, random = 0), so a level's number sits on the ladder's
scale; its interval is that of its distance to `alphabeta:1000` (the ladder's own uncertainty of that rung
against random, about +-540, comes on top and is the same for every level). `--games-tar` keeps every game
as a CSA record in a tar.xz.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import io
import math
import re
import shutil
import sys
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.commands.common import resolve_config_path  # noqa: E402
from dlzero.config import Config, load_config  # noqa: E402
from dlzero.engine.strength import level_playouts, level_temperature  # noqa: E402
from dlzero.gating.rating import load_batches, pair_tally, rate  # noqa: E402
from dlzero.rundir import RunDir  # noqa: E402

# load-independent rungs, weakest first (ladder.md's Elo where it has one): the alpha-beta anchors, then
# Fairy-Stockfish at fixed nodes to fill the gap between alphabeta:1000 (+2388) and GPS Shogi depth 4 (+4221),
# then two above it for the top levels (full strength at 1 s scores 0.88 against depth 4)
RUNGS = ["random", "alphabeta:1", "alphabeta:10", "alphabeta:30", "alphabeta:100", "alphabeta:300",
         "alphabeta:1000", "fairy-stockfish:skill=20:nodes=1000", "fairy-stockfish:skill=20:nodes=3000",
         "fairy-stockfish:skill=20:nodes=10000", "fairy-stockfish:skill=20:nodes=30000",
         "fairy-stockfish:skill=20:nodes=100000", "gpsshogi:depth=4", "fairy-stockfish:skill=20:nodes=300000",
         "gpsshogi:depth=5"]
# the level Elo's interval is its distance to this rung's (the ladder's +2388), not to random's: random is
# joined to the levels through the whole alpha-beta chain, whose own uncertainty (+-540) would swamp theirs
NEAR_PIN = "alphabeta:1000"
SWEEP = 5 / 6  # a first block scored at least this (or at most 1 - this) moves the level one rung on
_LEVEL = re.compile(r"^usi:.*\bdlzero usi;Strength=(\d+);")
_LABEL = re.compile(r"strength:(\d+)")  # a level as the table and the records name it (`opponent_label`)


def dlzero_command() -> str:
    """The `dlzero` executable beside this Python (the worktree's own install), else the one on PATH."""
    beside = Path(sys.executable).with_name("dlzero")
    return str(beside) if beside.exists() else (shutil.which("dlzero") or "dlzero")


def level_player(level: int, byoyomi: int, command: str | None = None) -> str:
    """The anchor name of the default network at `level`: `dlzero usi` as an outside USI engine on one core,
    given `byoyomi` ms a move so that the level's playout cap, not the clock, ends its search."""
    return f"usi:{command or dlzero_command()} usi;Strength={level};Threads=1;EvalStreams=1;byoyomi={byoyomi}"


def player_level(name: str) -> int | None:
    """The `Strength` level of a `level_player` name, None for any other player."""
    m = _LEVEL.match(name)
    return int(m.group(1)) if m else None


def tally(batches: Iterable, me: str, opponent: str) -> tuple[int, int, int]:
    """`me`'s wins, draws and losses against `opponent` over `batches` (load_batches' pairs)."""
    return pair_tally(batches, me, opponent)[:3]


class Deadline(Exception):
    """The deadline passed: no new games start."""


class Session:
    """Plays pairings into one run directory, a colour-swapped pair of games at a time, until the deadline."""

    def __init__(self, work: Path, cfg: Config, deadline: dt.datetime | None) -> None:
        self.rd = RunDir.open(work) if (work / "config.yaml").exists() else RunDir.create(work, cfg)
        self.cfg = cfg
        self.deadline = deadline

    def score(self, me: str, opponent: str) -> tuple[int, int, int]:
        return tally(load_batches(self.rd)[0], me, opponent)

    def top_up(self, me: str, opponent: str, games: int) -> tuple[int, int, int]:
        """Play `me` against `opponent` until they have `games` games (two at a time, so that a deadline stops
        the session within one pair), and return `me`'s W-D-L."""
        w, d, lo = self.score(me, opponent)
        while w + d + lo < games:
            if self.deadline and dt.datetime.now(dt.UTC) >= self.deadline:
                raise Deadline
            target = min(games, w + d + lo + 2)
            one = dataclasses.replace(self.cfg, rate=dataclasses.replace(self.cfg.rate, anchors=[opponent, me],
                                                                          games=target))
            rate(self.rd, one, [], progress=False)
            before = w + d + lo
            w, d, lo = self.score(me, opponent)
            if w + d + lo <= before:
                raise RuntimeError(f"{me} vs {opponent}: no game was stored (an engine failed?)")
        print(f"{dt.datetime.now(dt.UTC):%H:%M:%S} {short(me)} vs {short(opponent)}: {w}-{d}-{lo}", flush=True)
        return w, d, lo


def short(name: str) -> str:
    """`L7` for a level player, else the name."""
    level = player_level(name)
    return name if level is None else f"L{level}"


def measure(session: Session, levels: Sequence[int], byoyomi: int, phases: Sequence[int], start_rung: str,
            spans: Sequence[int] = (), dear_level: int = 20, dear_games: int = 4, chain_games: int = 0) -> None:
    """Phase one places every level among the rungs, then plays every level against the level below (rungs
    first: if the deadline comes, each level has its place on the ladder), then the `spans` levels against
    each other (each against the one before it in the list: neighbours differ by less than a few games can
    show, levels several apart by a margin they can); later phases top up every pairing of phase one,
    the level-below pairings first, to their number of games. The neighbours of levels from `dear_level` up
    (a game of 4,096 + 2,702 playouts a move takes minutes) get `dear_games` in phase one, and the spans
    below `dear_level` come after every level has met the one below it. Last, `chain_games` tops up only the
    level-below pairings (neighbours ~100 Elo apart need ~100 games to separate; the rungs do not)."""
    rung = RUNGS.index(start_rung)
    planned: list[tuple[str, str]] = []
    first = phases[0]
    for level in levels:
        me = level_player(level, byoyomi)
        w, d, lo = session.top_up(me, RUNGS[rung], first)
        planned.append((me, RUNGS[rung]))
        s = (w + d / 2) / max(1, w + d + lo)
        step = 1 if s >= SWEEP else -1 if s <= 1 - SWEEP else 0
        if step and 0 <= rung + step < len(RUNGS):
            rung += step
            session.top_up(me, RUNGS[rung], first)
            planned.append((me, RUNGS[rung]))
    chain = [(level_player(level, byoyomi), level_player(level - 1, byoyomi)) for level in levels
             if level - 1 in levels]
    for me, opponent in chain:
        if player_level(me) < dear_level:
            session.top_up(me, opponent, first)
    wide = [(level_player(hi, byoyomi), level_player(lo, byoyomi))
            for lo, hi in zip(spans[:-1], spans[1:], strict=True)]
    for me, opponent in chain:
        if player_level(me) >= dear_level:
            session.top_up(me, opponent, dear_games)
    for me, opponent in wide:  # the cheap ones: a wide margin where neighbours are too close to tell apart
        if player_level(me) < dear_level:
            session.top_up(me, opponent, phases[1] if len(phases) > 1 else first)
    for games in phases[1:]:
        for me, opponent in wide + chain + planned:
            session.top_up(me, opponent, games)
    for me, opponent in chain if chain_games else []:
        session.top_up(me, opponent, chain_games)


def cap_check(level: int, byoyomi: int, position: str = "startpos moves 7g7f 3c3d") -> tuple[int, int]:
    """(playouts, ms) of `level`'s last `info` line for one move at `byoyomi`: playouts equal to the level's cap
    in far less than the byoyomi say the cap, not the clock, ended the search."""
    import subprocess

    script = (f"usi\nsetoption name Strength value {level}\nsetoption name Threads value 1\n"
              f"setoption name EvalStreams value 1\nisready\nusinewgame\nposition {position}\n"
              f"go byoyomi {byoyomi}\n")
    with subprocess.Popen([dlzero_command(), "usi"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(script)
        proc.stdin.flush()
        nodes = ms = 0
        for line in proc.stdout:
            if m := re.search(r"\bnodes (\d+)\b.*\btime (\d+)\b", line):
                nodes, ms = int(m.group(1)), int(m.group(2))
            if line.startswith("bestmove"):
                break
        proc.stdin.write("quit\n")
        proc.stdin.flush()
    return nodes, ms


COLUMNS = ["level", "playouts", "temperature", "opponent", "games", "wins", "draws", "losses", "score", "score_low",
           "score_high", "elo_diff", "elo_diff_low", "elo_diff_high", "level_elo", "level_elo_low", "level_elo_high",
           "slowest_move_ms"]


def opponent_label(name: str) -> str:
    """A row's opponent: `strength:N` for a level (its command line is this machine's), else the rung's name."""
    level = player_level(name)
    return name if level is None else f"strength:{level}"


def elo_of(score: float) -> float | None:
    """The Elo difference a score means (logistic), None at 0 or 1 (a sweep bounds it, only its interval)."""
    if score <= 0.0 or score >= 1.0:
        return None
    return -400.0 * math.log10(1.0 / score - 1.0)


def _elo_text(score: float, sweep_bound: str) -> str:
    elo = elo_of(score)
    return sweep_bound if elo is None else f"{round(elo):+d}"


def pairing_rows(batches: list, ladder: Sequence[dict[str, str]] = ()) -> list[dict[str, object]]:
    """One row per (level, opponent) over `batches`, levels ascending, each row from the level's side: W-D-L,
    the score's Wilson interval and the Elo difference it means, the level's Elo from one fit over these games
    and the `ladder` rows (ladder.csv's, random = 0), and the slowest move the level took (ms: far below its
    byoyomi says the playout cap, not the clock, ended its searches)."""
    from dlzero.gating.elo_fit import GameResult, fit_connected, score_interval

    tallies: dict[tuple[int, str], list[int]] = {}
    slowest: dict[int, int] = {}
    games: list[GameResult] = []
    for _, batch in batches:
        a, b = batch.players
        for g in batch.games:
            winner = g.get("winner")
            black_score = 0.5 if winner is None else 1.0 if winner == "black" else 0.0
            a_score = black_score if g["black"] == a else 1.0 - black_score
            games.append(GameResult(opponent_label(a), opponent_label(b), a_score))
            for me, other, mine in ((a, b, a_score), (b, a, 1.0 - a_score)):
                level, below = player_level(me), player_level(other)
                if level is None or (below is not None and below > level):
                    continue  # a game between levels counts once, on the stronger level's row
                t = tallies.setdefault((level, opponent_label(other)), [0, 0, 0])
                t[0 if mine == 1.0 else 1 if mine == 0.5 else 2] += 1
                side_moves = g.get("move_ms") or []
                black_first = " w " not in f" {g['start_sfen']} "  # plies alternate from the side to move
                mine_parity = 0 if (g["black"] == me) == black_first else 1
                times = [ms for i, ms in enumerate(side_moves) if ms is not None and i % 2 == mine_parity]
                if times:
                    slowest[level] = max(slowest.get(level, 0), *times)
    for row in ladder:
        w, d, lo = int(row["wins"]), int(row["draws"]), int(row["losses"])
        games += [GameResult(row["player"], row["opponent"], x) for x in [1.0] * w + [0.5] * d + [0.0] * lo]
    fit = fit_connected(games, pin="random", order=RUNGS).by_player() if games else {}
    near = fit_connected(games, pin=NEAR_PIN, order=RUNGS).by_player() if games else {}
    rows: list[dict[str, object]] = []
    for (level, opponent), (w, d, lo) in sorted(tallies.items(), key=lambda kv: (kv[0][0], _opponent_rank(kv[0][1]))):
        s, low, high = score_interval(w, d, lo)
        rating, close = fit.get(f"strength:{level}"), near.get(f"strength:{level}")
        if rating is None or close is None or rating.reference != "random" or close.reference != NEAR_PIN:
            rating = close = None  # a component the games do not join to random: its zero is not the ladder's
        rows.append({"level": level, "playouts": level_playouts(level),
                     "temperature": f"{level_temperature(level):.3f}",
                     "opponent": opponent, "games": w + d + lo, "wins": w, "draws": d, "losses": lo,
                     "score": f"{s:.3f}", "score_low": f"{low:.3f}", "score_high": f"{high:.3f}",
                     "elo_diff": _elo_text(s, ""), "elo_diff_low": _elo_text(low, "-inf"),
                     "elo_diff_high": _elo_text(high, "+inf"),
                     "level_elo": "" if rating is None else f"{rating.elo:.0f}",
                     "level_elo_low": "" if close is None else f"{rating.elo + close.elo_low - close.elo:.0f}",
                     "level_elo_high": "" if close is None else f"{rating.elo + close.elo_high - close.elo:.0f}",
                     "slowest_move_ms": slowest.get(level, "")})
    return rows


def _opponent_rank(opponent: str) -> tuple[int, int]:
    """Rungs in ladder order, then levels by number: the order a level's rows are listed in."""
    if opponent in RUNGS:
        return 0, RUNGS.index(opponent)
    m = _LABEL.fullmatch(opponent)
    return (1, int(m.group(1))) if m else (2, 0)


def write_csv(path: Path, rows: Sequence[dict[str, object]]) -> None:
    """The rows under COLUMNS' header."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV's rows as dicts (the committed table, or ladder.csv)."""
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def not_monotone(rows: Iterable[dict[str, object]]) -> list[str]:
    """The levels that measurably lose to a lower level: an `L vs strength:M` row (M < L) whose whole score
    interval is under 1/2. Empty: monotone within the intervals."""
    out = []
    for row in rows:
        m = _LABEL.fullmatch(str(row["opponent"]))
        if m and int(m.group(1)) < int(row["level"]) and float(row["score_high"]) < 0.5:
            out.append(f"level {row['level']} scores {row['score']} [{row['score_low']}, {row['score_high']}] "
                       f"against level {m.group(1)}")
    return out


def markdown_table(rows: Sequence[dict[str, object]]) -> list[str]:
    """The CSV as docs/usi-options.md's table, a line per level: its rungs' and the lower levels' W-D-L with
    score and 95 % interval, its Elo on the ladder's scale with interval, and its games."""
    out = ["| level | playouts | temperature | against rungs: W-D-L, score [95 %] | against lower levels: W-D-L, "
           "score [95 %] | Elo (ladder, random = 0) [95 %] | games |", "|---:|---:|---:|---|---|---|---:|"]
    for level in sorted({int(r["level"]) for r in rows}):
        mine = [r for r in rows if int(r["level"]) == level]

        def cell(rs: list[dict[str, object]]) -> str:
            return "; ".join(f"`{r['opponent']}` {r['wins']}-{r['draws']}-{r['losses']}, {r['score']} "
                             f"[{r['score_low']}, {r['score_high']}]" for r in rs) or "-"

        lower = [r for r in mine if str(r["opponent"]).startswith("strength:")]
        rungs = [r for r in mine if r not in lower]
        first = mine[0]
        elo = (f"{int(first['level_elo']):+d} [{int(first['level_elo_low']):+d}, {int(first['level_elo_high']):+d}]"
               if first["level_elo"] != "" else "not joined to the ladder")
        games = sum(int(r["games"]) for r in mine)
        out.append(f"| {level} | {first['playouts']:,} | {float(first['temperature']):.2f} | {cell(rungs)} | "
                   f"{cell(lower)} | {elo} | {games} |")
    return out


def csa_records(batches: list) -> list[tuple[str, str]]:
    """(file name, CSA text) for every stored game, players named `strength:N` or by their rung."""
    import cshogi

    from dlzero.gating.match import MatchRecord

    out = []
    seen: dict[str, int] = {}
    for _, batch in batches:
        a, b = (opponent_label(x) for x in batch.players)
        for g in batch.games:
            board = cshogi.Board(g["start_sfen"])
            moves = []
            for usi in g["moves"].split():
                move = board.move_from_usi(usi)
                moves.append(move)
                board.push(move)
            winner = None if g.get("winner") is None else cshogi.BLACK if g["winner"] == "black" else cshogi.WHITE
            record = MatchRecord(g["game"], g["black"] == batch.players[0], g["start_sfen"], g["opening_plies"],
                                 moves, winner, g["reason"], list(g.get("move_ms") or []))
            stem = re.sub(r"[^A-Za-z0-9_.+=-]", "-", f"{a}--{b}")
            number = seen.get(stem, -1) + 1  # carried and new games of one pairing share the numbering
            seen[stem] = number
            out.append((f"{stem}--{number:03d}.csa", record.csa(a, b)))
    return out


def carried_batches(tar: Path, levels: Iterable[int], byoyomi: int) -> list:
    """The games in an earlier `--games-tar` whose levels are all in `levels` (those whose knobs have not
    changed since), as batches like load_batches' (players named as `level_player` names them now)."""
    import cshogi

    from dlzero.gating.match import read_record

    keep = set(levels)

    def name(label: str) -> str | None:
        m = _LABEL.fullmatch(label)
        if m is None:
            return label
        return level_player(int(m.group(1)), byoyomi) if int(m.group(1)) in keep else None

    out = []
    with tarfile.open(tar, "r:xz") as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            if not member.isfile() or not member.name.endswith(".csa"):
                continue
            text = archive.extractfile(member).read().decode("utf-8")
            labels = [re.search(rf"^N\{side}(.*)$", text, flags=re.MULTILINE) for side in "+-"]
            if None in labels:
                continue
            black, white = (name(m.group(1)) for m in labels)
            if black is None or white is None:
                continue  # a level whose knobs changed
            record = read_record(text, member.name, labels[0].group(1))
            winner = None if record.winner is None else "black" if record.winner == cshogi.BLACK else "white"
            game = {"game": record.index, "black": black, "white": white, "winner": winner,
                    "reason": record.reason, "plies": len(record.moves),
                    "start_sfen": record.start_sfen, "opening_plies": record.opening_plies,
                    "moves": " ".join(cshogi.move_to_usi(m) for m in record.moves), "move_ms": record.move_ms}
            out.append((Path(member.name), SimpleNamespace(players=(black, white), games=[game])))
    return out


def write_tar(path: Path, records: Sequence[tuple[str, str]]) -> None:
    """The CSA records in one tar.xz (one folder, sorted names, fixed times: a rerun on the same games writes
    the same archive)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:xz") as tar:
        for name, text in sorted(records):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"strength-levels/{name}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))


def cfg_for(parallel: int, tolerance: int | None) -> Config:
    """The tiny config (its rating suite and move cap) with `parallel` games at once."""
    overrides = [f"rate.parallel={parallel}"]
    if tolerance is not None:
        overrides.append(f"rate.clock_tolerance_ms={tolerance}")
    return load_config(resolve_config_path("tiny"), overrides)


def parse_deadline(text: str) -> dt.datetime:
    """HH:MM today (UTC) as an aware datetime."""
    hour, minute = (int(x) for x in text.split(":"))
    return dt.datetime.now(dt.UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)


def parse_levels(text: str) -> list[int]:
    """`1-19` or `1,3,5` as a sorted list of levels."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "strength", help="where the games are kept")
    parser.add_argument("--levels", default="1-19", help="levels to measure: 1-19, or 1,5,10")
    parser.add_argument("--byoyomi", type=int, default=5000, help="ms a move for a level (the cap must bind)")
    parser.add_argument("--phases", default="6,12,20", help="games per pairing after each phase")
    parser.add_argument("--start-rung", default="alphabeta:100", choices=RUNGS, help="the first level's rung")
    parser.add_argument("--spans", help="levels played against each other from phase two, e.g. 1,7,13,19")
    parser.add_argument("--dear-level", type=int, default=20,
                        help="from this level up, phase one plays --dear-games against the level below, last")
    parser.add_argument("--dear-games", type=int, default=4, help="see --dear-level")
    parser.add_argument("--chain-games", type=int, default=0,
                        help="after the phases, top up each level's games against the level below to this many")
    parser.add_argument("--parallel", type=int, default=2, help="games played at once")
    parser.add_argument("--tolerance", type=int, help="ms past the byoyomi before a move loses on time")
    parser.add_argument("--deadline", help="UTC HH:MM after which no new game starts")
    parser.add_argument("--check-cap", type=int, metavar="LEVEL",
                        help="search one move at LEVEL and print its playouts and time, then stop")
    parser.add_argument("--report-only", action="store_true", help="play nothing; report the stored games")
    parser.add_argument("--csv", type=Path, help="write the per-pairing table here")
    parser.add_argument("--ladder", type=Path, default=ROOT / "docs" / "benchmarks" / "ladder.csv",
                        help="the ladder's pairings, fitted with these games so levels sit on its Elo scale")
    parser.add_argument("--markdown", action="store_true", help="print the table for docs/usi-options.md")
    parser.add_argument("--games-tar", type=Path, help="write every game as a CSA record into this tar.xz")
    parser.add_argument("--carry", type=Path, metavar="TAR",
                        help="an earlier --games-tar: its games among --carry-levels and rungs join the report")
    parser.add_argument("--carry-levels", default="", help="the levels unchanged since --carry's games, e.g. 7-19")
    args = parser.parse_args(argv)
    if args.check_cap:
        nodes, ms = cap_check(args.check_cap, args.byoyomi)
        print(f"level {args.check_cap}: {nodes} playouts (cap {level_playouts(args.check_cap)}) in {ms} ms "
              f"at byoyomi {args.byoyomi} ms")
        return
    session = Session(args.work, cfg_for(args.parallel, args.tolerance),
                      parse_deadline(args.deadline) if args.deadline else None)
    if not args.report_only:
        try:
            measure(session, parse_levels(args.levels), args.byoyomi, [int(x) for x in args.phases.split(",")],
                    args.start_rung, parse_levels(args.spans) if args.spans else [], args.dear_level,
                    args.dear_games, args.chain_games)
        except Deadline:
            print(f"deadline {args.deadline} UTC reached: no new games", flush=True)
    batches = load_batches(session.rd)[0]
    if args.carry:
        batches += carried_batches(args.carry, parse_levels(args.carry_levels), args.byoyomi)
    ladder = read_csv(args.ladder) if args.ladder and args.ladder.is_file() else []
    rows = pairing_rows(batches, ladder)
    for row in rows:
        print(f"L{row['level']:>2} ({row['playouts']} playouts, T {row['temperature']}) vs {row['opponent']}: "
              f"{row['wins']}-{row['draws']}-{row['losses']}, score {row['score']} [{row['score_low']}, "
              f"{row['score_high']}], Elo diff {row['elo_diff'] or '-'} [{row['elo_diff_low']}, "
              f"{row['elo_diff_high']}]; level Elo {row['level_elo'] or '-'} [{row['level_elo_low']}, "
              f"{row['level_elo_high']}]; slowest move {row['slowest_move_ms']} ms")
    for line in not_monotone(rows) or ["monotone: no level measurably loses to the level below it"]:
        print(line)
    if args.csv:
        write_csv(args.csv, rows)
    if args.markdown:
        print("\n".join(markdown_table(rows)))
    if args.games_tar:
        write_tar(args.games_tar, csa_records(batches))


if __name__ == "__main__":
    main()
