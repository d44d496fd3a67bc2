"""Held-out validation (train.validation) and training volume tied to new data (train.generation.steps_for)."""

from __future__ import annotations

import math

import cshogi
import numpy as np
import pytest
import torch

from dlzero.config import ModelConfig, config_from_dict
from dlzero.data.hcpe3 import BLACK_WIN, RESULT_DRAW, Hcpe3Record, MoveRecord
from dlzero.encoding import labels_of
from dlzero.model import PolicyValueNet
from dlzero.train.generation import steps_for
from dlzero.train.validation import (
    CONSTANT_VALUE_LOSS,
    VALIDATION_DIR,
    ValidationLog,
    fixed_set,
    held_out,
    read_rows,
    score,
)


def _game(moves: list[tuple[str, list[tuple[str, int]]]], result: int) -> Hcpe3Record:
    board = cshogi.Board()
    record = Hcpe3Record.from_board(board)
    for usi, cands in moves:
        m16 = cshogi.move16(board.move_from_usi(usi))
        rows = [[cshogi.move16(board.move_from_usi(c)), n] for c, n in cands]
        record.moves.append(MoveRecord(m16, 0, np.array(rows, np.uint16).reshape(-1, 2)))
        board.push_usi(usi)
    record.result = result
    return record


def _label(usi: str, sfen_moves: list[str]) -> int:
    board = cshogi.Board()
    for m in sfen_moves:
        board.push_usi(m)
    return int(labels_of(np.array([cshogi.move16(board.move_from_usi(usi))]), board.turn)[0])


def _fixed_net(policy_bias: torch.Tensor, value_logit: float) -> PolicyValueNet:
    """A network whose policy logits are `policy_bias` and whose value logit is `value_logit` everywhere."""
    net = PolicyValueNet(ModelConfig(blocks=1, channels=8))
    with torch.no_grad():
        net.policy_out.weight.zero_()
        net.policy_bias.copy_(policy_bias)
        net.value_fc2.weight.zero_()
        net.value_fc2.bias.fill_(value_logit)
    return net.eval()


def test_heldout_figures_match_a_hand_computation():
    # game 1 (Black wins): Black's 7g7f searched 3:1 against 2g2f, then White's 3c3d (the same label as
    # Black's 7g7f: labels are from the mover's side); game 2 (a draw): Black's 2g2f
    g1 = _game([("7g7f", [("7g7f", 3), ("2g2f", 1)]), ("3c3d", [("3c3d", 5)])], BLACK_WIN)
    g2 = _game([("2g2f", [("2g2f", 2)])], RESULT_DRAW)
    held = held_out("next", "+gen-0001", [g1, g2], max_positions=100)
    assert len(held.buf) == 3 and held.games == 2
    l76 = _label("7g7f", [])
    assert _label("3c3d", ["7g7f"]) == l76  # the premise of the hand computation
    bias = torch.zeros(2187)
    bias[l76] = 2.0
    b = 0.5
    figures = score(_fixed_net(bias, b), held, torch.device("cpu"))

    log_z = math.log(2186 + math.exp(2.0))
    expected_policy = ((log_z - 0.75 * 2.0) + (log_z - 2.0) + log_z) / 3
    q = 1 / (1 + math.exp(-2 * b))  # win rate of value logit b
    expected_value = (-math.log(q) - math.log(1 - q) - 0.5 * (math.log(q) + math.log(1 - q))) / 3
    assert figures["policy_loss"] == pytest.approx(expected_policy, rel=1e-5)
    assert figures["policy_acc"] == pytest.approx(2 / 3)  # 7g7f and 3c3d hit, 2g2f misses
    assert figures["value_loss"] == pytest.approx(expected_value, rel=1e-5)
    assert figures["value_acc"] == pytest.approx(0.5)  # decisive only: Black's win right, White's loss wrong
    # a constant win rate of 1/2 scores ln 2 whatever the results: the yardstick held-out value loss must beat
    flat = score(_fixed_net(torch.zeros(2187), 0.0), held, torch.device("cpu"))
    assert flat["value_loss"] == pytest.approx(CONSTANT_VALUE_LOSS, rel=1e-6)


def test_heldout_value_target_is_the_result_not_the_search_eval():
    g = _game([("7g7f", [("7g7f", 1)])], BLACK_WIN)
    g.moves[0].eval = -3000  # the search thought Black was lost; the held-out target stays the win
    held = held_out("next", "x", [g], max_positions=10)
    assert held.buf.value.tolist() == [1.0]


def test_heldout_sample_is_capped_and_seeded():
    games = [_game([("7g7f", [("7g7f", 1)]), ("3c3d", [("3c3d", 1)]), ("2g2f", [("2g2f", 1)])], BLACK_WIN)
             for _ in range(10)]
    a = held_out("next", "x", games, max_positions=7, seed=3)
    b = held_out("next", "x", games, max_positions=7, seed=3)
    assert len(a.buf) == 7 and np.array_equal(a.buf.ply, b.buf.ply)


def test_validation_log_writes_each_row_once(tmp_path):
    g = _game([("7g7f", [("7g7f", 1)])], BLACK_WIN)
    held = held_out("next", "+gen-0002", [g], max_positions=10)
    log = ValidationLog(tmp_path)
    figures = {"policy_loss": 1.5, "policy_acc": 0.25, "value_loss": 0.69, "value_acc": float("nan")}
    log.add("gen-0001", 40, held, figures)
    assert log.has("gen-0001", held) and not log.has("gen-0002", held)
    again = ValidationLog(tmp_path)  # a resumed process sees the row on disk
    assert again.has("gen-0001", held)
    rows = read_rows(tmp_path / "validation.csv")
    assert [(r["model"], r["set"], r["data"], r["positions"]) for r in rows] == [("gen-0001", "next", "+gen-0002", "1")]
    assert any((tmp_path / "tb").iterdir())


def test_shipped_fixed_set_loads_and_scores():
    name = "fairy-stockfish-n20k.hcpe3"
    if not (VALIDATION_DIR / name).is_file():
        pytest.skip(f"{VALIDATION_DIR / name} is not there (made by scripts/make_validation_set.py)")
    held = fixed_set(name, max_positions=256)
    assert held is not None and len(held.buf) == 256 and held.games >= 64
    assert set(np.unique(held.buf.result)) <= {0.0, 0.5, 1.0}
    figures = score(PolicyValueNet(ModelConfig(blocks=1, channels=8)).eval(), held, torch.device("cpu"))
    assert 0 <= figures["policy_acc"] <= 1 and figures["policy_loss"] > 0


def test_steps_follow_the_new_data():
    cfg = config_from_dict({"train": {"batch_size": 256, "reuse": 4.0, "min_steps": 10, "steps_per_generation": 400}})
    assert steps_for(4608, cfg) == 72  # 4608 new positions sampled 4 times: 72 batches of 256
    assert steps_for(100, cfg) == 10  # at least min_steps
    assert steps_for(10**6, cfg) == 400  # at most steps_per_generation
    fixed = config_from_dict({"train": {"reuse": 0.0, "steps_per_generation": 120}})
    assert steps_for(4608, fixed) == 120
