"""Faults in the data path (issue #24, findings 3 and 4): a disk that fills up under self-play, shards
damaged after they were written, and `dlzero doctor` finding each such fault in a run.

The full-disk tests use a real tmpfs of a few kilobytes, mounted in a private user and mount
namespace (`unshare --user --map-root-user --mount`), so they need no root and leave no mount
behind; they skip where the kernel or the container refuses namespaces.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TINY_MODEL_SETS
from test_train import random_game
from tmpfs import fill_disk_script, run_on_tmpfs

from dlzero.config import load_config
from dlzero.data.hcpe3 import ShardWriter, read_sidecar, write_hcpe3
from dlzero.doctor import check_run
from dlzero.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
TINY = [*TINY_MODEL_SETS, "inference.backend=torch",
        "inference.optimize=none", "inference.threads=1", "search.root_mate_depth=3", "selfplay.playouts=8",
        "selfplay.cheap_playouts=4", "selfplay.random_plies=2", "selfplay.max_moves=30",
        "selfplay.games_in_parallel=1", "selfplay.games_per_shard=1", "train.window_min=100"]


# ---------------------------------------------------------------- a real small disk


SIDECAR_DOES_NOT_FIT = fill_disk_script("""
    from dlzero.data.hcpe3 import ShardWriter, StorageError, read_hcpe3
    disk = Path(sys.argv[1])
    games = read_hcpe3(sys.argv[2])
    writer = ShardWriter(disk / "data", "sp", games_per_shard=1)
    writer.add(games[0])  # one shard saved while there is room
    fill(disk, 1)  # room for the next shard (under 4 KiB), none for its sidecar after it
    try:
        writer.add(games[1])
        error = ""
    except StorageError as exc:
        error = str(exc)
    print(json.dumps({"error": error, **inventory(disk / "data")}))
""")


def test_a_sidecar_that_does_not_fit_takes_its_shard_with_it(tmp_path, tmpfs_ok):
    """ENOSPC on the sidecar, after the shard itself was written: the shard is removed again (no data
    without its claim, no claim without data), the error is a StorageError naming the disk's refusal,
    and the shard saved before is intact."""
    source = tmp_path / "games.hcpe3"
    rng = random.Random(5)
    write_hcpe3(source, [random_game(rng, max_ply=12) for _ in range(2)])
    got = run_on_tmpfs(tmp_path / "disk", "256k", SIDECAR_DOES_NOT_FIT, str(source))
    assert "No space left on device (ENOSPC)" in got["error"] and "1 finished game(s)" in got["error"]
    (shard,) = got["shard_games"]
    assert got["files"] == sorted([shard, f"{shard}.json"])  # no partial shard, no temp file
    assert got["shard_games"] == got["claimed_games"] == {shard: 1}


SELFPLAY_ON_A_FULL_DISK = fill_disk_script("""
    import time
    from dlzero.config import load_config
    from dlzero.rundir import RunDir
    from dlzero.selfplay.bootstrap import ensure_best_model
    disk, sets = Path(sys.argv[1]), json.loads(sys.argv[2])
    cfg = load_config(None, sets)
    rd = RunDir.create(disk / "run", cfg)
    ensure_best_model(rd, cfg, seed=0)
    fill(disk, 12)  # a handful of shards (a shard and its sidecar take a block each), then ENOSPC
    args = [sys.executable, "-m", "dlzero.cli", "selfplay", "--run", str(rd.root), "--games", "40",
            "--workers", "2", "--seed", "1", "--quiet"]
    for s in sets:
        args += ["--set", s]
    t0 = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=200)
    print(json.dumps({"rc": proc.returncode, "stderr": proc.stderr, "seconds": time.monotonic() - t0,
                      **inventory(rd.data_dir)}))
""")


@pytest.mark.timeout(300)
def test_selfplay_on_a_full_disk_stops_with_one_message_and_no_restart(tmp_path, tmpfs_ok):
    """The run lives on a tmpfs with room for a few shards; self-play is asked for 40 games. Before:
    the sidecar stayed behind claiming games with no shard, and the worker was restarted after
    ENOSPC again and again (124 games played, 0 saved). Now: every worker stops, none is restarted,
    the command fails with one message, and the disk holds only complete, committed shards."""
    got = run_on_tmpfs(tmp_path / "disk", "8m", SELFPLAY_ON_A_FULL_DISK, json.dumps(TINY))
    err = got["stderr"]
    assert got["rc"] == 2, err[-3000:]
    assert err.count("No space left on device (ENOSPC)") == 1, err[-3000:]
    assert "dlzero selfplay: error: cannot write " in err  # a shard, or the parent's selfplay_state.json
    assert "restart" not in err and "Traceback" not in err, err[-3000:]
    shards = got["shard_games"]
    assert shards, "no shard fitted before the disk was full: the test shows nothing"
    assert shards == got["claimed_games"]  # every shard has its sidecar and every sidecar its shard
    assert all(games == 1 for games in shards.values())
    assert not [f for f in got["files"] if Path(f).name.startswith(".")], got["files"]  # no temp files left
    assert len({Path(s).name.split("-")[2] for s in shards}) <= 2  # the two first processes: none restarted


PARENT_ON_A_FULL_DISK = fill_disk_script("""
    from dlzero.config import load_config
    from dlzero.rundir import RunDir
    from dlzero.selfplay.parent import Collector
    disk = Path(sys.argv[1])
    cfg = load_config(None, [])
    rd = RunDir.create(disk / "run", cfg)
    collector = Collector(rd, cfg, games=4, n_workers=2, progress=False)
    stopped = []
    collector.on_fatal = stopped.append
    fill(disk, 0)
    game = {"plies": 10, "winner": 1, "reason": "resign", "generation": 0, "targets": 5, "false_positive": False}
    collector.handle(("game", 1, game))  # a no-resign game: the parent writes selfplay_state.json
    collector.handle(("fatal", 0, "a worker's message, after the parent's"))
    restart = collector.replay_share(1, "s", 2, 1, "died")
    print(json.dumps({"fatal": collector.fatal, "stopped": stopped, "restart": restart,
                      "files": sorted(p.name for p in rd.root.iterdir() if p.is_file())}))
""")


def test_the_parents_own_write_on_a_full_disk_stops_the_session(tmp_path, tmpfs_ok):
    """selfplay_state.json (the resign threshold, written by the parent) on a full disk: the session
    stops as on a worker's shard, with the first message only, and nothing is restarted."""
    got = run_on_tmpfs(tmp_path / "disk", "1m", PARENT_ON_A_FULL_DISK)
    assert "selfplay_state.json" in got["fatal"] and "(ENOSPC)" in got["fatal"], got
    assert got["stopped"] == [None] and got["restart"] == 0  # every worker stopped (None: not one's own)
    assert "selfplay_state.json" not in got["files"] and not [f for f in got["files"] if f.startswith(".")]


# ---------------------------------------------------------------- damaged shards in training


def test_training_skips_a_shard_with_a_flipped_bit(tmp_path, caplog):
    """A committed shard that changed on disk (one flipped bit: it still parses as legal games) is
    skipped with a warning that names it, as a truncated one is."""
    from dlzero.train.dataset import build_window

    cfg = load_config(None, TINY)
    rd = RunDir.create(tmp_path / "run", cfg)
    rng = random.Random(3)
    paths = []
    for i in range(2):
        paths.append(rd.data_dir_for(0) / f"shard-{i}.hcpe3")
        write_hcpe3(paths[-1], [random_game(rng) for _ in range(2)])
    good, _ = build_window(rd, cfg.train)
    data = bytearray(paths[0].read_bytes())
    data[len(data) // 2] ^= 0x01
    paths[0].write_bytes(data)
    os.utime(paths[0], (time.time() + 5, time.time() + 5))  # a new mtime, as a rewrite has
    with caplog.at_level(logging.WARNING, logger="dlzero.train.dataset"):
        buf, plan = build_window(rd, cfg.train)
    assert "shard-0.hcpe3" in caplog.text and "checksum mismatch" in caplog.text
    assert [rel for rel, _ in plan.shards] == ["gen-0000/shard-1.hcpe3"]
    assert 0 < len(buf) < len(good)


# ---------------------------------------------------------------- dlzero doctor


@pytest.fixture(scope="module")
def healthy_run(tmp_path_factory) -> Path:
    """A small run written by dlzero's own writers: two generations (best: 1) with an ONNX export beside
    its model, shards from ShardWriter, metrics.csv, ratings.csv, loop.json and selfplay_state.json."""
    from dlzero.gating.match import append_rating
    from dlzero.loop import LoopState
    from dlzero.model.checkpoint import ModelMetadata, new_model, save_model
    from dlzero.model.export import export_onnx
    from dlzero.train.meters import MetricsLog

    cfg = load_config(None, TINY)
    rd = RunDir.create(tmp_path_factory.mktemp("doctor") / "run", cfg)
    for gen in (0, 1):
        model = new_model(cfg.model, seed=gen)
        save_model(model, rd.model_path(gen), ModelMetadata(generation=gen))
    export_onnx(model, _onnx_export(rd), ModelMetadata(generation=1))
    rd.set_best(1, "test")
    rng = random.Random(7)
    for gen in (0, 1):
        with ShardWriter(rd.data_dir_for(gen), "selfplay-w0", 2, {"generation": gen}) as writer:
            for _ in range(3):
                writer.add(random_game(rng, max_ply=30))
    log = MetricsLog(rd.metrics_dir, 0)
    for step in (10, 20):
        log.write({"step": step, "generation": 1, "samples": 320.0, "policy_loss": 5.0, "value_loss": 0.7})
    log.tb.close()
    append_rating(rd.ratings_csv, {"generation": 1, "opponent": 0, "games": 10, "wins": 6, "draws": 0, "losses": 4,
                                   "decision": "accept", "promoted": 1})
    LoopState(iteration=1, phase="selfplay").save(rd)
    rd.write_json(rd.selfplay_state_path.name, {"threshold": 0.0})
    return rd.root


def _onnx_export(rd: RunDir) -> Path:
    """Where the healthy run keeps generation 1's ONNX export: beside its model, as `dlzero export` would."""
    return rd.model_path(1).with_suffix(".onnx")


def _copy(run: Path, tmp_path: Path) -> RunDir:
    shutil.copytree(run, tmp_path / "run")
    return RunDir.open(tmp_path / "run")


def test_doctor_passes_a_healthy_run(healthy_run):
    report = check_run(healthy_run)
    assert report.healthy, "\n".join(report.lines())
    assert report.checked["shards"] == 4 and report.checked["games"] == 6
    assert report.checked["models"] == 2 and report.checked["onnx files"] == 1
    assert report.checked["CSV files"] == 2


def _first_shard(rd: RunDir) -> Path:
    return sorted(rd.data_dir_for(0).glob("*.hcpe3"))[0]


def _flip_a_bit(rd: RunDir) -> Path:
    path = _first_shard(rd)
    data = bytearray(path.read_bytes())
    data[40] ^= 0x10
    path.write_bytes(data)
    return path


def _drop_sidecar(rd: RunDir) -> Path:
    path = _first_shard(rd)
    Path(f"{path}.json").unlink()
    return path


def _drop_shard(rd: RunDir) -> Path:
    path = _first_shard(rd)
    path.unlink()
    return Path(f"{path}.json")


def _wrong_count(rd: RunDir) -> Path:
    claim = Path(f"{_first_shard(rd)}.json")
    side = json.loads(claim.read_text())
    side["games"] += 1
    claim.write_text(json.dumps(side))
    return claim


def _stale_temp_file(rd: RunDir) -> Path:
    tmp = rd.data_dir_for(1) / ".selfplay-w0-x.hcpe3.0badc0de.tmp"
    tmp.write_bytes(b"half a shard")
    os.utime(tmp, (time.time() - 3600, time.time() - 3600))
    return tmp


def _truncated_model(rd: RunDir) -> Path:
    path = rd.model_path(0)
    path.write_bytes(path.read_bytes()[:1000])
    return path


def _corrupt_onnx(rd: RunDir) -> Path:
    path = _onnx_export(rd)
    path.write_bytes(path.read_bytes()[:-500])
    return path


def _best_names_a_missing_model(rd: RunDir) -> Path:
    best = json.loads(rd.best_path.read_text())
    best.update(generation=7, model="models/gen-0007.pt")
    rd.best_path.write_text(json.dumps(best))
    return rd.best_path


def _repeated_rating(rd: RunDir) -> Path:
    path = rd.metrics_dir / "ratings.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines, lines[-1]]))
    return path


def _torn_metrics(rd: RunDir) -> Path:
    path = rd.metrics_dir / "metrics.csv"
    path.write_text(path.read_text()[:-7])
    return path


def _bad_loop_phase(rd: RunDir) -> Path:
    rd.write_json("loop.json", {"iteration": 1, "phase": "gate", "games_done": 0, "candidate": 9})
    return rd.root / "loop.json"


def _loop_not_json(rd: RunDir) -> Path:
    (rd.root / "loop.json").write_text('{"iteration": 1, "pha')
    return rd.root / "loop.json"


FAULTS = {
    "flipped bit in a shard": (_flip_a_bit, "checksum mismatch", "rm "),
    "shard without sidecar": (_drop_sidecar, "shard without a sidecar", "rm "),
    "sidecar without shard": (_drop_shard, "sidecar without its shard", "rm "),
    "sidecar with a wrong count": (_wrong_count, "says 3 games", "rm "),
    "stale temp file": (_stale_temp_file, "temp file of a write interrupted", "rm "),
    "truncated model": (_truncated_model, "truncated or corrupt", "mv "),
    "corrupt onnx": (_corrupt_onnx, "cannot be read as ONNX", "rm "),
    "best.json names a missing model": (_best_names_a_missing_model, "does not exist", "set_best(N"),
    "repeated ratings row": (_repeated_rating, "repeats line 2", "rm "),
    "torn metrics.csv": (_torn_metrics, "cut short", "rm "),
    "loop.json without its candidate": (_bad_loop_phase, "candidate generation 9 has no model file", "rm "),
    "loop.json not JSON": (_loop_not_json, "not valid JSON", "rm "),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_doctor_reports_each_fault_with_its_repair(healthy_run, tmp_path, fault):
    inject, what, repair = FAULTS[fault]
    rd = _copy(healthy_run, tmp_path)
    where = inject(rd).relative_to(rd.root).as_posix()
    report = check_run(rd.root)
    assert len(report.problems) == 1, "\n".join(report.lines())
    (problem,) = report.problems
    assert problem.where == where and what in problem.what and repair in problem.repair, problem


def test_doctor_cli_exit_codes(healthy_run, tmp_path):
    """0 on a healthy run; 1, with the problem and its repair printed, on a damaged one; 2 on a folder
    that is no run at all."""
    def doctor(run: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dlzero.cli", "doctor", "--run", str(run)],
                              capture_output=True, text=True, timeout=120, cwd=REPO)

    ok = doctor(healthy_run)
    assert ok.returncode == 0 and "healthy" in ok.stdout, ok.stdout + ok.stderr
    rd = _copy(healthy_run, tmp_path)
    shard = _flip_a_bit(rd)
    bad = doctor(rd.root)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert f"PROBLEM {shard.relative_to(rd.root).as_posix()}: " in bad.stdout and "checksum mismatch" in bad.stdout
    assert f"repair: restore the shard from a backup, or delete it and its sidecar: rm {shard}" in bad.stdout
    assert "1 problem(s) found" in bad.stdout
    (tmp_path / "empty").mkdir()
    none = doctor(tmp_path / "empty")
    assert none.returncode == 2 and "not a dlzero run directory" in none.stderr
    assert shard.is_file() and read_sidecar(shard)["games"] == 2  # doctor repairs nothing by itself
