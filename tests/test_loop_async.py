"""`dlzero loop --mode async`: self-play keeps playing while generations are trained beside it."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_MODEL_FLAGS

from dlzero.loop import new_games
from dlzero.progress.timeline import shares
from dlzero.rundir import RunDir

TINY = [*TINY_MODEL_FLAGS, "--set", "selfplay.playouts=12",
        "--set", "selfplay.cheap_playouts=4", "--set", "selfplay.max_moves=60", "--set", "selfplay.workers=1",
        "--set", "selfplay.games_in_parallel=4", "--set", "selfplay.games_per_shard=4",
        "--set", "train.window_min=300", "--set", "train.batch_size=32", "--set", "inference.threads=1",
        "--set", "inference.precision=fp32", "--set", "gate.mode=off", "--set", "train.validation_positions=200",
        "--set", "loop.status_every_s=5", "--set", "loop.selfplay_nice=0", "--games", "8", "--reuse", "2",
        "--mode", "async", "--quiet"]  # selfplay_nice 0: niced workers starve behind other busy processes


def _loop(run: Path, generations: int, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "dlzero.cli", "loop", "--config", "tiny", "--run", str(run),
           "--generations", str(generations), *TINY, *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _interval(row: dict[str, str]) -> tuple[float, float]:
    start = dt.datetime.fromisoformat(row["start"]).timestamp()
    return start, start + float(row["seconds"])


@pytest.mark.timeout(900)  # two loops of ~15 s each alone; a machine with every core busy may take 10x
def test_async_loop_trains_while_selfplay_runs_and_resumes(tmp_path):
    run = tmp_path / "run"
    first = _loop(run, 2)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "[iteration 0]" in first.stdout and "[iteration 1]" in first.stdout
    assert "self-play running" in first.stdout
    assert json.loads((run / "loop.json").read_text())["iteration"] == 2

    with open(run / "metrics" / "timeline.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    selfplay = [r for r in rows if r["phase"] == "selfplay"]
    trains = [r for r in rows if r["phase"] == "train"]
    assert len(selfplay) == 1 and len(trains) == 2
    sp_start, sp_end = _interval(selfplay[0])
    for row in trains:  # each generation trained while self-play was running
        start, end = _interval(row)
        assert sp_start <= start and end <= sp_end
    assert shares(rows)["selfplay"] > 0.5

    # each generation's new games were scored before training on them, by a model that never saw them
    with open(run / "metrics" / "validation.csv", newline="") as fh:
        val = list(csv.DictReader(fh))
    nxt = [(r["model"], r["data"]) for r in val if r["set"] == "next"]
    assert ("gen-0000", "+gen-0001") in nxt and ("gen-0001", "+gen-0002") in nxt
    seen = json.loads((run / "train" / "seen-shards.json").read_text())
    assert seen and all((run / "data" / s).is_file() for s in seen)

    # The same command continues the run. Its workers start from the best model (gen 2: the gate is off);
    # asking for one game more than the first run left untrained makes this generation wait for a shard
    # of theirs, however fast the machine (else it could train on leftovers before any worker saved one).
    leftover, _ = new_games(RunDir.open(run))
    second = _loop(run, 1, "--games", str(leftover + 1))
    assert second.returncode == 0, second.stderr[-3000:]
    assert "[iteration 2]" in second.stdout and "[iteration 0]" not in second.stdout
    assert sorted(p.name for p in (run / "models").glob("gen-*.pt"))[-1] == "gen-0003.pt"
    # self-play played with the promoted models: games filed under generation 2 or later
    later = [p for p in (run / "data").glob("gen-*/*.hcpe3") if p.parent.name not in ("gen-0000", "gen-0001")]
    assert later, sorted(str(p.relative_to(run)) for p in (run / "data").rglob("*.hcpe3"))
