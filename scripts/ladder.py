"""Measure the rating ladder itself (not a test): its rungs against each other, fitted with random = 0.

    nice -n 10 python scripts/ladder.py --work runs/ladder --out docs/benchmarks/ladder

The rungs are `rate.anchors` names in order of strength (default `RUNGS`, ordered by short probe
matches); each rung plays the next one `--games` games (colour-swapped pairs from the rating suite,
`rate.openings`, as `dlzero rate`'s games; `gate.max_moves` from `--config`), plus the `--extra`
pairings. The games are kept in WORK as a run directory's rating/ folder (`dlzero rate`'s batch files),
so a rerun only plays what is missing and a larger `--games` tops every pairing up. Adjacent rungs
should score 20-80 % against each other: a sweep (20-0) says only that the gap is large, so the rungs
are spaced to avoid them.

The report puts what the games say first: every pairing's W-D-L and score with its 95 % Wilson
interval. Then `dlzero.gating.elo_fit.fit_connected`: one maximum-likelihood fit per group of rungs
connected by informative pairings (not sweeps), `rate.prior_draws` virtual draws per pairing, with
random at 0 where it is connected and else `REFERENCE` (else the weakest rung of the group); a rung of
no informative pairing gets no Elo, only its W-D-L.

Writes OUT.csv (one row per pairing: player = the stronger rung by the order, opponent, wins, draws,
losses from the player's side, then score, score_low, score_high (Wilson, 95 %) and informative (1: not
a sweep)) and OUT.md (the command, the date, the machine's CPU model and flags, the load while it ran,
the engines' versions, the pairings and the fitted ladder).

Why a script and not `dlzero rate`: `dlzero rate` fits a run's models and anchors jointly, each run
from its own games, and never takes an anchor's Elo as fixed; this script measures where the rungs sit
once, so a reader can translate "+600 on the anchored scale" into "300 below GPS Shogi at depth 4".
Engines with a byoyomi search for wall-clock time, so their rungs drift with the machine's speed and
load; `nodes=N` rungs do not.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import io
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.commands.common import resolve_config_path  # noqa: E402
from dlzero.config import Config, load_config  # noqa: E402
from dlzero.data.atomic import atomic_write_text  # noqa: E402
from dlzero.gating.elo_fit import GameResult, fit_connected, score_interval  # noqa: E402
from dlzero.gating.rating import load_batches, rate  # noqa: E402
from dlzero.play import RANDOM  # noqa: E402
from dlzero.play.registry import PlayContext, build_player  # noqa: E402
from dlzero.play.usi_client import UsiClientError  # noqa: E402
from dlzero.player_names import parse_anchor  # noqa: E402
from dlzero.rundir import RunDir  # noqa: E402

FS = "fairy-stockfish:skill={}:byoyomi={}"
# Weakest first, as probe matches ordered them (2026-12-02, 4 games each). Fairy-Stockfish's Skill Level
# is steep: at -5 it lost 0-4 to alphabeta:1, at -4 and -3 it won 4-0, at -2 it went 2-2 with
# alphabeta:100, at 0 6-14 with alphabeta:1000 over 20. alphabeta:30 and :300, Skill -5, 2 and 5 and Skill
# 20 at 300 and 1000 ms bridge pairings that went 20-0 in earlier passes (EXTRA keeps those); GPS Shogi at
# depth 5 took 444 s for two games on the loaded 2-core machine and is left out.
# Closing the sweeps of the 2026-12-02 pass (Skill 20 at 100 -> 300 -> 1000 ms went 20-0 twice): Skill 20 at
# 130, 200 and 500 ms. Fairy-Stockfish keeps ~75 ms of a byoyomi back (measured: `go byoyomi 100` returns in
# ~25 ms at depth 8-9, 130 in ~55, 200 in ~115, 300 in ~210, 500 in ~420, 1000 in 450-930), so these rungs
# roughly double the thinking time from one to the next where 100 -> 300 was ~9x and 300 -> 1000 ~4x. Skill
# 15 is not needed: Skill 5, 10 and 20 at 100 ms are within ~60 Elo. GPS Shogi below depth 4 cannot be a
# rung: gpsusi's LimitDepth is 4..10, and a byoyomi under ~0.5 s does not cut depth 4 short (it answered a
# `go byoyomi 100` in 0.5-0.6 s at depth 4, the same as with 10 s). Nothing sits between random and Skill
# -20 (20-0): random wins no game against any rung, so it is never connected (the report says so).
RUNGS = ["random", FS.format(-20, 100), FS.format(-10, 100), FS.format(-5, 100), "alphabeta:1", "alphabeta:10",
         "alphabeta:30", "alphabeta:100", "alphabeta:300", "alphabeta:1000", FS.format(0, 100), FS.format(2, 100),
         FS.format(5, 100), FS.format(10, 100), FS.format(20, 100), FS.format(20, 130), FS.format(20, 200),
         FS.format(20, 300), FS.format(20, 500), FS.format(20, 1000), "gpsshogi:depth=4"]
EXTRA = ["random,alphabeta:1", f"{FS.format(-10, 100)},alphabeta:1", "alphabeta:10,alphabeta:100",
         "alphabeta:100,alphabeta:1000", f"{FS.format(0, 100)},{FS.format(10, 100)}",
         f"{FS.format(0, 100)},{FS.format(5, 100)}", f"{FS.format(20, 100)},{FS.format(20, 1000)}",
         f"{FS.format(20, 100)},gpsshogi:depth=4"]
REFERENCE = "alphabeta:1"  # the zero where random is not connected: the lowest rung clear of random's sweeps
CSV_COLUMNS = ["player", "opponent", "wins", "draws", "losses", "score", "score_low", "score_high", "informative"]
NOTES = "<!-- notes: written by hand below this line; scripts/ladder.py keeps them -->"


def cpu_line() -> tuple[str, str]:
    """(model name, flags) of the first CPU in /proc/cpuinfo."""
    model = flags = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "?":
                model = value.strip()
            elif key.strip() == "flags" and flags == "?":
                flags = value.strip()
    except OSError:
        pass
    return model, flags


def engine_versions(rungs: list[str]) -> dict[str, str]:
    """What each engine rung's program calls itself (`id name`), by anchor name."""
    out = {}
    for name in rungs:
        parsed = parse_anchor(name)
        if not parsed.is_engine:
            continue
        opponent = build_player(parsed, PlayContext(Config()))
        try:
            opponent.engine.start()
            out[name] = opponent.engine.id_name
        except UsiClientError as exc:
            out[name] = f"? ({exc})"
        finally:
            opponent.close()
    return out


def tally(rd: RunDir, pairs: list[tuple[str, str]], rungs: list[str]) -> tuple[list[dict], list[GameResult]]:
    """Per pairing its wins, draws and losses from the player's side, its score with the 95 % Wilson interval
    and whether it is informative (not a sweep), and every stored game. The pairings
    of `pairs` come first, as (player, opponent); any other stored pairing follows, its player the rung
    later in `rungs` (a pairing of an earlier measurement whose rungs have since been bridged)."""
    order = {name: i for i, name in enumerate(rungs)}
    cells = {pair: [0, 0, 0] for pair in pairs}
    games: list[GameResult] = []
    for _, batch in load_batches(rd)[0]:
        a, b = batch.players
        if (a, b) not in cells and (b, a) not in cells:
            cells[(a, b) if order.get(a, -1) > order.get(b, -1) else (b, a)] = [0, 0, 0]
        player, opponent = (a, b) if (a, b) in cells else (b, a)
        for g in batch.games:
            winner = g.get("winner")
            score_black = 0.5 if winner is None else (1.0 if winner == "black" else 0.0)
            games.append(GameResult(g["black"], g["white"], score_black))
            won = winner is not None and g[winner] == player
            cells[(player, opponent)][0 if won else (1 if winner is None else 2)] += 1
    rows = []
    for (p, o), (w, d, lo) in cells.items():
        score, low, high = score_interval(w, d, lo)
        rows.append({"player": p, "opponent": o, "wins": w, "draws": d, "losses": lo, "score": f"{score:.3f}",
                     "score_low": f"{low:.3f}", "score_high": f"{high:.3f}",
                     "informative": int(w + d > 0 and lo + d > 0)})
    return rows, games


def report_tables(rows: list[dict], games: list[GameResult], rungs: list[str], prior_draws: float) -> list[str]:
    """The report's Markdown, what the games say first: every pairing (`tally`'s rows) with its W-D-L, score,
    Wilson interval and whether it is informative; then each group of rungs connected by informative
    pairings with its Elo under its prior and zero (random where connected, else `REFERENCE`, else the
    group's weakest rung); then the rungs of no informative pairing, with their W-D-L and no Elo."""
    fit = fit_connected(games, pin=RANDOM, prior_draws=prior_draws, order=[REFERENCE, *rungs])
    lines = ["Pairings (`ladder.csv`; from the player's side, the score's 95 % interval is Wilson's):", "",
             "| player | opponent | W-D-L | score | 95 % interval | informative |", "|---|---|---|---:|---|---|"]
    lines += [f"| `{r['player']}` | `{r['opponent']}` | {r['wins']}-{r['draws']}-{r['losses']} | {r['score']} | "
              f"[{r['score_low']}, {r['score_high']}] | {'yes' if r['informative'] else 'no: a sweep'} |" for r in rows]
    groups: dict[str, list] = {}
    for r in fit.ratings:
        groups.setdefault(r.reference, []).append(r)
    for reference, members in groups.items():
        note = "" if reference == RANDOM else f"; not connected to {RANDOM} by informative pairings"
        lines += ["", f"{fit.label(reference)}: one maximum-likelihood fit over the {len(members)} rungs' games "
                  f"with each other (`dlzero.gating.elo_fit.fit_connected`){note}.", "",
                  "| rung | Elo | 95 % interval | games fitted | score |", "|---|---:|---|---:|---:|"]
        for r in sorted(members, key=lambda r: r.elo):
            interval = "(pinned)" if r.player == reference else f"[{round(r.elo_low):+d}, {round(r.elo_high):+d}]"
            lines.append(f"| `{r.player}` | {round(r.elo):+d} | {interval} | {r.games} | {r.score:.3f} |")
    if fit.unrated:
        lines += ["", "Not connected (sweeps only), so no Elo: "
                  + "; ".join(f"`{p}` {'-'.join(map(str, fit.record(p)))}" for p in fit.unrated)
                  + " (W-D-L over all its games)."]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rungs", default=",".join(RUNGS), help="comma-separated anchor names, weakest first")
    ap.add_argument("--extra", action="append", default=None, metavar="A,B",
                    help=f"a pairing besides the neighbours (repeatable; default {EXTRA})")
    ap.add_argument("--games", type=int, default=20, help="games per pairing (even; tops up stored games)")
    ap.add_argument("--config", default="tiny", help="config for gate.max_moves, rate.openings, prior draws")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "ladder", help="where the games are kept")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "ladder", help="OUT.csv, OUT.md")
    ap.add_argument("--fit-only", action="store_true", help="play nothing: tally and fit the stored games")
    args = ap.parse_args()

    rungs = [r.strip() for r in args.rungs.split(",") if r.strip()]
    extra = [tuple(x.split(",")) for x in (EXTRA if args.extra is None else args.extra)]
    cfg = load_config(resolve_config_path(args.config), [f"rate.games={args.games}"])
    for name in rungs + [n for pair in extra for n in pair]:
        try:
            parse_anchor(name)  # a bad name fails now, before any game
        except ValueError as exc:
            sys.exit(f"ladder.py: {exc}")
    pairs = [(hi, lo) for lo, hi in zip(rungs[:-1], rungs[1:], strict=True)] + [(b, a) for a, b in extra]
    if not any(RANDOM in pair for pair in pairs):
        # random is the floor every rating names (`dlzero rate` pins it): the ladder says where it sits, or
        # that no informative pairing reaches it
        sys.exit(f"ladder.py: the ladder starts at '{RANDOM}' pinned at 0, so it must be a rung (the "
                 "weakest) or in an --extra pairing; to play two engines alone, use `dlzero rate` or add "
                 f"--rungs {RANDOM},...")
    rd = RunDir.open(args.work) if (args.work / "config.yaml").exists() else RunDir.create(args.work, cfg)

    load = [os.getloadavg()]
    start = time.monotonic()
    if not args.fit_only:
        for hi, lo in pairs:  # each pairing as a two-rung ladder: `dlzero rate`'s top-up, storage and engines
            one = dataclasses.replace(cfg, rate=dataclasses.replace(cfg.rate, anchors=[lo, hi]))
            report = rate(rd, one, [], progress=sys.stderr.isatty())
            load.append(os.getloadavg())
            if report.played:
                print(f"{hi} vs {lo}: {report.played} games played", flush=True)
    wall = time.monotonic() - start
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)

    rows, games = tally(rd, pairs, rungs)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".csv"), buf.getvalue())

    model, flags = cpu_line()
    lines = [
        "# The rating ladder, measured",
        "",
        f"Date: {dt.date.today().isoformat()}. Machine: {os.cpu_count()} cores, {model}; shared with other jobs "
        f"(load average {min(x[0] for x in load):.1f}-{max(x[0] for x in load):.1f} while it ran).",
        "",
        "```",
        f"nice -n 10 python scripts/ladder.py --games {args.games} --config {args.config}"
        + (f" --rungs {args.rungs}" if args.rungs != ",".join(RUNGS) else ""),
        "```",
        "",
        f"{len(games)} games, gate.max_moves {cfg.gate.max_moves}; this session {wall / 60:.0f} min wall, "
        f"{cpu / 60:.0f} min CPU (engines included).",
        "",
        *report_tables(rows, games, rungs, cfg.rate.prior_draws),
    ]
    versions = engine_versions(rungs)
    if versions:
        kinds = {f"{parse_anchor(n).kind}: {v}" for n, v in versions.items()}  # one line per program
        lines += ["", "Engines (`id name`): " + "; ".join(sorted(kinds)) + "."]
    lines += ["", f"CPU flags: {flags}", "", NOTES]
    md = args.out.with_suffix(".md")
    kept = md.read_text(encoding="utf-8").partition(NOTES)[2] if md.is_file() else ""
    atomic_write_text(md, "\n".join(lines) + kept)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
