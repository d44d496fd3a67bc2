"""Gating and promotion: SPRT verdicts, the cap rule, ratings.csv, atomic best.json."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os

import pytest
from conftest import TINY_MODEL, opening_key

import dlzero.gating.promotion as promotion
from dlzero.commands import gate, match
from dlzero.config import Config, ModelConfig
from dlzero.errors import RunDirError
from dlzero.gating.match import MatchResult
from dlzero.gating.promotion import gate_and_promote
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.rundir import RunDir


def _cfg() -> Config:
    cfg = Config(model=ModelConfig(**TINY_MODEL))
    cfg.inference.threads = 1
    cfg.gate.max_games, cfg.gate.playouts, cfg.gate.max_moves = 2, 4, 16
    return cfg


@pytest.fixture()
def run(tmp_path) -> tuple[RunDir, Config]:
    cfg = _cfg()
    rd = RunDir.create(tmp_path / "run", cfg)
    for gen in (0, 1):
        save_model(new_model(cfg.model, seed=gen), rd.model_path(gen), ModelMetadata(generation=gen))
    rd.set_best(0, "random initialisation")
    return rd, cfg


def _fake_match(monkeypatch, wins: int, draws: int, losses: int, decision: str) -> None:
    def fake(*args, **kwargs) -> MatchResult:
        return MatchResult(wins=wins, draws=draws, losses=losses, llr=1.0, decision=decision)

    monkeypatch.setattr(promotion, "play_match", fake)


def _ratings(rd: RunDir) -> list[dict[str, str]]:
    with (rd.metrics_dir / "ratings.csv").open() as f:
        return list(csv.DictReader(f))


def test_real_gate_plays_records_and_rates(run, caplog):
    rd, cfg = run
    with caplog.at_level(logging.INFO, logger="dlzero.gating.promotion"):
        result = gate_and_promote(rd, cfg, 1, progress=False, parallel=2)
    # no bar, so the log says how far the gate is (each game of two; every tenth of a longer gate)
    assert [r.getMessage().split(": ")[1].split(",")[0] for r in caplog.records] == ["1/2 games", "2/2 games"]
    assert result.games == 2 and result.best == 0 and result.candidate == 1
    assert result.decision in ("cap_pass", "cap_fail")  # two games never decide the SPRT at 5%/5%
    assert result.promoted == (result.score >= cfg.gate.cap_pass_score)
    assert rd.best().generation == (1 if result.promoted else 0)
    assert sorted(p.name for p in (rd.games_dir / "gen-0001-vs-gen-0000").iterdir()) == ["game-000.csa",
                                                                                       "game-001.csa"]
    rows = _ratings(rd)
    assert len(rows) == 1 and rows[0]["generation"] == "1" and rows[0]["opponent"] == "0"
    assert rows[0]["games"] == "2" and rows[0]["decision"] == result.decision


def test_winner_is_promoted_loser_is_not(run, monkeypatch):
    rd, cfg = run
    _fake_match(monkeypatch, 0, 2, 10, "reject")
    lost = gate_and_promote(rd, cfg, 1, progress=False)
    assert (lost.decision, lost.promoted, rd.best().generation) == ("reject", False, 0)
    assert lost.elo < 0 and lost.elo_low < lost.elo < lost.elo_high
    _fake_match(monkeypatch, 10, 2, 0, "accept")
    won = gate_and_promote(rd, cfg, 1, progress=False)
    assert (won.decision, won.promoted, rd.best().generation) == ("accept", True, 1)
    assert "accept" in rd.best().reason
    assert [r["promoted"] for r in _ratings(rd)] == ["0", "1"]


@pytest.mark.parametrize("wins,losses,decision,promoted",
                         [(6, 4, "cap_pass", True), (5, 5, "cap_fail", False)])
def test_cap_rule(run, monkeypatch, wins, losses, decision, promoted):
    rd, cfg = run
    _fake_match(monkeypatch, wins, 0, losses, "continue")
    result = gate_and_promote(rd, cfg, 1, progress=False)
    assert (result.decision, result.promoted) == (decision, promoted)
    assert rd.best().generation == (1 if promoted else 0)


def test_crash_during_promotion_keeps_the_old_best(run, monkeypatch):
    rd, cfg = run
    _fake_match(monkeypatch, 10, 0, 0, "accept")
    real_replace = os.replace

    def crashing_replace(src, dst):
        if os.path.basename(dst) == "best.json":
            raise OSError("simulated crash")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crashing_replace)
    with pytest.raises(OSError, match="simulated crash"):
        gate_and_promote(rd, cfg, 1, progress=False)
    assert json.loads(rd.best_path.read_text())["generation"] == 0
    assert rd.best().generation == 0
    assert not [p for p in rd.models_dir.iterdir() if p.name.startswith(".")]  # no temp file left
    # the gate's row was written first: a restarted loop promotes by it instead of playing the gate again
    assert [(r["generation"], r["opponent"], r["promoted"]) for r in _ratings(rd)] == [("1", "0", "1")]
    monkeypatch.setattr(os, "replace", real_replace)
    line = promotion.finish_interrupted_gate(rd, 1)
    assert rd.best().generation == 1 and "promoted" in line and len(_ratings(rd)) == 1
    assert "before the loop stopped" in promotion.finish_interrupted_gate(rd, 1)  # a second restart: nothing to do


def test_interrupted_gate_with_a_rejection_or_no_row(run, monkeypatch):
    rd, cfg = run
    assert promotion.finish_interrupted_gate(rd, 1) is None  # no row yet: the gate must be played
    _fake_match(monkeypatch, 0, 0, 10, "reject")
    gate_and_promote(rd, cfg, 1, progress=False)
    line = promotion.finish_interrupted_gate(rd, 1)
    assert rd.best().generation == 0 and "kept best" in line and len(_ratings(rd)) == 1


def test_edge_cases(run):
    rd, cfg = run
    with pytest.raises(RunDirError):
        gate_and_promote(rd, cfg, 7, progress=False)
    with pytest.raises(RunDirError):
        gate_and_promote(rd, cfg, 0, progress=False)
    rd.best_path.unlink()
    first = gate_and_promote(rd, cfg, 0, progress=False)
    assert (first.decision, first.promoted, rd.best().generation) == ("no_best", True, 0)


def test_gate_command(run, capsys):
    rd, _ = run
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    gate.register(sub)
    match.register(sub)
    args = parser.parse_args(["gate", "--run", str(rd.root), "--games", "2", "--playouts", "2",
                              "--threads", "1", "--set", "gate.max_moves=12", "--no-progress"])
    assert args.func(args) == 0
    assert "gen 1 vs gen 0: 2 games" in capsys.readouterr().out
    args = parser.parse_args(["match", str(rd.model_path(1)), "random", "--games", "2", "--playouts", "2",
                              "--threads", "1", "--set", "gate.max_moves=12"])
    assert args.func(args) == 0
    assert "2 games, W-D-L" in capsys.readouterr().out


def test_match_summary_gives_the_score_first_and_no_elo_for_a_sweep():
    even = match.summary(MatchResult(wins=6, draws=2, losses=4, pairs=[0, 1, 3, 1, 1]), "x.pt", "random")
    assert even.startswith("A=x.pt vs B=random: 12 games, W-D-L 6-2-4 (for A), score 0.583 [0.320, 0.807] (95%, "
                           "Wilson); Elo (no prior, B = 0) of A: +58 [")
    sweep = match.summary(MatchResult(wins=20, pairs=[0, 0, 0, 0, 10]), "x.pt", "random")
    assert sweep.endswith("score 1.000 [0.839, 1.000] (95%, Wilson); Elo (no prior, B = 0) of A: none (a sweep "
                          "has no finite Elo; the score's bound 0.839 is at least +287)")
    swept = match.summary(MatchResult(losses=20, pairs=[10, 0, 0, 0, 0]), "x.pt", "random")
    assert swept.endswith("the score's bound 0.161 is at most -287)")


def test_successive_gates_play_different_openings(run, monkeypatch):
    rd, cfg = run
    cfg.gate.max_games = 4
    save_model(new_model(cfg.model, seed=2), rd.model_path(2), ModelMetadata(generation=2))
    starts: dict[int, set[str]] = {}
    real = promotion.play_match

    def spy(*args, **kwargs):
        result = real(*args, **kwargs)
        starts[len(starts)] = {opening_key(g) for g in result.games}
        return result

    monkeypatch.setattr(promotion, "play_match", spy)
    first = gate_and_promote(rd, cfg, 1, progress=False, parallel=4, report=False)
    gate_and_promote(rd, cfg, 2, progress=False, parallel=4, report=False)
    assert len(starts[0]) == len(starts[1]) == 2 and not starts[0] & starts[1]
    assert sum(first.pairs) == 2 and "pairs 0/0.5/1/1.5/2: " in first.summary()
