"""`train.value_plies: searched`: every searched ply a value target (cheap searches included), a policy
target only where the search was full; mates labelled as proven, draws as the search scored them.

Hand-made games of real legal moves, written and read back as hcpe3 files; expected targets worked out by
hand from dlshogi's scale (win rate = sigmoid(cp / 756)).
"""

from __future__ import annotations

import math

import cshogi
import numpy as np
import pytest
import torch

from dlzero.config import config_from_dict
from dlzero.data.hcpe3 import BLACK_WIN, RESULT_DRAW, Hcpe3Record, MoveRecord, read_hcpe3, write_hcpe3
from dlzero.errors import ConfigError
from dlzero.rundir import RunDir
from dlzero.search.result import MAX_CP
from dlzero.train.buffer import BatchDecoder
from dlzero.train.dataset import buffer_from_games, build_window, count_positions
from dlzero.train.meters import Meter, summarise
from dlzero.train.trainer import batch_stats

LAMBDA = 0.25
NONE = np.zeros((0, 2), np.uint16)


def sigmoid(cp: float) -> float:
    return 1.0 / (1.0 + math.exp(-cp / 756.0))


def hand_game(result: int) -> Hcpe3Record:
    """Six plies of the usual opening: an opening ply (eval 0, replay only), a full search (two candidates),
    a cheap search (eval +300), another full search, a cheap search that scored exactly 0 cp, and a proven
    win for the mover (+MAX_CP, as a mate found at the root is recorded)."""
    usi = ["7g7f", "3c3d", "2g2f", "8c8d", "2f2e", "8d8e"]
    board = cshogi.Board()
    game = Hcpe3Record.from_board(board)
    moves = []
    for text in usi:
        moves.append(board.move_from_usi(text))
        board.push_usi(text)
    m16 = [cshogi.move16(m) for m in moves]
    alt = cshogi.move16(cshogi.Board("lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2")
                        .move_from_usi("4c4d"))
    game.moves = [
        MoveRecord(m16[0]),  # opening: eval 0, no candidates
        MoveRecord(m16[1], 100, np.array([[m16[1], 30], [alt, 10]], np.uint16)),
        MoveRecord(m16[2], 300),  # cheap search
        MoveRecord(m16[3], -200, np.array([[m16[3], 40]], np.uint16)),
        MoveRecord(m16[4], 0),  # cheap search scoring exactly 0 cp: indistinguishable from replay-only
        MoveRecord(m16[5], MAX_CP),  # proven
    ]
    game.result = result
    return game


def test_full_mode_keeps_only_full_searches():
    buf = buffer_from_games([hand_game(BLACK_WIN)], LAMBDA)
    assert list(buf.ply) == [1, 3]
    assert list(np.diff(buf.offsets)) == [2, 1]
    # white to move at plies 1 and 3, black won: z = 0; blended with the eval's win rate
    assert buf.value == pytest.approx([LAMBDA * sigmoid(100), LAMBDA * sigmoid(-200)], abs=1e-6)
    assert count_positions([hand_game(BLACK_WIN)]) == 2


def test_searched_mode_adds_value_only_rows_and_proven_labels():
    game = hand_game(BLACK_WIN)
    buf = buffer_from_games([game], LAMBDA, value_plies="searched")
    assert list(buf.ply) == [1, 2, 3, 5]  # the opening ply and the 0-cp ply stay out
    assert list(np.diff(buf.offsets)) == [2, 0, 1, 0]  # value-only rows have no policy entries
    # ply 2: black to move, black won (z = 1), eval +300; ply 5: white to move, proven win: 1 although
    # black won the game
    assert buf.value == pytest.approx([LAMBDA * sigmoid(100), (1 - LAMBDA) + LAMBDA * sigmoid(300),
                                       LAMBDA * sigmoid(-200), 1.0], abs=1e-6)
    assert list(buf.result) == [0.0, 1.0, 0.0, 0.0]  # the game's result stays for value accuracy
    assert count_positions([game], "searched") == len(buf) == 4


def test_searched_mode_labels_a_draw_by_the_search():
    buf = buffer_from_games([hand_game(RESULT_DRAW)], LAMBDA, value_plies="searched")
    assert buf.value == pytest.approx([sigmoid(100), sigmoid(300), sigmoid(-200), 1.0], abs=1e-6)
    full = buffer_from_games([hand_game(RESULT_DRAW)], LAMBDA)  # full mode: the blend with 0.5
    assert full.value == pytest.approx([(1 - LAMBDA) * 0.5 + LAMBDA * sigmoid(100),
                                        (1 - LAMBDA) * 0.5 + LAMBDA * sigmoid(-200)], abs=1e-6)


def test_unknown_rule_is_a_clear_error():
    with pytest.raises(ConfigError, match="value_plies"):
        count_positions([hand_game(BLACK_WIN)], "every")


def test_value_only_rows_add_no_policy_loss_and_no_top1():
    buf = buffer_from_games([hand_game(BLACK_WIN)], LAMBDA, value_plies="searched")
    batch = BatchDecoder(8).decode(buf, np.arange(len(buf)))
    assert batch.has_policy.tolist() == [True, False, True, False]
    assert batch.policy[~batch.has_policy].abs().sum() == 0
    logits = torch.zeros(4, batch.policy.shape[1])
    labels = batch.policy.argmax(dim=1)
    logits[torch.arange(4), labels] = 5.0  # right on the rows with a target; "label 0" on the others
    value = torch.zeros(4)
    pl, vl, hits, _, _, policies = batch_stats(logits, value, batch)
    only_policy = batch_stats(logits[batch.has_policy], value[batch.has_policy],
                              BatchDecoder(8).decode(buf, np.array([0, 2])))
    assert pl.item() == pytest.approx(only_policy[0].item(), rel=1e-6)  # value-only rows add nothing
    assert (hits.item(), policies.item()) == (2, 2)
    meter = Meter(torch.device("cpu"))
    meter.add(pl, vl, hits, 4, torch.tensor(0), torch.tensor(4), policies=policies)
    figures = summarise(meter.totals())
    assert figures["policy_acc"] == 1.0 and figures["policy_loss"] == pytest.approx(pl.item() / 2)
    assert figures["value_loss"] == pytest.approx(vl.item() / 4)


def test_window_counts_by_the_rule_and_recounts_when_it_changes(tmp_path):
    base = {"model": {"blocks": 1, "channels": 16}, "train": {"batch_size": 4, "validation_set": "",
                                                               "window_min": 100}}
    rd = RunDir.create(tmp_path / "run", config_from_dict(base))
    write_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3", [hand_game(BLACK_WIN), hand_game(RESULT_DRAW)])
    assert len(read_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3")) == 2
    buf, plan = build_window(rd, config_from_dict(base).train)
    assert (len(buf), plan.total_positions) == (4, 4)
    searched = config_from_dict({**base, "train": {**base["train"], "value_plies": "searched"}})
    buf, plan = build_window(rd, searched.train)  # the cached full-mode count must not be reused
    assert (len(buf), plan.total_positions) == (8, 8)
    assert np.diff(buf.offsets).tolist().count(0) == 4
