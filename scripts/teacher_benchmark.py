"""Teacher benchmark (issue 22; not a test): a student distilled from a teacher, then self-play on top, rated.

    python scripts/teacher_benchmark.py --root runs/teacher-bench teach --positions 500000 --stage-minutes 60
    python scripts/teacher_benchmark.py --root runs/teacher-bench selfplay --minutes 60 --teacher-fraction 0.5
    python scripts/teacher_benchmark.py --root runs/teacher-bench rate --games 20 --playouts 400
    python scripts/teacher_benchmark.py --root runs/teacher-bench report --out docs/benchmarks/teacher

Stage `teacher`: `dlzero teach` labels `--positions` positions of the teacher's own games (`--workers`
processes) into ROOT/teacher.hcpe3, then `dlzero loop --init-from ROOT/teacher.hcpe3 --init-steps S
--generations 0` trains generation 0 of the run ROOT/run on it (`--init-minutes M` for M minutes;
`--stage-minutes M`: for what the labelling left of M). Its minutes are the wall time of both.
Stage `teacher+selfplay`: `dlzero loop` continues that run for `--minutes` (SIGINT at the deadline; the
loop resumes, so a stopped stage is rerun with the minutes left), and its best model at the end is the
stage's model. ROOT/stages.json records what each stage did (commands, minutes, positions, generation).

`rate` plays each stage's model against each anchor on its own (no anchor-vs-anchor games), `--games`
games at `--playouts` playouts, from `--openings` (default: configs/openings/rating.txt, which the
teacher's games never start from; the teacher's own games start from gate.txt, so `--openings
configs/openings/gate.txt` shows what its book is worth); games
accumulate in ROOT/run/rating/, so a rerun tops up what is missing. `report` writes OUT.csv (stage,
minutes, opening suite, opponent, wins, draws, losses: games from another suite, e.g. gate.txt before
rating.txt existed, are their own rows), OUT.png (each stage's score against each opponent, 95 %
intervals) and prints a Markdown table for OUT.md.
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime as dt
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from learning_benchmark import run_loop

from dlzero.cpu import cpu_flags
from dlzero.gating.elo_fit import score_interval  # the score's 95 % Wilson interval, as every rating table

STAGES = ("teacher", "teacher+selfplay")
ANCHORS = ("alphabeta:1000,fairy-stockfish:skill=0:byoyomi=100,fairy-stockfish:skill=10:byoyomi=100,"
           "gpsshogi:depth=4,miniosl:sample=12")


def log(text: str) -> None:
    print(f"{dt.datetime.now():%H:%M:%S} {text}", flush=True)


def read_stages(root: Path) -> dict:
    path = root / "stages.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def write_stages(root: Path, stages: dict) -> None:
    from dlzero.data.atomic import atomic_write_text

    atomic_write_text(root / "stages.json", json.dumps(stages, indent=2) + "\n")


def best_generation(run: Path) -> int:
    from dlzero.rundir import RunDir

    best = RunDir.open(run).best()
    if best is None:
        raise SystemExit(f"{run}: no promoted model yet")
    return best.generation


def stage_teacher(root: Path, args: argparse.Namespace) -> None:
    """Label, then train generation 0: the minutes of both are the stage's minutes."""
    stages = read_stages(root)
    if "teacher" in stages:
        raise SystemExit(f"{root}: the teacher stage is done ({stages['teacher']['minutes']:.1f} min); "
                         "remove stages.json and the run to redo it")
    data = root / "teacher.hcpe3"
    teach = [sys.executable, "-m", "dlzero.cli", "teach", "--teacher", args.teacher, "--positions",
             str(args.positions), "--workers", str(args.workers), "--out", str(data), "--quiet"]
    if (root / "teacher.hcpe3.parts").is_dir():
        log("warning: teacher.hcpe3.parts exists: the parts made earlier are reused, and their labelling time "
            "is not in this stage's minutes")
    log(f"{cpu_flags()}: {' '.join(teach[2:])}")
    t0 = time.monotonic()
    subprocess.run(teach, check=True)
    label_s = time.monotonic() - t0
    extra = ["--init-from", str(data), *warm_start_length(args, label_s), "--generations", "0",
             *[f"--set={s}" for s in args.set]]
    log(f"labelled in {label_s / 60:.1f} min; dlzero loop --config tiny --run {root / 'run'} {' '.join(extra)}")
    t1 = time.monotonic()
    status = run_loop(root / "run", 24 * 60.0, extra)
    if status != 0:
        raise SystemExit(f"the warm start failed (exit status {status})")
    train_s = time.monotonic() - t1
    from dlzero.data.hcpe3 import read_hcpe3

    positions = sum(len(m.candidates) > 0 for g in read_hcpe3(data) for m in g.moves)  # the opening's plies: no label
    stages["teacher"] = {"minutes": (label_s + train_s) / 60.0, "label_minutes": label_s / 60.0,
                         "train_minutes": train_s / 60.0, "positions": positions, "teacher": args.teacher,
                         "init": extra[2:4], "sets": args.set, "generation": 0, "cpu": cpu_flags(),
                         "commands": [" ".join(teach[2:]), "dlzero loop --config tiny " + " ".join(extra)]}
    write_stages(root, stages)
    log(f"teacher stage: {positions} positions, {label_s / 60:.1f} + {train_s / 60:.1f} min")


def stage_selfplay(root: Path, args: argparse.Namespace) -> None:
    """The loop from generation 0 on for the minutes left of `--minutes`; the best model at the end."""
    stages = read_stages(root)
    if "teacher" not in stages:
        raise SystemExit("run the teacher stage first")
    done = stages.get("teacher+selfplay", {}).get("selfplay_minutes", 0.0)
    left = args.minutes - done
    if left <= 0.05:
        raise SystemExit(f"the self-play stage is done ({done:.1f} min)")
    extra = [*([f"--teacher-fraction={args.teacher_fraction}"] if args.teacher_fraction is not None else []),
             *[f"--set={s}" for s in args.set]]
    log(f"{cpu_flags()}: dlzero loop --config tiny --run {root / 'run'} {' '.join(extra)} for {left:.1f} min")
    t0 = time.monotonic()
    run_loop(root / "run", left, extra)
    done += (time.monotonic() - t0) / 60.0
    gen = best_generation(root / "run")
    stages["teacher+selfplay"] = {"minutes": stages["teacher"]["minutes"] + done, "selfplay_minutes": done,
                                  "generation": gen, "teacher_fraction": args.teacher_fraction,
                                  "sets": args.set, "cpu": cpu_flags(),
                                  "commands": ["dlzero loop --config tiny " + " ".join(extra)]}
    write_stages(root, stages)
    log(f"self-play stage: {done:.1f} min, best model generation {gen}")


def stage_rate(root: Path, args: argparse.Namespace) -> None:
    """Each stage's model against each anchor alone: no anchor-vs-anchor games (the ladder has those)."""
    from dlzero.gating.rating import rate
    from dlzero.rundir import RunDir

    stages = read_stages(root)
    rd = RunDir.open(root / "run")
    base = rd.config()
    base.rate.games, base.rate.playouts = args.games, args.playouts
    base.inference.threads = args.threads
    base.rate.openings = args.openings
    gens = sorted({s["generation"] for name, s in stages.items() if name in STAGES})
    for anchor in args.anchors.split(","):
        cfg = copy.deepcopy(base)
        cfg.rate.anchors = [anchor]
        t0 = time.monotonic()
        report = rate(rd, cfg, gens, progress=not args.quiet)
        log(f"generations {gens} vs {anchor}: {report.played} games in {time.monotonic() - t0:.0f} s")
        for line in report.problems:
            print(f"warning: {line}")


def tally(root: Path, playouts: int) -> list[dict]:
    """Each stage's model against each opponent it met at `playouts`, per opening suite: wins, draws, losses.
    A batch stored before the suite was recorded was played from gate.txt (`dlzero.gating.rating`)."""
    from dlzero.gating.rating import load_batches
    from dlzero.rundir import RunDir, generation_name

    stages = read_stages(root)
    batches = [b for _, b in load_batches(RunDir.open(root / "run"))[0] if b.settings.get("playouts") == playouts]
    rows = []
    for stage in STAGES:
        if stage not in stages:
            continue
        me = generation_name(stages[stage]["generation"])
        counts: dict[tuple[str, str], Counter] = {}
        for batch in batches:
            if me not in batch.players:
                continue
            suite = str(batch.settings.get("openings", "gate.txt")).split(":")[0]
            for g in batch.games:
                side = "black" if g["black"] == me else "white"
                opponent = g["white"] if side == "black" else g["black"]
                outcome = "draws" if g.get("winner") is None else ("wins" if g["winner"] == side else "losses")
                counts.setdefault((suite, opponent), Counter())[outcome] += 1
        for (suite, opponent), c in counts.items():
            rows.append({"stage": stage, "minutes": f"{stages[stage]['minutes']:.1f}", "openings": suite,
                         "opponent": opponent, "wins": c["wins"], "draws": c["draws"], "losses": c["losses"]})
    return rows


def _tick(opponent: str) -> str:
    """A short axis label: `FSF skill=10` over `100 ms` for fairy-stockfish:skill=10:byoyomi=100."""
    name, _, byoyomi = opponent.replace("fairy-stockfish:", "FSF ").partition(":byoyomi=")
    return f"{name}\n{byoyomi} ms" if byoyomi else name


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    opponents = list(dict.fromkeys(r["opponent"] for r in rows))
    suites = list(dict.fromkeys(r["openings"] for r in rows))
    series = [(s, o) for s in STAGES for o in suites if any(r["stage"] == s and r["openings"] == o for r in rows)]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(1, len(series))
    for i, (stage, suite) in enumerate(series):
        xs, ys, lo, hi = [], [], [], []
        for j, opp in enumerate(opponents):
            r = next((r for r in rows if r["stage"] == stage and r["openings"] == suite and r["opponent"] == opp),
                     None)
            if r is None:
                continue
            p, a, b = score_interval(int(r["wins"]), int(r["draws"]), int(r["losses"]))
            xs.append(j + (i - (len(series) - 1) / 2) * width)
            ys.append(p)
            lo.append(p - a)
            hi.append(b - p)
        minutes = next(r["minutes"] for r in rows if r["stage"] == stage)
        label = f"{stage} ({minutes} min)" + (f", {suite}" if len(suites) > 1 else "")
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=label)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(opponents)))
    ax.set_xticklabels([_tick(o) for o in opponents], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("student's score (95 % interval)")
    ax.set_title("student distilled from a teacher, then self-play (2-core CPU)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=110)


def report(root: Path, args: argparse.Namespace) -> None:
    rows = tally(root, args.playouts)
    if not rows:
        raise SystemExit(f"{root}: no games at {args.playouts} playouts yet")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.with_suffix(".csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["stage", "minutes", "openings", "opponent", "wins", "draws", "losses"])
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, out)
    print("| stage | minutes | openings | opponent | W-D-L | score | 95 % interval |\n"
          "|---|---:|---|---|---|---:|---|")
    for r in rows:
        p, a, b = score_interval(int(r["wins"]), int(r["draws"]), int(r["losses"]))
        print(f"| {r['stage']} | {r['minutes']} | {r['openings']} | `{r['opponent']}` | "
              f"{r['wins']}-{r['draws']}-{r['losses']} | {p:.2f} | [{a:.2f}, {b:.2f}] |")
    print(f"\nwrote {out.with_suffix('.csv')} and {out.with_suffix('.png')}")


START_MINUTES = 1.5  # the warm start's own overhead outside its timed training: loading, held-out evaluation


def warm_start_length(args: argparse.Namespace, label_s: float) -> list[str]:
    """The warm start's `--init-steps S` or `--init-minutes M` flags: with `--stage-minutes` the training
    gets what the labelling left of the stage, less START_MINUTES."""
    if args.stage_minutes is not None:
        minutes = args.stage_minutes - label_s / 60.0 - START_MINUTES
        if minutes < 1.0:
            raise SystemExit(f"the labelling took {label_s / 60:.1f} of the stage's {args.stage_minutes} minutes: "
                             "no time is left to train")
        return ["--init-minutes", f"{minutes:.2f}"]
    if args.init_minutes is not None:
        return ["--init-minutes", str(args.init_minutes)]
    return ["--init-steps", str(args.init_steps)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=Path("runs/teacher-bench"))
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("teach", help="stage `teacher`: label, then train generation 0")
    t.add_argument("--teacher", default="miniosl")
    t.add_argument("--positions", type=int, default=1_000_000)
    t.add_argument("--workers", type=int, default=2)
    length = t.add_mutually_exclusive_group()
    length.add_argument("--init-steps", type=int, default=9000)
    length.add_argument("--init-minutes", type=float, help="train generation 0 for this many minutes")
    length.add_argument("--stage-minutes", type=float,
                        help="the whole stage's minutes: generation 0 trains for what the labelling left")
    s = sub.add_parser("selfplay", help="stage `teacher+selfplay`: the loop on top for --minutes")
    s.add_argument("--minutes", type=float, default=60.0)
    s.add_argument("--teacher-fraction", type=float, default=None)
    for q in (t, s):
        q.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                       help="config override for the run (repeatable)")
    r = sub.add_parser("rate", help="each stage's model against each anchor")
    r.add_argument("--anchors", default=ANCHORS)
    r.add_argument("--games", type=int, default=20)
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--openings", default="",
                   help="opening suite (rate.openings; default: the rating suite, configs/openings/rating.txt)")
    r.add_argument("--quiet", action="store_true")
    o = sub.add_parser("report", help="OUT.csv, OUT.png and a Markdown table")
    o.add_argument("--out", default="docs/benchmarks/teacher")
    for q in (r, o):
        q.add_argument("--playouts", type=int, default=400)
    args = p.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    {"teach": stage_teacher, "selfplay": stage_selfplay, "rate": stage_rate, "report": report}[args.cmd](
        args.root, args)


if __name__ == "__main__":
    main()
