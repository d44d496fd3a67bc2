"""End to end: `dlzero loop` runs self-play -> train -> gate -> promote, and resumes where it stopped."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import TINY_MODEL_FLAGS

TINY = [*TINY_MODEL_FLAGS, "--set", "selfplay.playouts=12",
        "--set", "selfplay.cheap_playouts=4", "--set", "selfplay.max_moves=60", "--set", "selfplay.workers=1",
        "--set", "selfplay.games_in_parallel=8", "--set", "gate.max_moves=60", "--set", "gate.playouts=6",
        "--set", "train.window_min=300", "--set", "train.batch_size=32", "--set", "inference.threads=1",
        "--set", "rate.games=2", "--set", "rate.playouts=4", "--set", "rate.anchors=[random,alphabeta:10,gen-0000]",
        "--set", "loop.mode=sequential", "--set", "gate.mode=sprt", "--reuse", "0",
        "--rate", "--games", "8", "--steps", "15", "--gate-games", "4", "--quiet"]


def _loop(run: Path, generations: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "dlzero.cli", "loop", "--config", "tiny", "--run", str(run),
           "--generations", str(generations), *TINY]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def test_loop_runs_two_generations_and_resumes(tmp_path):
    run = tmp_path / "run"
    first = _loop(run, 1)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "[iteration 0]" in first.stdout
    assert json.loads((run / "loop.json").read_text())["iteration"] == 1

    second = _loop(run, 1)  # a second invocation continues the same run
    assert second.returncode == 0, second.stderr[-2000:]
    assert "[iteration 1]" in second.stdout and "[iteration 0]" not in second.stdout
    state = json.loads((run / "loop.json").read_text())
    assert state == {"iteration": 2, "phase": "selfplay", "games_done": 0, "candidate": None}

    models = sorted(p.name for p in (run / "models").glob("gen-*.pt"))
    assert models == ["gen-0000.pt", "gen-0001.pt", "gen-0002.pt"]
    best = json.loads((run / "models" / "best.json").read_text())
    assert best["generation"] in (0, 1, 2)
    with open(run / "metrics" / "ratings.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["generation"]) for r in rows] == [1, 2]
    assert (run / "metrics" / "progress.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # --rate: every promoted candidate was rated on the anchored scale as the loop went
    promoted = {f"gen-{int(r['generation']):04d}" for r in rows if r["promoted"] == "1"}
    elo_csv = run / "metrics" / "elo.csv"
    if promoted:
        with open(elo_csv, newline="") as fh:
            rated = {r["player"] for r in csv.DictReader(fh)}
        assert rated == promoted | {"gen-0000", "random", "alphabeta:10"}
        assert any((run / "rating").glob("*.json"))
    else:
        assert not elo_csv.exists()
    shards = list((run / "data").glob("gen-*/*.hcpe3"))
    assert shards, "self-play wrote no shards"
    assert any((run / "games").rglob("*.csa"))
