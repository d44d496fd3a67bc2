"""Teacher data mixed into the self-play window (train.teacher_data, train.teacher_fraction) and the
`teach:` config section.

Real files throughout: a run directory with a generation-0 model from dlzero's own init, self-play
shards and a teacher file written by dlzero's hcpe3 writer from random legal games, with visit counts
on every ply after the first two.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import yaml
from conftest import TINY_MODEL
from shards import selfplay_games

from dlzero.cli import build_parser
from dlzero.commands import loop as loop_cmd
from dlzero.commands import teach as teach_cmd
from dlzero.commands.common import config_from_args, overrides
from dlzero.config import config_from_dict, dump_config, load_config
from dlzero.data.hcpe3 import read_hcpe3, sidecar_path, write_hcpe3
from dlzero.errors import ConfigError
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.rundir import RunDir
from dlzero.runfiles import TEACHER_DIR, VALIDATION_CSV
from dlzero.teacher import PlaySettings
from dlzero.train.dataset import WindowPlan, buffer_from_games, build_window, count_positions
from dlzero.train.generation import steps_for, train_generation
from dlzero.train.sampler import EpochSampler, MixSampler, teacher_per_batch
from dlzero.train.teacher_files import adopt_teacher_data
from dlzero.train.train_state import load_checkpoint
from dlzero.train.validation import read_rows

TINY = {"model": TINY_MODEL,
        "train": {"batch_size": 16, "steps_per_generation": 4, "min_steps": 1, "device": "cpu", "seed": 5,
                  "log_every": 2, "checkpoint_every": 2, "validation_set": "", "window_min": 5000}}
BATCH = 16


def tiny_config(**train: object):
    data = {k: dict(v) for k, v in TINY.items()}
    data["train"].update(train)
    return config_from_dict(data)


@pytest.fixture
def run(tmp_path):
    """(a new run holding 3 self-play games and no model yet, a teacher file outside it with 5 games)."""
    rd = RunDir.create(tmp_path / "run", tiny_config())
    write_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3", selfplay_games(3, 30, seed=1))
    teacher = tmp_path / "teacher.hcpe3"
    write_hcpe3(teacher, selfplay_games(5, 24, seed=2), meta={"teacher": "test"})
    return rd, teacher


def make_generation_zero(rd: RunDir) -> None:
    """A random generation-0 model from dlzero's own init, promoted (what the warm start leaves)."""
    save_model(new_model(rd.config().model, seed=1), rd.model_path(0), ModelMetadata(generation=0))
    rd.set_best(0)


def adopt(rd: RunDir, teacher, cfg):
    """List the teacher file with the run as `dlzero loop --init-from` does before generation 0 exists."""
    return adopt_teacher_data(rd, cfg, [teacher])


# ---------------------------------------------------------------- the sampler


def test_mix_sampler_draws_a_fixed_share_of_every_batch_by_hand():
    n_main, n_teacher, seed = 50, 30, 9
    sampler = MixSampler(n_main, n_teacher, 0.25, seed)
    k = teacher_per_batch(0.25, BATCH)
    assert k == 4 and teacher_per_batch(0.1, BATCH) == 2 and teacher_per_batch(0.99, BATCH) == BATCH - 1
    batches = [sampler.global_batch(b * BATCH, BATCH) for b in range(4)]
    for idx in batches:
        assert len(idx) == BATCH and (idx >= n_main).sum() == k  # exactly 4 teacher entries, 12 self-play
    # by hand: batch b takes entries [12b, 12b + 12) of the self-play stream and [4b, 4b + 4) of the
    # teacher stream; 48 and 16 entries lie inside the first epoch of each, so none repeats
    main = np.concatenate([np.sort(i[i < n_main]) for i in batches])
    teach = np.concatenate([np.sort(i[i >= n_main]) - n_main for i in batches])
    main_stream = EpochSampler(n_main, seed).take(0, 48)
    teacher_stream = sampler.teacher.take(0, 16)
    for b in range(4):
        assert set(main[12 * b:12 * b + 12]) == set(main_stream[12 * b:12 * b + 12])
        assert set(teach[4 * b:4 * b + 4]) == set(teacher_stream[4 * b:4 * b + 4])
    assert len(set(main)) == 48 and len(set(teach)) == 16
    # a pure function of the cursor, and DDP ranks split the same global batch between them
    assert np.array_equal(MixSampler(n_main, n_teacher, 0.25, seed).global_batch(3 * BATCH, BATCH), batches[3])
    ranks = np.concatenate([sampler.batch(2 * BATCH, BATCH, rank, 4) for rank in range(4)])
    assert np.array_equal(ranks, batches[2])


def test_steps_keep_reuse_of_self_play_positions():
    cfg = tiny_config(reuse=4.0, steps_per_generation=10_000)
    assert steps_for(1200, cfg) == 300  # 1200 x 4 / 16
    assert steps_for(1200, cfg, teacher_per_batch=4) == 400  # 1200 x 4 / (16 - 4) self-play samples a step


# ---------------------------------------------------------------- the window


def test_window_draws_the_configured_fraction_from_the_teacher_file(run):
    rd, teacher = run
    cfg, copies = adopt(rd, teacher, tiny_config(teacher_fraction=0.25))
    assert cfg.train.teacher_data == [f"{TEACHER_DIR}/teacher.hcpe3"]
    assert copies == [rd.root / TEACHER_DIR / "teacher.hcpe3"]
    selfplay_n = count_positions(read_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3"))
    teacher_games = read_hcpe3(teacher)
    teacher_n = count_positions(teacher_games)
    assert (selfplay_n, teacher_n) == (3 * 28, 5 * 22)

    buf, plan = build_window(rd, cfg.train)
    assert plan.window_positions == selfplay_n and plan.total_positions == selfplay_n  # self-play only
    assert plan.teacher == [(f"{TEACHER_DIR}/teacher.hcpe3", teacher_n)] and plan.teacher_fraction == 0.25
    assert len(buf) == selfplay_n + teacher_n
    expected = buffer_from_games(teacher_games, cfg.train.val_lambda)
    assert np.array_equal(buf.base_hcp[selfplay_n:], expected.base_hcp)  # the teacher file, after the window

    sampler = plan.sampler(seed=11)
    assert isinstance(sampler, MixSampler)
    steps = 30
    drawn = np.concatenate([sampler.batch(s * BATCH, BATCH) for s in range(steps)])
    # by hand: round(0.25 x 16) = 4 teacher positions in each of 30 batches
    assert (drawn >= selfplay_n).sum() == 4 * steps and (drawn < selfplay_n).sum() == 12 * steps
    teacher_hcps = {bytes(h) for h in expected.base_hcp}
    assert all(bytes(buf.base_hcp[i]) in teacher_hcps for i in drawn[drawn >= selfplay_n])

    assert WindowPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan  # the checkpoint's copy
    old = {k: v for k, v in plan.to_dict().items() if not k.startswith("teacher")}  # a plan from before
    assert WindowPlan.from_dict(old).teacher == [] and isinstance(WindowPlan.from_dict(old).sampler(1), EpochSampler)

    teacher.unlink()  # the run keeps its own copy: a resumed run does not need the original
    assert len(build_window(rd, cfg.train)[0]) == selfplay_n + teacher_n


def test_fraction_zero_draws_none(run):
    rd, teacher = run
    cfg, _ = adopt(rd, teacher, tiny_config())
    assert cfg.train.teacher_fraction == 0.0 and cfg.train.teacher_data  # recorded, not mixed
    buf, plan = build_window(rd, cfg.train)
    assert plan.teacher == [] and len(buf) == plan.window_positions == 3 * 28
    sampler = plan.sampler(seed=11)
    assert isinstance(sampler, EpochSampler)
    assert all((sampler.batch(s * BATCH, BATCH) < len(buf)).all() for s in range(20))


def test_bad_teacher_settings(run, tmp_path):
    rd, teacher = run
    with pytest.raises(ConfigError, match="lists no teacher files"):
        build_window(rd, tiny_config(teacher_fraction=0.5).train)
    inside = rd.data_dir / "teacher.hcpe3"
    write_hcpe3(inside, read_hcpe3(teacher))
    with pytest.raises(ConfigError, match="self-play"):  # would be scored as held-out next games
        build_window(rd, tiny_config(teacher_fraction=0.5, teacher_data=[str(inside)]).train)
    with pytest.raises(ConfigError, match="does not exist"):
        build_window(rd, tiny_config(teacher_fraction=0.5, teacher_data=["teacher/missing.hcpe3"]).train)


# ---------------------------------------------------------------- a generation with teacher data


def test_generation_mixes_teacher_data_and_validation_never_sees_it(run):
    rd, teacher = run
    cfg, _ = adopt(rd, teacher, tiny_config(teacher_fraction=0.5, validation_positions=4096))
    make_generation_zero(rd)
    res = train_generation(rd, cfg, progress=False)
    selfplay_games = read_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3")
    assert res.generation == 1 and res.positions == count_positions(selfplay_games) == 84
    # steps follow the self-play data: 84 new positions x reuse 4 / (16 - 8 teacher) = 42, capped at 4
    assert res.steps == 4
    plan = load_checkpoint(rd.train_dir / "checkpoint.pt", cfg.model)["segment"]["plan"]
    assert plan["teacher"] == [[f"{TEACHER_DIR}/teacher.hcpe3", 110]] and plan["teacher_fraction"] == 0.5

    rows = [r for r in read_rows(rd.metrics_dir / VALIDATION_CSV) if r["set"] == "next"]
    assert rows and all(r["games"] == "3" and r["positions"] == "84" for r in rows)  # self-play's games only
    seen = json.loads((rd.train_dir / "seen-shards.json").read_text())
    assert seen == ["gen-0000/shard-000.hcpe3"]
    with (rd.metrics_dir / "metrics.csv").open() as fh:
        assert [int(r["step"]) for r in csv.DictReader(fh)] == [2, 4]


# ---------------------------------------------------------------- stored with the run


def test_init_from_keeps_a_copy_in_the_run_config(run):
    rd, teacher = run
    cfg, copies = adopt(rd, teacher, tiny_config())
    again, _ = adopt(rd, teacher, cfg)  # a rerun before generation 0 exists: no second entry
    assert again.train.teacher_data == cfg.train.teacher_data == ["teacher/teacher.hcpe3"]
    assert rd.config().train.teacher_data == ["teacher/teacher.hcpe3"]  # in config.yaml
    assert copies[0].read_bytes() == teacher.read_bytes()
    assert sidecar_path(copies[0]).read_bytes() == sidecar_path(teacher).read_bytes()
    model = rd.root / "m.pt"
    assert adopt(rd, model, tiny_config()) == (tiny_config(), [model])  # a model to start from: not teacher data
    make_generation_zero(rd)  # the run has a best model: --init-from is ignored, nothing is copied or listed
    assert adopt(rd, teacher, tiny_config()) == (tiny_config(), [teacher])


# ---------------------------------------------------------------- the config and the flags


def test_teach_flags_override_the_teach_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"teach": {"teacher": "miniosl", "positions": 500, "workers": 3,
                                              "sample_plies": 5, "out": "file.hcpe3"},
                                    "selfplay": {"max_moves": 256, "random_plies": 8}}))
    spec = "usi:/opt/my engine;Threads=1;go=byoyomi 100 #1"
    args = build_parser().parse_args(["teach", "--config", str(path), "--teacher", spec, "--source", "a.hcpe3",
                                      "runs/x y", "--max-moves", "200", "--seed", "7"])
    cfg = config_from_args(args, teach_cmd.FLAG_KEYS)
    t = cfg.teach
    assert (t.teacher, t.positions, t.workers, t.out, t.seed) == (spec, 500, 3, "file.hcpe3", 7)
    assert t.source == ["a.hcpe3", "runs/x y"] and (t.sample_plies, t.max_moves) == (5, 200)
    play = teach_cmd.play_settings(cfg)
    assert (play.sample_plies, play.max_moves, play.declaration) == (5, 200, cfg.search.entering_king_rule)
    assert config_from_dict(yaml.safe_load(dump_config(cfg))) == cfg  # what a file stores reads back the same

    plain = config_from_args(build_parser().parse_args(["teach", "--config", str(path), "--sample-plies", "-1"]),
                             teach_cmd.FLAG_KEYS)
    assert (teach_cmd.play_settings(plain).sample_plies, teach_cmd.play_settings(plain).max_moves) == (8, 256)
    # a teacher game played without a config (`PlaySettings()`) goes by the config's defaults
    assert PlaySettings() == teach_cmd.play_settings(config_from_dict({}))
    with pytest.raises(ConfigError, match="--teacher SPEC and --out FILE"):
        teach_cmd.run(build_parser().parse_args(["teach", "--positions", "10"]))


def test_loop_flag_and_checks_of_the_teacher_keys():
    args = build_parser().parse_args(["loop", "--run", "r", "--teacher-fraction", "0.25"])
    assert "train.teacher_fraction=0.25" in overrides(args, loop_cmd.FLAGS)
    assert load_config(None, overrides(args, loop_cmd.FLAGS)).train.teacher_fraction == 0.25
    for bad, fragment in [("train.teacher_fraction=1", "below 1"), ("train.teacher_fraction=-0.1", "below 1"),
                          ("train.teacher_data=[games.csa]", ".hcpe3 or .hcpe"), ("teach.sample_plies=-2", "-1"),
                          ("teach.max_moves=0", "-1"), ("teach.workers=0", "> 0")]:
        with pytest.raises(ConfigError, match=fragment):
            load_config(None, [bad])
    assert math.isclose(load_config(None, ["train.teacher_fraction=0.999"]).train.teacher_fraction, 0.999)
