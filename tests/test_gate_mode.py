"""`gate.mode`: which candidates the loop gates (sprt: all, off: none, every-N: every N-th) and how
an ungated candidate is promoted. The loop runs in-process with its stages replaced by fakes, so
only the decision is exercised (test_loop.py runs the real stages end to end)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import dlzero.gating.promotion
import dlzero.progress.plots
import dlzero.selfplay.bootstrap
import dlzero.selfplay.session
import dlzero.train.generation
from dlzero.config import load_config
from dlzero.errors import ConfigError
from dlzero.gate_modes import gate_interval
from dlzero.loop import gate_due, run_loop
from dlzero.rundir import RunDir


def test_gate_interval_and_due():
    assert gate_interval("sprt") == 1 and gate_interval("off") is None and gate_interval("every-3") == 3
    assert [g for g in range(1, 10) if gate_due("sprt", g)] == list(range(1, 10))
    assert [g for g in range(1, 10) if gate_due("off", g)] == []
    assert [g for g in range(1, 10) if gate_due("every-3", g)] == [3, 6, 9]


@pytest.mark.parametrize("bad", ["every-0", "every-x", "every", "sometimes", "every--2"])
def test_bad_gate_mode_is_a_clear_error(bad):
    with pytest.raises(ConfigError, match="gate.mode.*every-N"):
        load_config(None, [f"gate.mode={bad}"])


@pytest.mark.parametrize(("mode", "gated", "best"), [
    ("sprt", [1, 2, 3, 4], 0),        # every candidate is gated; the fake gate rejects them all
    ("off", [], 4),                   # none is: each becomes the best at once
    ("every-2", [2, 4], 3),           # 1 and 3 promoted ungated, 2 and 4 gated (and rejected)
])
def test_loop_gates_by_mode(tmp_path, monkeypatch, mode, gated, best):
    cfg = load_config(None, [f"gate.mode={mode}"])
    rd = RunDir.create(tmp_path / "run", cfg)
    calls: list[int] = []
    bests: list[int] = []  # the best model each self-play phase starts from

    def fake_model(generation: int) -> None:
        rd.model_path(generation).parent.mkdir(parents=True, exist_ok=True)
        rd.model_path(generation).write_bytes(b"model")

    def ensure_best(rd_, cfg_, seed):
        if rd.best() is None:
            fake_model(0)
            rd.set_best(0, "bootstrap")

    def play(rd_, cfg_, wanted, workers, progress):
        bests.append(rd.best().generation)
        return SimpleNamespace(games=wanted)

    def train_gen(rd_, cfg_, progress):
        generation = max(rd.generations()) + 1
        fake_model(generation)
        return SimpleNamespace(generation=generation)

    def gate(rd_, cfg_, candidate, **kwargs):
        calls.append(candidate)
        return SimpleNamespace(promoted=False, wins=0, draws=0, losses=2, score=0.0, elo=-400.0,
                               elo_low=-800.0, elo_high=0.0)

    monkeypatch.setattr(dlzero.selfplay.bootstrap, "ensure_best_model", ensure_best)
    monkeypatch.setattr(dlzero.selfplay.session, "run_selfplay", play)
    monkeypatch.setattr(dlzero.train.generation, "train_generation", train_gen)
    monkeypatch.setattr(dlzero.gating.promotion, "gate_and_promote", gate)
    monkeypatch.setattr(dlzero.progress.plots, "plot_progress", lambda rd_: None)

    run_loop(rd, cfg, 4, progress=False)
    assert calls == gated
    assert rd.best().generation == best
    if mode == "off":
        assert bests == [0, 1, 2, 3]  # self-play always used the latest model
        assert "without a gate match" in json.loads(rd.best_path.read_text())["reason"]
