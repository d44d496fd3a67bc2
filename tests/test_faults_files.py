"""Damaged run files, disks that refuse writes, and requests too large (issue #41): errors, not tracebacks.

- An infinity (or NaN, or 1e400) in any CSV log of a run: the dashboard answers with a warning, not a 500,
  and `dlzero doctor` reports it.
- A 100,000-deep JSON in run.json, best.json, loop.json or selfplay_state.json: the dashboard warns, doctor
  reports it, and `dlzero selfplay` / `dlzero loop` stop with one line (exit 2) naming it.
- A full or read-only disk under any write (generation 0's model, a model file, `locks/`): one line naming
  the file, exit 2, no temp file left. The full and read-only disks are real tmpfs mounts in a private user
  and mount namespace (the tests run as root, for whom a chmod stops no write); ENOSPC is also simulated at
  the write call itself for the in-process checks.
- And the surprises: a network too large to build is refused before it is allocated; `teach` sizes its
  parts by the positions asked; `train --run --steps` saves nothing into the run's config; a second
  `dlzero selfplay` on a new run waits for generation 0; a config error on a new loop leaves no folder;
  a shard that rots after it was counted is skipped by training, as doctor says; `train --minutes` shows
  no made-up step total.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest
from test_budget import SteppedBudget, torch_cpu
from test_faults_data import REPO, TINY
from test_train import make_run, tiny_config, write_random_hcpe
from tmpfs import fill_disk_script, run_on_tmpfs

from dlzero.cli import main
from dlzero.config import MAX_MODEL_PARAMETERS, ModelConfig, load_config
from dlzero.data.atomic import atomic_write_bytes
from dlzero.data.hcpe3 import read_sidecar
from dlzero.data.jsonfile import MAX_JSON_DEPTH, read_json
from dlzero.doctor import check_run
from dlzero.errors import ConfigError, DataError, RunDirError
from dlzero.rundir import RunDir
from dlzero.runfiles import RATINGS_COLUMNS, TIMELINE_COLUMNS, TRAIN_COLUMNS, VALIDATION_COLUMNS

DEEP = "[" * 100_000 + "]" * 100_000  # what made json.loads raise RecursionError


def new_run(root: Path) -> RunDir:
    return RunDir.create(root, load_config(None, TINY))


def write_csv(path: Path, header: tuple[str, ...] | list[str], row: dict[str, str]) -> None:
    path.write_text(",".join(header) + "\n" + ",".join(row.get(c, "") for c in header) + "\n")


def one_line_error(err: str, command: str) -> str:
    """The error line of a command that failed cleanly: exactly one `dlzero X: error:` line, no traceback."""
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith(f"dlzero {command}: error: ")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


# ---------------------------------------------------------------- numbers that are not finite

METRICS_ROW = {"step": "10", "generation": "1", "samples": "320", "policy_loss": "5.0", "value_loss": "0.7",
               "policy_acc": "0.1", "value_acc": "0.5", "lr": "0.01", "samples_per_s": "100", "reply_loss": "nan"}
VALIDATION_ROW = {"time": "2026-12-02T10:00:00+00:00", "step": "10", "model": "gen-0001", "set": "fixed",
                  "data": "x", "games": "4", "positions": "100", "policy_loss": "5.0", "policy_acc": "0.1",
                  "value_loss": "0.7", "value_acc": "0.5"}
RATINGS_ROW = {"generation": "1", "opponent": "0", "games": "10", "wins": "6", "draws": "0", "losses": "4",
               "score": "0.6", "elo": "70", "elo_low": "-40", "elo_high": "180", "llr": "0.1", "decision": "accept",
               "promoted": "1", "timestamp": "2026-12-02T10:00:00+00:00"}
ELO_HEADER = ["player", "generation", "elo", "elo_low", "elo_high", "games", "anchor", "wall_seconds"]
ELO_ROW = {"player": "gen-0001", "generation": "1", "elo": "25.0", "elo_low": "-35.0", "elo_high": "85.0",
           "games": "20", "anchor": "0", "wall_seconds": "10.0"}
TIMELINE_ROW = {"phase": "train", "generation": "1", "start": "2026-12-02T10:00:00.000+00:00", "seconds": "12.5"}

# file, its header, a sound row, the column made bad, the bad value
BAD_CELLS = {
    "metrics.csv inf": ("metrics.csv", TRAIN_COLUMNS, METRICS_ROW, "policy_loss", "inf"),
    "validation.csv -inf": ("validation.csv", VALIDATION_COLUMNS, VALIDATION_ROW, "value_loss", "-inf"),
    "timeline.csv inf": ("timeline.csv", TIMELINE_COLUMNS, TIMELINE_ROW, "seconds", "inf"),
    "timeline.csv nan": ("timeline.csv", TIMELINE_COLUMNS, TIMELINE_ROW, "seconds", "nan"),
    "ratings.csv inf": ("ratings.csv", RATINGS_COLUMNS, RATINGS_ROW, "elo", "inf"),
    "ratings.csv nan": ("ratings.csv", RATINGS_COLUMNS, RATINGS_ROW, "elo", "nan"),
    "ratings.csv 1e400 games": ("ratings.csv", RATINGS_COLUMNS, RATINGS_ROW, "games", "1e400"),
    "elo.csv inf": ("elo.csv", ELO_HEADER, ELO_ROW, "elo", "Infinity"),
    "elo.csv 1e999": ("elo.csv", ELO_HEADER, ELO_ROW, "wall_seconds", "1e999"),
}


def state_of(run: Path) -> dict:
    """GET /api/state of a real dashboard server on `run`; a 500 fails the test with its status."""
    pytest.importorskip("uvicorn", reason="the dashboard extra is not installed: pip install -e '.[dashboard]'")
    from test_dashboard import get_json, serve

    with serve(run) as url:
        try:
            return get_json(f"{url}/api/state")
        except urllib.error.HTTPError as exc:
            pytest.fail(f"/api/state answered {exc.code}")


@pytest.mark.parametrize("case", list(BAD_CELLS))
def test_a_number_that_is_not_finite_is_a_dashboard_warning_and_a_doctor_problem(tmp_path, case):
    """Before: /api/state answered 500 (an infinity has no JSON, int(inf) raised, NaN Elo broke the
    models table) and doctor called the run healthy."""
    name, header, row, column, value = BAD_CELLS[case]
    rd = new_run(tmp_path / "run")
    write_csv(rd.metrics_dir / name, header, {**row, column: value})
    state = state_of(rd.root)
    assert any(w.startswith(f"metrics/{name}: ") and "finite" in w for w in state["warnings"]), state["warnings"]
    if value.lower() == "nan":  # how writers say "no figure": not a problem on disk, only where a number is due
        return
    problems = check_run(rd.root).problems
    assert [p.where for p in problems] == [f"metrics/{name}"], problems
    assert f"column {column}" in problems[0].what and "not a finite number" in problems[0].what


def test_the_other_rows_of_a_timeline_with_an_infinity_still_count(tmp_path):
    from dlzero.progress.timeline import read_rows, shares

    rd = new_run(tmp_path / "run")
    rows = [TIMELINE_ROW, {**TIMELINE_ROW, "phase": "gate", "seconds": "inf"},
            {**TIMELINE_ROW, "phase": "gate", "start": "2026-12-02T10:00:12.500+00:00", "seconds": "12.5"}]
    rd.timeline_csv.write_text(",".join(TIMELINE_COLUMNS) + "\n"
                               + "".join(",".join(r[c] for c in TIMELINE_COLUMNS) + "\n" for r in rows))
    assert [r["seconds"] for r in read_rows(rd.timeline_csv)] == ["12.5", "12.5"]
    assert shares(read_rows(rd.timeline_csv)) == {"train": 0.5, "gate": 0.5}


# ---------------------------------------------------------------- JSON files, however damaged


def test_the_json_reader_bounds_size_depth_and_numbers(tmp_path):
    path = tmp_path / "x.json"
    for text, what in [(DEEP, "nested too deeply"), ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
                                                      "nested too deeply"),
                       ('{"a": 1e400}', "too large for a float"), ('{"a": NaN}', "NaN is not a number"),
                       ('{"a": 1', "not valid JSON"), (b'{"a": "\xff"}', "not UTF-8")]:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(DataError, match=what) as caught:
            read_json(path)
        assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    path.write_text(json.dumps({"a": [1, 2.5, {"b": None}]}))
    assert read_json(path) == {"a": [1, 2.5, {"b": None}]}
    path.write_text(json.dumps({"pad": "x" * 100}))
    with pytest.raises(DataError, match="larger than 50 bytes"):
        read_json(path, max_bytes=50)


@pytest.fixture(scope="module")
def run_with_model(tmp_path_factory) -> Path:
    """A run with a random generation 0 promoted (the TINY network)."""
    from dlzero.selfplay.bootstrap import ensure_best_model

    rd = new_run(tmp_path_factory.mktemp("json") / "run")
    ensure_best_model(rd, rd.config(), seed=0)
    return rd.root


JSON_FILES = {"run.json": "run.json", "best.json": "models/best.json", "loop.json": "loop.json",
              "selfplay_state.json": "selfplay_state.json"}


@pytest.mark.parametrize("name", list(JSON_FILES))
def test_a_100k_deep_json_file_is_a_warning_a_problem_and_a_one_line_error(run_with_model, tmp_path, capsys, name):
    """Before: the dashboard answered 500, and doctor, selfplay and loop printed RecursionError tracebacks."""
    run = tmp_path / "run"
    shutil.copytree(run_with_model, run)
    rel = JSON_FILES[name]
    (run / rel).write_text(DEEP)
    state = state_of(run)
    assert any(w.startswith(f"{rel}: unreadable") and "nested too deeply" in w for w in state["warnings"]), state
    problems = check_run(run).problems
    assert rel in [p.where for p in problems] and all("\n" not in p.what for p in problems), problems
    command = "loop" if name == "loop.json" else "selfplay"
    args = [command, "--run", str(run), *(["--generations", "0"] if command == "loop" else ["--games", "1"]),
            "--quiet"]
    assert main(args) == 2
    line = one_line_error(capsys.readouterr().err, command)
    assert str(run / rel) in line and "nested too deeply" in line, line


@pytest.mark.parametrize("content, what", [
    ({"generation": "1", "model": "models/gen-0000.pt"}, "not what best.json holds"),
    ({"generation": -1, "model": "models/gen-0000.pt"}, "not what best.json holds"),
    ([0], "not what best.json holds"),
])
def test_best_json_of_the_wrong_shape_is_a_run_error(run_with_model, tmp_path, content, what):
    run = tmp_path / "run"
    shutil.copytree(run_with_model, run)
    (run / "models" / "best.json").write_text(json.dumps(content))
    with pytest.raises(RunDirError, match=what):
        RunDir(run).best()


@pytest.mark.parametrize("content, what", [
    ({"iteration": "2"}, "iteration '2' is not a count"),
    ({"phase": "nap"}, "phase 'nap' is not one of"),
    ({"games_done": 1.5}, "games_done 1.5 is not a count"),
    ([], "not a JSON object"),  # falsy content is damage too, not a fresh state
    (0, "not a JSON object"),
])
def test_loop_json_of_the_wrong_shape_is_a_run_error_naming_the_field(run_with_model, tmp_path, content, what):
    from dlzero.loop import LoopState

    run = tmp_path / "run"
    shutil.copytree(run_with_model, run)
    (run / "loop.json").write_text(json.dumps(content))
    with pytest.raises(RunDirError, match=what):
        LoopState.load(RunDir(run))
    assert [p.where for p in check_run(run).problems] == ["loop.json"]


@pytest.mark.parametrize("content, what", [
    ({"resign_threshold": "low"}, "resign_threshold 'low' is not a win rate"),
    ({"checked": -3}, "checked -3 is not a count"),
    ({"recent": [0, 1, 7]}, "recent is not a list of 0s and 1s"),
])
def test_selfplay_state_of_the_wrong_shape_is_a_run_error(run_with_model, tmp_path, content, what):
    from dlzero.selfplay.worker import load_resign

    run = tmp_path / "run"
    shutil.copytree(run_with_model, run)
    (run / "selfplay_state.json").write_text(json.dumps(content))
    rd = RunDir(run)
    with pytest.raises(RunDirError, match=what):
        load_resign(rd, rd.config())
    assert [p.where for p in check_run(run).problems] == ["selfplay_state.json"]


# ---------------------------------------------------------------- disks that refuse writes


def _enospc(*_args: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a failed write reports it: no file named


def test_enospc_at_the_write_names_the_file_and_leaves_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "m.bin"
    target.write_bytes(b"old")
    monkeypatch.setattr("dlzero.data.atomic.os.fsync", _enospc)
    with pytest.raises(OSError) as caught:
        atomic_write_bytes(target, b"new" * 1000)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin"] and target.read_bytes() == b"old"


def test_a_full_disk_under_a_model_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """Before: the OSError left main() as a traceback (exit 1)."""
    out = tmp_path / "m.pt"
    monkeypatch.setattr("dlzero.data.atomic.os.fsync", _enospc)
    assert main(["init-model", "--out", str(out), "--set", "model.blocks=1", "--set", "model.channels=8"]) == 2
    line = one_line_error(capsys.readouterr().err, "init-model")
    assert f"cannot write {out}: No space left on device (ENOSPC)" in line, line
    assert list(tmp_path.iterdir()) == []


GENERATION_0_ON_A_FULL_DISK = fill_disk_script("""
    from dlzero.config import load_config
    from dlzero.rundir import RunDir
    disk, sets = Path(sys.argv[1]), json.loads(sys.argv[2])
    rd = RunDir.create(disk / "run", load_config(None, sets))
    fill(disk, 4)  # room for the lock files, none for a model
    args = [sys.executable, "-m", "dlzero.cli", "selfplay", "--run", str(rd.root), "--games", "1", "--quiet"]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=200)
    files = sorted(str(p.relative_to(rd.root)) for p in rd.root.rglob("*") if p.is_file())
    print(json.dumps({"rc": proc.returncode, "stderr": proc.stderr, "files": files}))
""")


def test_generation_0_on_a_full_disk_is_one_line_and_exit_2(tmp_path, tmpfs_ok):
    """A real full tmpfs: `dlzero selfplay` on a new run cannot write its random generation 0."""
    got = run_on_tmpfs(tmp_path / "disk", "1m", GENERATION_0_ON_A_FULL_DISK, json.dumps(TINY))
    line = one_line_error(got["stderr"], "selfplay")
    assert got["rc"] == 2 and "models/gen-0000.pt: No space left on device (ENOSPC)" in line, got
    assert not [f for f in got["files"] if Path(f).name.startswith(".") or f.startswith("models/")], got["files"]


LOCKS_ON_A_READ_ONLY_RUN = """
import json, subprocess, sys
from pathlib import Path
from dlzero.config import load_config
from dlzero.rundir import RunDir
disk, sets = Path(sys.argv[1]), json.loads(sys.argv[2])
rd = RunDir.create(disk / "run", load_config(None, sets))
subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
out = {}
for command in ("train", "gate"):
    proc = subprocess.run([sys.executable, "-m", "dlzero.cli", command, "--run", str(rd.root)],
                          capture_output=True, text=True, timeout=200)
    out[command] = [proc.returncode, proc.stderr]
print(json.dumps(out))
"""


def test_locks_on_a_read_only_run_are_one_line_and_exit_2(tmp_path, tmpfs_ok):
    """A real read-only mount (root's writes are refused too): the lock folder cannot be made."""
    got = run_on_tmpfs(tmp_path / "disk", "1m", LOCKS_ON_A_READ_ONLY_RUN, json.dumps(TINY))
    for command, (rc, err) in got.items():
        line = one_line_error(err, command)
        assert rc == 2 and "run/locks: Read-only file system (EROFS)" in line, (command, err)


# ---------------------------------------------------------------- surprises


def test_a_network_too_large_is_refused_before_it_is_allocated(tmp_path, monkeypatch, capsys):
    """Before: `init-model --set model.blocks=100000` allocated 22.7 GB before it was killed."""
    from dlzero import model

    monkeypatch.setattr(model, "new_model", lambda *a, **k: pytest.fail("the network was allocated"))
    out = tmp_path / "m.pt"
    assert main(["init-model", "--out", str(out), "--set", "model.blocks=100000"]) == 2
    line = one_line_error(capsys.readouterr().err, "init-model")
    assert "7,398,549,588 parameters" in line and f"at most {MAX_MODEL_PARAMETERS:,}" in line, line
    assert not out.exists()
    with pytest.raises(ConfigError, match="parameters"):
        load_config(None, ["model.channels=8192"])


@pytest.mark.parametrize("shape", [{}, {"blocks": 3, "channels": 32, "value_channels": 2, "value_fc": 16,
                                        "global_pool_blocks": [1]}, {"blocks": 2, "channels": 7,
                                                                     "global_pool_blocks": [0, 1]}])
def test_the_size_estimate_is_the_networks_parameter_count(shape):
    from dlzero.model import count_parameters, new_model

    cfg = ModelConfig(**shape)
    assert cfg.parameters() == count_parameters(new_model(cfg, seed=0))


def test_teach_sizes_its_parts_by_the_positions_asked(engine, tmp_path):
    """20 positions, 32-game parts, a teacher that resigns at move 17 (14 labels a game): before, one
    whole part of 32 games (448 positions) was labelled; now one game a part until 20 are there."""
    from dlzero.teacher import PlaySettings, TeachSettings, teach
    from dlzero.teacher.driver import part_path, parts_dir_of

    openings = tmp_path / "openings.txt"
    openings.write_text("startpos moves 7g7f 3c3d\n")
    out = tmp_path / "t.hcpe3"
    report = teach(TeachSettings(teacher=f"{engine};ResignPly=16", positions=20, out=out, openings=str(openings),
                                 play=PlaySettings(sample_plies=0), part_games=32), progress=False)
    assert (report.parts, report.games, report.positions) == (2, 2, 28)
    assert [read_sidecar(part_path(parts_dir_of(out), k))["games"] for k in range(2)] == [1, 1]


def test_train_steps_on_a_run_saves_nothing_into_its_config(tmp_path, capsys):
    """Before: `--steps 3` was saved as train.steps_per_generation, capping every later generation."""
    rd = make_run(tmp_path / "run", tiny_config(), (3,))
    assert main(["train", "--run", str(rd.root), "--steps", "3", "--no-progress", "--set", "train.batch_size=16"]) == 0
    assert "generation 1, 3 steps" in capsys.readouterr().err
    saved = rd.config()
    assert saved.train.steps_per_generation == 50 and saved.train.batch_size == 16  # --set is saved, as before


def test_a_config_error_on_a_new_loop_leaves_no_folder(tmp_path, capsys):
    run = tmp_path / "new"
    assert main(["loop", "--run", str(run), "--set", "model.blocks=0", "--generations", "0"]) == 2
    assert "model.blocks" in one_line_error(capsys.readouterr().err, "loop")
    assert not run.exists()  # before: run/locks/ with its two lock files


def _selfplay(run: Path, *sets: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "dlzero.cli", "selfplay", "--run", str(run), "--games", "1", "--quiet"]
    for s in [*TINY, *sets]:
        args += ["--set", s]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


@pytest.mark.timeout(300)
def test_a_second_selfplay_waits_for_generation_0_of_a_new_run(tmp_path):
    """This test holds the run's train and gate locks as a first `dlzero selfplay` does while it writes
    generation 0. Before: the second stopped at once with exit 2. Now it waits, says so, and plays once
    generation 0 is there; with nothing written within `selfplay.first_model_wait_s` it stops, naming the
    holder."""
    from dlzero.runlock import hold
    from dlzero.selfplay.bootstrap import ensure_best_model

    rd = new_run(tmp_path / "run")
    with hold(rd.root, ("train", "gate"), command="the first selfplay"):
        gave_up = _selfplay(rd.root, "selfplay.first_model_wait_s=1")
        _, err = gave_up.communicate(timeout=200)
        assert gave_up.returncode == 2, err[-3000:]
        line = one_line_error(err, "selfplay")
        assert "no generation 0 after waiting 1 s" in line and f"PID {os.getpid()}" in line, line
        second = _selfplay(rd.root, "selfplay.first_model_wait_s=600")  # the run's config.yaml kept the 1 s
        said = ""
        while "waiting" not in said and second.poll() is None:  # until it says it waits (or ends: the test fails)
            said += second.stderr.readline()
        assert "waiting up to 600 s for models/best.json" in said, said
        ensure_best_model(rd, rd.config(), seed=0)
    _, err = second.communicate(timeout=200)
    assert second.returncode == 0, said + err[-3000:]
    assert "1 games" in err and rd.shards(), err[-3000:]


def test_a_shard_that_rots_after_it_was_counted_is_skipped_by_training(tmp_path, caplog):
    """A bit flips in a shard whose position count is cached (same size, same mtime): before, training
    stopped with exit 2 while doctor said "(training skips this shard)"; now training skips it."""
    from dlzero.train.dataset import build_window

    cfg = tiny_config()
    rd = make_run(tmp_path / "run", cfg, (2, 2))
    build_window(rd, cfg.train)  # counts both shards
    path = sorted(rd.data_dir_for(0).glob("*.hcpe3"))[0]
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with caplog.at_level("WARNING", logger="dlzero.train.dataset"):
        buf, plan = build_window(rd, cfg.train)
    assert [rel for rel, _ in plan.shards] == ["gen-0000/shard-001.hcpe3"] and len(buf) > 0
    assert path.name in caplog.text and "checksum mismatch" in caplog.text
    (problem,) = check_run(rd.root).problems
    assert problem.where.endswith(path.name) and "(training skips this shard)" in problem.what


def test_a_timed_training_shows_no_step_total_until_it_is_fixed(tmp_path, monkeypatch, capsys):
    """Before: the bar showed 1,000,000,000 steps until the first 50 were timed."""
    from dlzero.model import new_model
    from dlzero.train import trainer as trainer_module
    from dlzero.train.budget import UNTIMED_STEPS
    from dlzero.train.supervised import load_supervised
    from dlzero.train.trainer import Segment, Trainer

    monkeypatch.setattr(trainer_module, "StepBudget", SteppedBudget)
    path = tmp_path / "games.hcpe"
    write_random_hcpe(path, 4, seed=7)
    cfg = tiny_config(checkpoint_every=1000)
    trainer = Trainer(new_model(cfg.model, seed=1), cfg.train, torch_cpu())
    seg = Segment(0, UNTIMED_STEPS, seed=5, seconds=3.0)
    trainer.fit(load_supervised([path], cfg.train.val_lambda), seg, None, None, progress=True)
    err = capsys.readouterr().err
    assert str(UNTIMED_STEPS) not in err, err[-2000:]
    assert f"{seg.steps}/{seg.steps}" in err, err[-2000:]  # the fitted count once it is known
