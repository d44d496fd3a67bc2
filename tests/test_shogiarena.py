"""shogiarena (the tournament, SPRT and SPSA runner for USI engines) drives `dlzero usi` as a user
would run it: a one-line wrapper script, no option overrides, shogiarena's own defaults apart from
a short clock and move cap that keep the test quick (issue 25). Skipped where shogiarena is not
installed (it comes with the `dev` and `test` extras)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import cshogi
import pytest
import yaml
from conftest import TINY_MODEL

from dlzero.config import Config
from dlzero.usi.options import BY_NAME, get_key

pytest.importorskip("shogiarena", reason="shogiarena is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[1]

# Mate in 3: 5c8c 8a7a G*7b (found by cshogi's df-pn; no mate in 1).
MATE_IN_3 = "sfen 1k7/9/4+R2P1/9/9/9/9/9/4K4 b G 1"


def _cli() -> str:
    """The shogiarena command of this interpreter's environment (or the one on PATH)."""
    beside = Path(sys.executable).with_name("shogiarena")
    found = str(beside) if beside.exists() else shutil.which("shogiarena")
    if found is None:
        pytest.skip("shogiarena is importable but its command is not installed")
    return found


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([_cli(), *args], cwd=cwd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> list[str]:
    """Two wrapper scripts, each starting `python -m dlzero.usi` on its own small random network."""
    from dlzero.config import ModelConfig
    from dlzero.model import new_model, save_model

    root = tmp_path_factory.mktemp("shogiarena")
    paths = []
    for seed in (0, 1):
        model = root / f"m{seed}.pt"
        save_model(new_model(ModelConfig(**TINY_MODEL), seed=seed), model)
        script = root / f"dlzero-{seed}"
        script.write_text(f"#!/bin/sh\nexec {sys.executable} -m dlzero.usi --model {model}\n")
        script.chmod(0o755)
        paths.append(str(script))
    return paths


def test_a_two_game_match_runs_cleanly(engines, tmp_path):
    """shogiarena syncs its move cap through MaxMovesToDraw or Draw_Ply and refuses an engine that
    offers neither; with the aliases the match starts and ends without an error or a timeout."""
    out = tmp_path / "out"
    _run("--output-dir", str(out), "run", "sprt", "--games", "2",
         "--engine", "name=dz0", f"path={engines[0]}", "--engine", "name=dz1", f"path={engines[1]}",
         "--rules", "time_control.time_ms=0", "time_control.byoyomi_ms=400", "adjudication.max_plies=24",
         cwd=tmp_path)
    status_file = next(out.rglob("completion_status.json"))
    status = json.loads(status_file.read_text())
    assert status["status"] == "clean" and status["completed"] == 2
    assert status["error_games"] == 0 and status["timeouts_by_origin"] == {}
    with sqlite3.connect(status_file.parent / "game.db") as db:
        games = db.execute("select game_result, num_moves, metadata_attributes_json from game").fetchall()
    assert len(games) == 2
    for result, plies, meta in games:
        assert plies <= 24 and not any(bad in result for bad in ("TIME", "ILLEGAL", "ERROR")), result
        assert '"MaxMovesToDraw|Draw_Ply\\":24' in meta  # the move cap reached the engines
    # scripts/arena_result.py (the benchmarks' match scores) reads the same database: one opening,
    # colours swapped, so one pair; the two sides' scores mirror each other
    spec = importlib.util.spec_from_file_location("arena_result", ROOT / "scripts/arena_result.py")
    arena_result = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(arena_result)
    played = arena_result.read_games(status_file.parent / "game.db")
    mine, theirs = (arena_result.summarise(played, a, b) for a, b in (("dz0", "dz1"), ("dz1", "dz0")))
    assert mine["games"] == 2 and sum(mine["pairs"]) == 1
    assert (mine["wins"], mine["draws"], mine["losses"]) == (theirs["losses"], theirs["draws"], theirs["wins"])
    assert [sorted(g["sides"].values()) for g in played] == [["dz0", "dz1"]] * 2


def test_analyze_with_nodes_and_searchmoves_answers(engines, tmp_path):
    """`run analyze --nodes` sends `go nodes N infinite`: answered at the node limit, within the
    listed root moves."""
    proc = _run("run", "analyze", engines[0], "startpos moves 7g7f 3c3d", "--nodes", "200", "--timeout", "60",
                "--searchmoves", "2g2f", "8h2b+", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    best = [line.split()[1] for line in lines if line.startswith("bestmove ")]
    assert best and best[0] in ("2g2f", "8h2b+"), proc.stdout
    nodes = [int(part[2:]) for line in lines if line.startswith("info ") for part in line.split()
             if part.startswith("n=")]
    assert nodes and max(nodes) >= 200


def test_mate_finds_a_known_mate(engines, tmp_path):
    proc = _run("run", "mate", engines[0], MATE_IN_3, "--timeout", "60", cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert "mate 3" in lines, proc.stdout
    moves = next(line for line in lines if line.startswith("moves ")).split()[1:]
    board = cshogi.Board(MATE_IN_3.removeprefix("sfen "))
    for move in moves:
        assert board.is_legal(board.move_from_usi(move)), moves
        board.push_usi(move)
    assert board.is_check() and not list(board.legal_moves)  # the side to move is mated


def _defaults_now() -> dict[str, float]:
    """Each spin option's default, in option units."""
    return {name: opt.from_config(get_key(Config(), opt.key)) for name, opt in BY_NAME.items()
            if opt.kind == "spin" and opt.key}


def _start_of_the_measured_run() -> dict[str, float]:
    """The values the committed SPSA run started from (its result file records them by parameter id)."""
    result = json.loads((ROOT / "docs/benchmarks/spsa-result.json").read_text())
    space = yaml.safe_load((ROOT / "docs/benchmarks/spsa-search-space.yaml").read_text())
    return {p["target"]["option"].lower(): result["initial"][p["id"]] for p in space["parameters"]}


@pytest.mark.parametrize("config, space_file, starts", [
    ("docs/shogiarena/spsa.yaml", "docs/shogiarena/search-space.yaml", _defaults_now),
    ("docs/benchmarks/spsa-config.yaml", "docs/benchmarks/spsa-search-space.yaml", _start_of_the_measured_run),
])
def test_the_spsa_configs_validate_and_match_the_options(engines, tmp_path, config, space_file, starts):
    """The SPSA configs as docs/shogiarena.md sets them up (a checkout with engines/dlzero/ beside
    docs/): shogiarena accepts them, their spaces name dlzero's spins within their ranges, the
    example starts at today's defaults and the measured run's space at the values it started from."""
    for folder in ("docs/shogiarena", "docs/benchmarks"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    engine_dir = tmp_path / "engines/dlzero"
    engine_dir.mkdir(parents=True)
    shutil.copy(engines[0], engine_dir / "dlzero-usi")
    (engine_dir / "dlzero.yaml").write_text("name: dlzero\nengine_path: engines/dlzero/dlzero-usi\n"
                                            "working_directory: engines/dlzero\noptions: {Playouts: 128}\n")
    proc = _run("--output-dir", str(tmp_path / "out"), "run", "spsa", config, "--validate-only", cwd=tmp_path)
    assert "Validated SPSA config" in proc.stdout + proc.stderr
    space = yaml.safe_load((ROOT / space_file).read_text())
    start = starts()
    for param in space["parameters"]:
        name = param["target"]["option"].lower()
        opt = BY_NAME[name]
        assert param["value_type"] == "int" and opt.kind == "spin"
        assert param["initial"] == start[name], param["id"]
        assert opt.lo <= param["bounds"]["min"] < param["bounds"]["max"] <= opt.hi
