"""A/B learning benchmark (not a test): arms of the tiny loop at equal wall time, rated on one anchored scale.

    # one lane per core, the arms of a lane one after another (never two arms on the same cores):
    python scripts/ab_learning.py run --cpus 0 --seed 1 --arms puct,gumbel,gumbel-katago --minutes 30
    python scripts/ab_learning.py run --cpus 1 --seed 2 --arms puct,gumbel,gumbel-katago --minutes 30
    python scripts/ab_learning.py rate --marks 10,20,30       # models at the time marks vs the anchors
    python scripts/ab_learning.py cross --marks 10,20,30      # and against each other, mark by mark
    python scripts/ab_learning.py report --out docs/benchmarks/ab-learning
    # or, a schedule of marks x anchors in order of importance (the two-hour benchmark, learning-2h.md):
    python scripts/ab_learning.py rate --step 120@alphabeta:1,gpsshogi:depth=4 --step 30,60,90@alphabeta:1

Arms (`ARMS`; any arm + "-gateoff" also sets `gate.mode: off`):
- puct: tiny as shipped (dlshogi's PUCT root with Dirichlet noise, visit counts as targets, SPRT gate;
  int8 self-play and gating since 2026-12-01, fp32 before: ab.json records each run's commit);
- puct-fp32: puct with fp32 self-play and gating (tiny as it was before int8);
- gumbel: `search.algorithm: gumbel` (Gumbel-Top-k root, Sequential Halving, completed-Q targets);
- gumbel-katago: gumbel plus KataGo's switches (global-pooling blocks 1 and 3, opponent-reply head 0.15,
  policy-surprise weighting 0.5);
- puct-int8: puct with int8 self-play and gating (the accuracy gate at 90 % top-1, 0.02 mean |dv|), spelled
  out (tiny's own settings now).
A seed is `train.seed` (generation 0's weights; every arm of one seed starts from the same network); the
self-play games themselves are not seeded, so two runs of one arm and seed still differ.

`run` plays `dlzero loop --config tiny` for `--minutes` per arm in ROOT/ARM-sSEED (a finished run has
ab.json and is skipped when the lane is run again; an unfinished one is an error: delete it and rerun).
`--cpus` pins the lane (and every process it starts) to those cores. `--checkout DIR` runs the loop of
another checkout of dlzero (an older commit, say, as `git worktree add DIR COMMIT` makes it) with the
same arm settings; `--label` names such a run's arm (default ARM@COMMIT), and ab.json records the commit.
The run first checks that the loop would import that checkout's own dlzero, self-play and trainer: an editable
install of another checkout (this one's .venv, say) maps dlzero.selfplay and dlzero.train to its own folders
whatever PYTHONPATH says, so such an arm stops with a message; `--python DIR/.venv/bin/python` gives the
checkout's own environment (commits before 2361ef1 import top-level selfplay/train and pass with this one's).

`rate`: in each finished run, the model that was the run's best at each time mark (the latest promoted
generation made at or before the mark, minutes since generation 0) plays the anchors `--anchors`
(default random, alphabeta:100, alphabeta:1000: fixed players, the same in every run) `--games` games
each at `--playouts`, all arms searching with the same judge (`--judge`, default PUCT: the A/B measures
the networks the arms made, not their play-time search). Games accumulate in ROOT/ARM-sSEED/rating/.

`cross`: the runs' models at the same time mark play each other (every pair of runs, `--games` per
pairing, same judge), kept in ROOT/cross/. Anchors alone cannot tell apart models that all beat the
random mover and all lose to the lowest alpha-beta rung; games between the models can.

`report`: one maximum-likelihood fit over the games of every run against every opponent they name (or only
`--anchors`; random = 0; models named ARM/sSEED/gen-NNNN, anchors shared; `--ladder` adds the measured ladder's
games), written to OUT-elo.csv (arm,
seed, minutes, elo, elo_low, elo_high), OUT.csv (arm, minutes, generation, opponent, wins, draws, losses) and
OUT.png (Elo against minutes per arm: each seed, and the mean over seeds), and a table on stdout.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from learning_benchmark import run_loop  # the same directory: run as python scripts/ab_learning.py

from dlzero.cpu import cpu_flags

ARMS: dict[str, list[str]] = {
    "puct": [],
    "puct-fp32": ["inference.precision=fp32"],
    "gumbel": ["search.algorithm=gumbel"],
    "gumbel-katago": ["search.algorithm=gumbel", "model.global_pool_blocks=[1,3]", "train.aux_reply_weight=0.15",
                      "train.surprise_weight=0.5"],
    # int8 self-play (issue 14): the accuracy gate loosened to what int8 reaches on young networks
    # (93-95 % top-1), so that the arm measures whether the faster, less exact network learns faster
    "puct-int8": ["inference.precision=int8", "inference.quantize.min_top1=0.9",
                  "inference.quantize.max_value_error=0.02"],
}
GATE_OFF = "-gateoff"
ANCHORS = "random,alphabeta:1,alphabeta:3,alphabeta:10,alphabeta:30,alphabeta:100,alphabeta:1000"


def arm_overrides(arm: str) -> list[str]:
    base, off = (arm[: -len(GATE_OFF)], True) if arm.endswith(GATE_OFF) else (arm, False)
    if base not in ARMS:
        raise SystemExit(f"unknown arm '{arm}': one of {', '.join(ARMS)} (each also with '{GATE_OFF}')")
    return [*ARMS[base], *(["gate.mode=off"] if off else [])]


def run_dir(root: Path, arm: str, seed: int) -> Path:
    return root / f"{arm}-s{seed}"


def commit_of(checkout: Path) -> str:
    """The checkout's commit (short hash), or "unknown" outside git."""
    try:
        return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def checkout_modules(checkout: Path) -> tuple[str, ...]:
    """The packages a checkout's loop imports: since 2361ef1 its selfplay/ and train/ install as dlzero.*."""
    setup = checkout / "setup.py"
    mapped = setup.is_file() and "dlzero.selfplay" in setup.read_text(encoding="utf-8")
    return ("dlzero", "dlzero.selfplay", "dlzero.train") if mapped else ("dlzero", "selfplay", "train")


def checkout_env(checkout: Path) -> dict[str, str]:
    """The environment that makes a loop started in `checkout` import that checkout's code first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(checkout.resolve()), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def check_checkout_imports(checkout: Path, python: str) -> None:
    """Stop unless `python`, started in `checkout`, imports every dlzero module of it from it.

    An editable install of another checkout (pip install -e, setuptools' finder) maps dlzero.selfplay,
    dlzero.train and dlzero.configs to that checkout's folders whatever PYTHONPATH says, so a before/after
    would silently run one arm with the other's self-play and trainer. The cure is the checkout's own
    environment (`--python DIR/.venv/bin/python` after `pip install -e DIR` there)."""
    probe = ("import importlib, importlib.util, json\n"
             f"out = {{}}\nfor name in {checkout_modules(checkout)!r}:\n"
             "    try:\n        spec = importlib.util.find_spec(name)\n"
             "    except ModuleNotFoundError:\n        spec = None\n"
             "    out[name] = spec.origin if spec is not None and spec.origin else ''\n"
             "print(json.dumps(out))\n")
    found = subprocess.run([python, "-c", probe], cwd=checkout.resolve(), env=checkout_env(checkout),
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"{python} cannot import dlzero in {checkout}: {found.stderr.strip()[-500:]}")
    home = checkout.resolve()
    foreign = {name: origin or "nowhere" for name, origin in json.loads(found.stdout).items()
               if not origin or home not in Path(origin).resolve().parents}
    if foreign:
        where = ", ".join(f"{name} from {origin}" for name, origin in foreign.items())
        raise SystemExit(f"{python} started in {checkout} imports {where}: give the checkout's own environment "
                         f"with --python (python -m venv {checkout}/.venv && {checkout}/.venv/bin/pip install -e "
                         f"{checkout}), or run from an environment without an editable dlzero")


def play(root: Path, arm: str, seed: int, minutes: float, cpus: str, checkout: Path | None = None,
         label: str = "", python: str = sys.executable) -> None:
    code = commit_of(checkout or Path(__file__).resolve().parents[1])
    name = label or (f"{arm}@{code}" if checkout else arm)
    run = run_dir(root, name, seed)
    if (run / "ab.json").is_file():
        print(f"{run}: finished earlier, skipped", flush=True)
        return
    if run.exists():
        raise SystemExit(f"{run} exists but did not finish (no ab.json): delete it to run this arm again")
    sets = [*arm_overrides(arm), f"train.seed={seed}"]
    extra = [x for s in sets for x in ("--set", s)]
    print(f"{dt.datetime.now():%H:%M:%S} {name} seed {seed}: {minutes:g} min on cpus {cpus or 'all'} "
          f"({cpu_flags()}), code {code}: dlzero loop --config tiny --run {run} {' '.join(extra)}", flush=True)
    started = dt.datetime.now(dt.timezone.utc)
    t0 = time.monotonic()
    saved = os.environ.get("PYTHONPATH")
    if checkout is not None:  # the loop runs in that checkout, and it and its workers import its dlzero
        os.environ["PYTHONPATH"] = checkout_env(checkout)["PYTHONPATH"]
    try:  # scripts/learning_benchmark.py: the loop until the deadline
        status = run_loop(run, minutes, extra, cwd=checkout.resolve() if checkout else None, python=python)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    if status not in (0, -signal.SIGINT, 130, 1) and time.monotonic() - t0 < minutes * 60.0:
        raise SystemExit(f"{name} seed {seed}: the loop failed (exit {status}) before the deadline")
    info = {"arm": name, "seed": seed, "minutes": minutes, "overrides": sets, "cpus": cpus, "cpu": cpu_flags(),
            "code": code, "started": started.isoformat(), "finished": dt.datetime.now(dt.timezone.utc).isoformat()}
    (run / "ab.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")


def finished_runs(root: Path) -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(root.glob("*/ab.json")):
        out.append((path.parent, json.loads(path.read_text(encoding="utf-8"))))
    return out


CPU_CLOCK: dict[str, tuple[Path, str, dt.datetime | None]] = {}  # run name -> (cpu log, column, log start)


def cpu_clock(spec: str, log: str, start: str) -> None:
    """Marks in CPU minutes: `spec` RUN=COLUMN,... names each run's column of `scripts/cpu_by_core.py`'s log."""
    when = dt.datetime.fromisoformat(start) if start else None
    for item in filter(None, spec.split(",")):
        run, _, column = item.partition("=")
        CPU_CLOCK[run] = (Path(log), column, when)


def _wall_minutes(run: Path, mark: float, gen0: dt.datetime) -> float | None:
    """The wall minute (since generation 0) at which `run` had used `mark` CPU minutes by its cpu log, or None
    when it never did. Before the log starts the arm is taken to have had its whole core."""
    path, column, start = CPU_CLOCK[run.name]
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# start "):
        start = dt.datetime.fromisoformat(lines[0][len("# start "):])
    if start is None:
        raise SystemExit(f"{path}: no '# start' line: give --cpu-start")
    pre = (start - gen0).total_seconds()
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    if "seconds" not in (rows[0] if rows else {}):  # a log without its header line
        rows = [dict(zip(("seconds", "cpu0", "cpu1", "other"), line.split(","), strict=True))
                for line in lines if not line.startswith("#")]
    need = mark * 60.0 - pre
    if need <= 0:
        return mark
    prev_t, prev_c = 0.0, 0.0
    for row in rows:
        t, c = float(row["seconds"]), float(row[column])
        if c >= need:
            frac = (need - prev_c) / (c - prev_c) if c > prev_c else 1.0
            return (pre + prev_t + frac * (t - prev_t)) / 60.0
        prev_t, prev_c = t, c
    return None


def generations_at_marks(run: Path, marks: list[float], gate_mode: str) -> dict[float, int]:
    """The run's best model at each mark: the latest promoted generation made at or before it. Marks are
    minutes since generation 0, or CPU minutes of the arm where `cpu_clock` gave the run a cpu log (marks the
    arm never reached are left out)."""
    from dlzero.gating.rating import _created, promoted_generations
    from dlzero.rundir import RunDir

    rd = RunDir.open(run)
    gens = promoted_generations(rd, gate_mode)
    start = _created(rd, 0)
    made = {g: (_created(rd, g) - start).total_seconds() / 60.0 for g in gens}
    out = {}
    for m in marks:
        wall = _wall_minutes(run, m, start) if run.name in CPU_CLOCK else m
        if wall is not None:
            out[m] = max(g for g in gens if made[g] <= wall + 1e-9)
    return out


def rate_runs(root: Path, marks: list[float], anchors: list[str], games: int, playouts: int, judge: str,
              threads: int, only: list[str]) -> None:
    from dlzero.gating.rating import rate
    from dlzero.rundir import RunDir

    for run, _info in finished_runs(root):
        if only and run.name not in only:
            continue
        rd = RunDir.open(run)
        cfg = rd.config()
        at = generations_at_marks(run, marks, cfg.gate.mode)
        cfg.rate.anchors, cfg.rate.games, cfg.rate.playouts = anchors, games, playouts
        cfg.search.algorithm = judge
        cfg.inference.threads = threads
        cfg.inference.precision = "auto"  # the judge plays every arm's networks at full precision
        gens = sorted(set(at.values()))
        print(f"{dt.datetime.now():%H:%M:%S} {run.name}: rating generations {gens} (marks {at})", flush=True)
        report = rate(rd, cfg, gens, progress=False)
        for line in report.problems:
            print(f"warning: {line}")


def parse_steps(steps: list[str]) -> list[tuple[list[float], list[str]]]:
    """`--step MARKS@ANCHORS` arguments, e.g. `60,120@alphabeta:100,gpsshogi:depth=4`, in the order given."""
    out = []
    for step in steps:
        marks, sep, anchors = step.partition("@")
        if not sep or not marks or not anchors:
            raise SystemExit(f"--step '{step}': expected MARKS@ANCHORS, e.g. 60,120@alphabeta:100")
        out.append(([float(m) for m in marks.split(",")], anchors.split(",")))
    return out


def rate_steps(root: Path, steps: list[tuple[list[float], list[str]]], games: int, playouts: int, judge: str,
               threads: int, only: list[str], config: str) -> None:
    """Each step's marks against each step's anchors, step after step, every run's model at a mark against
    one anchor at a time (no anchor-vs-anchor games: the ladder was measured once, `--ladder` in `report`).
    Every arm's games use one config (`config`, with the judge's settings), whatever the arm's own config
    says, so that only the networks differ. Steps in order of importance: a stopped rating keeps what it
    played, and rerunning tops up only what is missing."""
    import copy

    from dlzero.config import load_config
    from dlzero.gating.rating import rate
    from dlzero.rundir import RunDir

    base = load_config(config)
    base.rate.games, base.rate.playouts, base.search.algorithm = games, playouts, judge
    base.inference.threads, base.inference.precision = threads, "auto"
    for marks, anchors in steps:
        for run, _info in finished_runs(root):
            if only and run.name not in only:
                continue
            rd = RunDir.open(run)
            gens = sorted(set(generations_at_marks(run, marks, rd.config().gate.mode).values()))
            for anchor in anchors:
                cfg = copy.deepcopy(base)
                cfg.rate.anchors = [anchor]
                t0 = time.monotonic()
                report = rate(rd, cfg, gens, progress=False)
                print(f"{dt.datetime.now():%H:%M:%S} {run.name}: generations {gens} (marks {marks}) vs {anchor}: "
                      f"{report.played} games in {time.monotonic() - t0:.0f} s", flush=True)


def cross_games(root: Path, marks: list[float], games: int, playouts: int, judge: str, threads: int) -> None:
    """Each pair of runs' models at the same mark play `games` games (topped up, as `rate` does)."""
    import itertools
    import zlib
    from collections import Counter

    from dlzero.data.atomic import atomic_write_text
    from dlzero.gating.match import play_match
    from dlzero.gating.rating import RatingBatch, load_batch_folder, rating_suite, stored_game
    from dlzero.inference import load_model
    from dlzero.player_names import model_generation
    from dlzero.rundir import RunDir

    runs = [run for run, _info in finished_runs(root)]
    if len(runs) < 2:
        raise SystemExit(f"cross needs two finished runs under {root}")
    at = {run.name: generations_at_marks(run, marks, RunDir.open(run).config().gate.mode) for run in runs}
    pairs = sorted({(f"{a.name}/gen-{at[a.name][m]:04d}", f"{b.name}/gen-{at[b.name][m]:04d}")
                    for m in marks for a, b in itertools.combinations(runs, 2)})
    cfg = RunDir.open(runs[0]).config()
    cfg.search.algorithm = judge
    cfg.inference.threads = threads
    cfg.inference.precision = "auto"
    openings, _ = rating_suite(cfg)  # as `rate`'s games: the run's rate.openings, by default rating.txt
    settings = {"playouts": playouts, "judge": judge}
    folder = root / "cross"
    folder.mkdir(exist_ok=True)
    have: Counter[tuple[str, str]] = Counter()
    for _, batch in load_batch_folder(folder)[0]:
        if batch.settings == settings:
            have[tuple(sorted(batch.players))] += len(batch.games)
    for a, b in pairs:
        start = have[tuple(sorted((a, b)))]
        if start >= games:
            continue
        print(f"{dt.datetime.now():%H:%M:%S} {a} vs {b}: {games - start} games", flush=True)
        path = folder / f"{a}--{b}--{start:05d}.json".replace("/", "_")
        batch = RatingBatch((a, b), settings)

        def on_game(game, result, a=a, b=b, batch=batch, path=path) -> None:
            batch.games.append(stored_game(game, a, b))
            atomic_write_text(path, batch.to_json())

        sides = [load_model(RunDir.open(root / run).model_path(model_generation(gen)), cfg.inference)
                 for run, gen in (name.split("/") for name in (a, b))]
        seed = zlib.crc32(f"{a}|{b}".encode())
        try:
            result = play_match(sides[0], sides[1], games - start, cfg, playouts=playouts,
                                parallel=min(games - start, cfg.rate.parallel), openings=openings, seed=seed,
                                opening_offset=start // 2, names=(a, b), on_game=on_game)
        finally:
            for side in sides:
                side.close()
        print(f"  {a} +{result.wins} ={result.draws} -{result.losses} {b}", flush=True)


def ladder_games(path: Path) -> list:
    """The measured ladder's games (`scripts/ladder.py`'s CSV: player, opponent, wins, draws, losses) as the fit
    takes them: they tie the anchors to each other, so a model rated against two rungs is placed consistently."""
    from dlzero.gating.elo_fit import GameResult

    games = []
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for score, key in ((1.0, "wins"), (0.5, "draws"), (0.0, "losses")):
                games += [GameResult(row["player"], row["opponent"], score)] * int(row[key])
    return games


def wdl_rows(root: Path, marks: list[float], playouts: int) -> list[dict]:
    """Each run's model at each mark against each opponent it met at `playouts`: wins, draws, losses."""
    from collections import Counter

    from dlzero.gating.rating import load_batches
    from dlzero.rundir import RunDir, generation_name

    rows = []
    for run, info in finished_runs(root):
        rd = RunDir.open(run)
        batches = [b for _, b in load_batches(rd)[0] if b.settings.get("playouts") == playouts]
        for mark, gen in generations_at_marks(run, marks, rd.config().gate.mode).items():
            me = generation_name(gen)
            tally: dict[str, Counter] = {}
            for batch in batches:
                if me not in batch.players:
                    continue
                for g in batch.games:
                    opponent = g["white"] if g["black"] == me else g["black"]
                    side = "black" if g["black"] == me else "white"
                    outcome = "draws" if g.get("winner") is None else ("wins" if g["winner"] == side else "losses")
                    tally.setdefault(opponent, Counter())[outcome] += 1
            for opponent, c in tally.items():
                rows.append({"arm": info["arm"], "minutes": f"{mark:g}", "generation": gen, "opponent": opponent,
                             "wins": c["wins"], "draws": c["draws"], "losses": c["losses"]})
    return rows


def _fit_all(root: Path, anchors: list[str] | None, playouts: int, ladder: Path | None = None):
    """One fit over every run's stored games at `playouts`, the games between runs (ROOT/cross) and the
    measured ladder's games (`ladder`); models renamed ARM/sSEED/gen-NNNN."""
    from dlzero.gating.elo_fit import fit_ratings
    from dlzero.gating.rating import load_batch_folder, load_batches
    from dlzero.player_names import model_generation
    from dlzero.rundir import RunDir

    games, seen_anchor_pairs = [], set()
    for run, _info in finished_runs(root):
        rd = RunDir.open(run)
        batches, problems = load_batches(rd)
        for p in problems:
            print(f"warning: {p}")
        for _, batch in batches:
            models = [p for p in batch.players if model_generation(p) is not None]
            if models and batch.settings.get("playouts") != playouts:
                continue
            if anchors is not None and any(model_generation(p) is None and p not in anchors for p in batch.players):
                continue
            if not models:  # the anchor ladder is the same players in every run: count each batch once
                key = (tuple(batch.players), json.dumps(batch.games, sort_keys=True))
                if key in seen_anchor_pairs:
                    continue
                seen_anchor_pairs.add(key)

            def name(p: str, run=run) -> str:
                return f"{run.name}/{p}" if model_generation(p) is not None else p

            games += [_result(g, name) for g in batch.games]
    batches, problems = load_batch_folder(root / "cross")
    for p in problems:
        print(f"warning: {p}")
    for _, batch in batches:  # players are already named RUN/gen-NNNN
        if batch.settings.get("playouts") == playouts:
            games += [_result(g, str) for g in batch.games]
    if ladder is not None:
        games += ladder_games(ladder)
    return fit_ratings(games, pin="random")


def _result(game: dict, name):
    """A stored game as the fit takes it, its players renamed by `name`."""
    from dlzero.gating.elo_fit import GameResult

    score = 0.5 if game.get("winner") is None else (1.0 if game["winner"] == "black" else 0.0)
    return GameResult(name(game["black"]), name(game["white"]), score)


def report(root: Path, out: Path, marks: list[float], anchors: list[str] | None, playouts: int,
           title: str = "A/B learning", ladder: Path | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dlzero.data.atomic import atomic_write_png, atomic_write_text
    from dlzero.rundir import RunDir

    ratings = _fit_all(root, anchors, playouts, ladder).by_player()
    rows, cpus = [], set()
    for run, info in finished_runs(root):
        cpus.add(info.get("cpu", "?"))
        at = generations_at_marks(run, marks, RunDir.open(run).config().gate.mode)
        for mark, gen in at.items():
            r = ratings.get(f"{run.name}/gen-{gen:04d}")
            if r is not None:
                rows.append({"arm": info["arm"], "seed": info["seed"], "minutes": f"{mark:g}", "elo": f"{r.elo:.1f}",
                             "elo_low": f"{r.elo_low:.1f}", "elo_high": f"{r.elo_high:.1f}"})
    if not rows:
        raise SystemExit(f"no rated models under {root}: run `rate` first")
    out.parent.mkdir(parents=True, exist_ok=True)
    for path, fields, table in ((out.with_suffix(".csv"), ["arm", "minutes", "generation", "opponent", "wins", "draws",
                                                           "losses"], wdl_rows(root, marks, playouts)),
                                (out.parent / f"{out.name}-elo.csv", ["arm", "seed", "minutes", "elo", "elo_low",
                                                                      "elo_high"], rows)):
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)
        atomic_write_text(path, buf.getvalue())

    known = list(ARMS)
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (known.index(a.removesuffix(GATE_OFF))
                                                           if a.removesuffix(GATE_OFF) in known else len(known), a))
    fig, ax = plt.subplots(figsize=(8, 5))
    print(f"{'arm':<24} {'minutes':>7}  {'mean Elo':>8}   seeds (Elo [95 %])")
    for i, arm in enumerate(arms):
        color = f"C{i}"
        mine = [r for r in rows if r["arm"] == arm]
        for seed in sorted({r["seed"] for r in mine}):
            pts = sorted((float(r["minutes"]), float(r["elo"]), float(r["elo_low"]), float(r["elo_high"]))
                         for r in mine if r["seed"] == seed)
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ax.errorbar(xs, ys, yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]], color=color,
                        alpha=0.35, fmt="o--", capsize=2, linewidth=0.8)
        means = []
        for mark in sorted({float(r["minutes"]) for r in mine}):
            at = [r for r in mine if float(r["minutes"]) == mark]
            means.append((mark, sum(float(r["elo"]) for r in at) / len(at)))
            detail = ", ".join(f"s{r['seed']} {float(r['elo']):+.0f} [{float(r['elo_low']):+.0f}, "
                               f"{float(r['elo_high']):+.0f}]" for r in at)
            print(f"{arm:<24} {mark:>7g}  {means[-1][1]:>+8.0f}   {detail}")
        ax.plot([m[0] for m in means], [m[1] for m in means], "o-", color=color, linewidth=2.2,
                label=f"{arm} (mean of seeds)")
    met = {r["opponent"] for r in wdl_rows(root, marks, playouts)}  # lines for the opponents the models met
    for name in sorted(met if anchors is None else anchors, key=lambda n: ratings[n].elo if n in ratings else 0):
        if name in ratings and name != "random":
            ax.axhline(ratings[name].elo, color="grey", linestyle=":", linewidth=0.8)
            ax.annotate(name, (0.01, ratings[name].elo), xycoords=("axes fraction", "data"), fontsize=7,
                        color="grey", va="bottom")
    ax.set_xlabel("minutes of the tiny loop (one core per arm)")
    ax.set_ylabel("Elo (random mover = 0)")
    ax.set_title(f"{title}, anchored (CPU: {', '.join(sorted(cpus))})", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    atomic_write_png(out.with_suffix(".png"), fig)
    print(f"wrote {out.with_suffix('.csv')} (wins, draws, losses), {out.name}-elo.csv and {out.with_suffix('.png')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="runs/ab", help="folder of the arms' run directories")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run", help="play the arms of one lane, one after another")
    p.add_argument("--arms", default="puct,gumbel,gumbel-katago")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--cpus", default="", help="pin this lane to these cores, e.g. 0 or 0,1 (default: all)")
    p.add_argument("--checkout", default="", help="run the loop of this checkout of dlzero (default: this one)")
    p.add_argument("--label", default="", help="the arm's name in the results (default: ARM, or ARM@COMMIT)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter of the loop (with --checkout: that checkout's own environment)")
    for name in ("rate", "cross", "report"):
        p = sub.add_parser(name)
        p.add_argument("--marks", default="10,20,30", help="minutes since generation 0")
        p.add_argument("--anchors", default=None if name == "report" else ANCHORS,
                       help="report: fit only games against these (default: every opponent the games name)")
        p.add_argument("--playouts", type=int, default=32, help="playouts per move of the rated models")
        if name in ("rate", "cross"):
            p.add_argument("--games", type=int, default=10, help="games per pairing (even)")
            p.add_argument("--judge", default="puct", choices=("puct", "gumbel"), help="search of the rated models")
            p.add_argument("--threads", type=int, default=1)
            p.add_argument("--cpus", default="")
        if name == "rate":
            p.add_argument("--only", default="", help="comma-separated run names (ARM-sSEED) to rate (default: all)")
            p.add_argument("--step", action="append", default=[],
                           help="MARKS@ANCHORS, repeatable, played in order (instead of --marks x --anchors): "
                           "the models at those marks against those anchors, one anchor at a time")
            p.add_argument("--config", default="configs/tiny.yaml",
                           help="the config file every arm's rating games use (--step)")
        if name in ("rate", "report"):
            p.add_argument("--cpu-log", default="", help="scripts/cpu_by_core.py's log: marks become CPU minutes")
            p.add_argument("--cpu-columns", default="", help="RUN=COLUMN,... (e.g. before-s1=cpu0,after-s1=cpu1)")
            p.add_argument("--cpu-start", default="", help="the log's start (ISO) if it has no '# start' line")
        if name == "report":
            p.add_argument("--ladder", default="", help="the measured ladder's CSV (docs/benchmarks/ladder.csv): its "
                           "games join the fit and tie the anchors together")
            p.add_argument("--out", default="docs/benchmarks/ab-learning")
            p.add_argument("--title", default="A/B learning", help="the plot's title")
    args = parser.parse_args()
    root = Path(args.root)
    if getattr(args, "cpus", ""):
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    if args.cmd == "run":
        for arm in args.arms.split(","):
            arm_overrides(arm)  # every arm name checked before the first one runs
        root.mkdir(parents=True, exist_ok=True)
        if args.label and "," in args.arms:
            raise SystemExit("--label names one arm: give one arm with it")
        checkout = Path(args.checkout) if args.checkout else None
        if checkout is not None and not (checkout / "dlzero" / "cli.py").is_file():
            raise SystemExit(f"{checkout} is not a dlzero checkout (no dlzero/cli.py)")
        if checkout is not None:
            check_checkout_imports(checkout, args.python)
        for arm in args.arms.split(","):
            play(root, arm, args.seed, args.minutes, args.cpus, checkout, args.label, args.python)
        return
    if getattr(args, "cpu_log", ""):
        cpu_clock(args.cpu_columns, args.cpu_log, args.cpu_start)
    marks = [float(m) for m in args.marks.split(",")]
    anchors = args.anchors.split(",") if args.anchors else None
    if args.cmd == "rate" and args.step:
        rate_steps(root, parse_steps(args.step), args.games, args.playouts, args.judge, args.threads,
                   [x for x in args.only.split(",") if x], args.config)
    elif args.cmd == "rate":
        rate_runs(root, marks, anchors, args.games, args.playouts, args.judge, args.threads,
                  [x for x in args.only.split(",") if x])
    elif args.cmd == "cross":
        cross_games(root, marks, args.games, args.playouts, args.judge, args.threads)
    else:
        report(root, Path(args.out), marks, anchors, args.playouts, args.title,
               Path(args.ladder) if args.ladder else None)


if __name__ == "__main__":
    main()
