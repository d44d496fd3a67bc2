"""Training given in minutes (dlzero.train.budget): the step count comes from the first steps' speed."""

from __future__ import annotations

import csv

import pytest

from dlzero.errors import ConfigError
from dlzero.train import budget
from dlzero.train.budget import PROBE_END, PROBE_START, REFIT_EVERY, StepBudget
from dlzero.train.train_state import load_checkpoint
from dlzero.train.trainer import Segment, Trainer
from tests.test_train import tiny_config, write_random_hcpe


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_budget_fits_the_steps_to_the_seconds_left():
    """Steps of 0.125 s, except slow warm-up steps (0.25 s) before the timing starts: 100 s of training
    with 50 steps done in 7.5 s leaves 92.5 s, 740 steps more at the timed 0.125 s (not the warm-up's
    speed); the refits at a steady speed keep that count, and the last step ends the budget."""
    clock = FakeClock()
    b = StepBudget(100.0, 0.0, first_step=0, clock=clock)
    decided = []
    for step in range(1, 791):
        clock.now += 0.25 if step <= PROBE_START else 0.125
        if (d := b.decide(step)) is not None:
            decided.append((step, d[0]))
    assert decided == [(PROBE_END, 790), (PROBE_END + REFIT_EVERY, 790), (PROBE_END + 2 * REFIT_EVERY, 790)]
    assert b.spent() == pytest.approx(100.0)
    late = StepBudget(1.0, 0.0, first_step=0, clock=clock)
    for step in range(1, PROBE_END + 1):
        clock.now += 0.125
        d = late.decide(step)
    assert d == (PROBE_END, pytest.approx(0.125))  # the time is up in the probe: never fewer steps than done


def test_steps_that_slow_down_are_refitted_and_a_resumed_budget_has_only_the_time_left():
    """The probe says 0.1 s a step; the steps after it take 0.2 s, so the refit cuts the count: the run
    then ends within a refit's steps of its time, not at the probe's count. A resumed budget (30 s of 100
    spent) fits its steps to the 70 s left."""
    clock = FakeClock()
    b = StepBudget(100.0, 0.0, first_step=0, clock=clock)
    steps, step = None, 0
    while steps is None or step < steps:
        step += 1
        clock.now += 0.1 if step <= PROBE_END else 0.2
        if (d := b.decide(step)) is not None:
            steps = d[0]
            if step == PROBE_END:
                assert steps == PROBE_END + int((100.0 - 5.0) / 0.1 + 1e-9)  # the probe's count: 1000
    assert steps < 1000 and abs(b.spent() - 100.0) < 0.2 * REFIT_EVERY * 0.1
    resumed = StepBudget(100.0, 30.0, first_step=400, clock=clock)
    for step in range(401, 401 + PROBE_END):
        clock.now += 0.5
        d = resumed.decide(step)
    assert d is not None and d[0] == 400 + PROBE_END + int((70.0 - PROBE_END * 0.5) / 0.5 + 1e-9)
    assert resumed.spent() == pytest.approx(30.0 + PROBE_END * 0.5)


class SteppedBudget(StepBudget):
    """A StepBudget whose clock moves 0.01 s a step, so the machine's load cannot move the fit."""

    def __init__(self, seconds: float, spent: float, first_step: int) -> None:
        self.now = 0.0
        super().__init__(seconds, spent, first_step, clock=lambda: self.now)

    def decide(self, step: int) -> tuple[int, float] | None:
        self.now += 0.01
        return super().decide(step)


def test_a_timed_segment_ends_its_cosine_on_time_and_its_checkpoint_keeps_the_steps(tmp_path, monkeypatch):
    """A real fit (its clock 0.01 s a step): the segment times its first steps, fixes its length (3 s:
    300 steps), the cosine reaches ~0 at the end (the last logged LR), and the checkpoint stores the
    steps, the budget and the time spent."""
    from dlzero.model import new_model
    from dlzero.train import trainer as trainer_module
    from dlzero.train.supervised import load_supervised

    monkeypatch.setattr(trainer_module, "StepBudget", SteppedBudget)

    path = tmp_path / "games.hcpe"
    write_random_hcpe(path, 4, seed=7)
    cfg = tiny_config(lr_schedule="cosine", checkpoint_every=1000)
    buf = load_supervised([path], cfg.train.val_lambda)
    trainer = Trainer(new_model(cfg.model, seed=1), cfg.train, torch_cpu())
    seg = Segment(0, budget.UNTIMED_STEPS, seed=5, seconds=3.0)
    from dlzero.train.meters import MetricsLog

    metrics = MetricsLog(tmp_path / "m", 0)
    try:
        trainer.fit(buf, seg, tmp_path / "ckpt.pt", metrics, progress=False)
    finally:
        metrics.close()
    assert seg.step == seg.steps and abs(seg.steps - 300) <= 1  # 3 s at 0.01 s a step (float rounding)
    rows = list(csv.DictReader((tmp_path / "m" / "metrics.csv").open()))
    assert int(rows[-1]["step"]) == seg.steps
    assert float(rows[-1]["lr"]) < 0.01 * cfg.train.lr  # the schedule was fitted to the steps it ran
    saved = load_checkpoint(tmp_path / "ckpt.pt", cfg.model)["segment"]
    assert saved["steps"] == seg.steps and saved["seconds"] == 3.0 and 0.0 < saved["spent"] < 30.0


def test_supervised_in_minutes_and_the_flags_that_conflict(tmp_path):
    from dlzero.cli import main
    from dlzero.train import train_supervised

    path = tmp_path / "games.hcpe"
    write_random_hcpe(path, 4, seed=8)
    cfg = tiny_config(holdout_fraction=0.2)
    res = train_supervised([path], cfg, tmp_path / "sl.pt", minutes=0.02, progress=False)
    assert res.steps >= PROBE_END and res.model_path.is_file()
    with pytest.raises(ConfigError, match="steps or in minutes"):
        train_supervised([path], cfg, tmp_path / "x.pt", steps=5, minutes=1.0, progress=False)
    assert main(["train", "--hcpe", str(path), "--out", str(tmp_path / "y.pt"), "--steps", "3",
                 "--minutes", "1"]) != 0
    assert main(["loop", "--run", str(tmp_path / "run"), "--init-from", str(path), "--init-steps", "3",
                 "--init-minutes", "1", "--generations", "0"]) != 0
    assert not (tmp_path / "y.pt").exists() and not (tmp_path / "run" / "models").exists()


def torch_cpu():
    import torch

    return torch.device("cpu")


def test_refits_that_drift_a_little_each_time_are_logged_once_they_add_up(caplog):
    """Refits of 1 % each are not logged one by one, but the count is logged again once it is more than
    2 % from the one last logged (a 35-minute run drifted 5 % in small refits and the log never said so)."""
    from dlzero.model import new_model

    cfg = tiny_config()
    trainer = Trainer(new_model(cfg.model, seed=1), cfg.train, torch_cpu())
    seg = Segment(0, budget.UNTIMED_STEPS, seed=5, seconds=600.0)
    with caplog.at_level("INFO", logger="dlzero.train.trainer"):
        for steps in (1000, 990, 980, 970, 960):
            trainer._fit_steps(seg, steps, 0.5)
    lines = [r.getMessage() for r in caplog.records if "minutes of training" in r.getMessage()]
    assert lines == ["10.0 minutes of training at 500 ms a step: 1000 steps",
                     "10.0 minutes of training at 500 ms a step: 970 steps (was 1000, at step 0)"]
    assert seg.steps == 960


def test_supervised_value_weight_replaces_value_weight_for_teacher_data(tmp_path):
    """tiny weighs the value loss 0.25 for self-play; on teacher data `supervised_value_weight` 1.0 must
    train exactly what value_weight 1.0 trains, and not what 0.25 trains."""
    import torch

    from dlzero.model import load_model_file
    from dlzero.train import train_supervised

    path = tmp_path / "games.hcpe"
    write_random_hcpe(path, 4, seed=9)

    def weights(name: str, **train: object) -> dict:
        cfg = tiny_config(holdout_fraction=0.2, **train)
        res = train_supervised([path], cfg, tmp_path / f"{name}.pt", steps=4, progress=False)
        return load_model_file(res.model_path)[0].state_dict()

    override = weights("override", value_weight=0.25, supervised_value_weight=1.0)
    one = weights("one", value_weight=1.0)
    quarter = weights("quarter", value_weight=0.25)
    assert all(torch.equal(override[k], one[k]) for k in one)
    assert not all(torch.equal(override[k], quarter[k]) for k in quarter)
