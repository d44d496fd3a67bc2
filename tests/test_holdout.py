"""Supervised hold-out by whole games (train.holdout), held-out value against the result, move-capped games.

Issue 38: a position-hash split left ~95 % of a held-out position's game-mates in training, so the
held-out value loss flattered a student that had memorised its games; the teacher hold-out scored the
value against the blended target, so it could not be compared with the loop's result-only figures; a
game stopped at the move cap gave every one of its positions a value target of 1/2.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL, TINY_MODEL_SETS
from shards import hcpe_records, selfplay_games

from dlzero.cli import main
from dlzero.config import config_from_dict
from dlzero.data.hcpe import write_hcpe
from dlzero.data.hcpe3 import FLAG_MAX_MOVES, RESULT_DRAW, Hcpe3Record, write_hcpe3
from dlzero.errors import ConfigError
from dlzero.model import PolicyValueNet
from dlzero.rundir import RunDir
from dlzero.train.buffer import BatchDecoder, PositionBuffer, value_target
from dlzero.train.dataset import buffer_from_games, buffer_from_hcpe, build_window, count_positions
from dlzero.train.holdout import position_keys
from dlzero.train.meters import Meter, summarise
from dlzero.train.supervised import load_supervised, split_supervised
from dlzero.train.trainer import Trainer, evaluate

CPU = torch.device("cpu")


def config(**train: object):
    return config_from_dict({"model": TINY_MODEL, "train": {"batch_size": 16, "device": "cpu", "validation_set": "",
                                                       **train}})


def own_keys(per_game: list[np.ndarray]) -> list[set[int]]:
    """Each game's position keys that no other game has (a shared opening position belongs to no one game)."""
    counts: dict[int, int] = {}
    for keys in per_game:
        for k in set(keys.tolist()):
            counts[k] = counts.get(k, 0) + 1
    return [{k for k in keys.tolist() if counts[k] == 1} for keys in per_game]


def sides(per_game: list[np.ndarray], train: PositionBuffer, held: PositionBuffer) -> list[bool]:
    """Whether each game is held out; fails unless every game lies entirely on one side."""
    t, h = set(position_keys(train).tolist()), set(position_keys(held).tolist())
    assert not t & h  # a held-out position that was trained on is never scored
    out = []
    for g, keys in enumerate(own_keys(per_game)):
        assert keys, f"game {g} has no position of its own"
        assert keys <= t or keys <= h, f"game {g}: {len(keys & t)} positions trained on, {len(keys & h)} held out"
        out.append(keys <= h)
    return out


def test_hcpe3_games_are_held_out_whole_and_by_the_game_alone(tmp_path):
    games = selfplay_games(200, 24, seed=11)
    path = tmp_path / "teacher.hcpe3"
    write_hcpe3(path, games)
    cfg = config(holdout_fraction=0.2, seed=4)
    train, held, report = split_supervised([path], cfg.train)
    per_game = [position_keys(buffer_from_games([g], 0.0)) for g in games]
    side = sides(per_game, train, held)
    assert 25 <= sum(side) <= 55 and sum(side) == report.held_games and report.games == 200
    assert len(train) + len(held) + report.unscored == count_positions(games)
    assert str(report).startswith(f"held out: {report.held_games} of 200 games, {len(held):,} positions, by game")

    # a game's side depends on the game and the seed, not on the file: a third of the games, reordered
    part = games[::3][::-1]
    write_hcpe3(tmp_path / "part.hcpe3", part)
    train2, held2, _ = split_supervised([tmp_path / "part.hcpe3"], cfg.train)
    assert sides([position_keys(buffer_from_games([g], 0.0)) for g in part], train2, held2) == side[::3][::-1]
    # another seed, other games
    assert sides(per_game, *split_supervised([path], config(holdout_fraction=0.2, seed=5).train)[:2]) != side


def test_hcpe_records_are_held_out_by_game_runs_or_by_a_separate_file(tmp_path, caplog):
    games = selfplay_games(40, 20, seed=12)
    records = hcpe_records(games)
    write_hcpe(tmp_path / "records.hcpe", records)
    cfg = config(holdout_fraction=0.25)
    train, held, report = split_supervised([tmp_path / "records.hcpe"], cfg.train)
    per_game = [position_keys(buffer_from_hcpe(hcpe_records([g]), 0.0)) for g in games]
    side = sides(per_game, train, held)
    assert report.games == 40 and sum(side) == report.held_games >= 5 and not report.note

    # shuffled records are no games: the split says so and warns
    write_hcpe(tmp_path / "shuffled.hcpe", records[np.random.default_rng(0).permutation(len(records))])
    with caplog.at_level(logging.WARNING, logger="dlzero.train.supervised"):
        _, _, loose = split_supervised([tmp_path / "shuffled.hcpe"], cfg.train)
    assert "do not follow one another" in loose.note and "--val" in caplog.text

    # a separate held-out file: nothing is held out of the training file
    write_hcpe(tmp_path / "val.hcpe", hcpe_records(selfplay_games(6, 20, seed=13)))
    val = config(val_files=[str(tmp_path / "val.hcpe")])
    train, held, report = split_supervised([tmp_path / "records.hcpe"], val.train)
    assert len(train) == len(records) and report.source == str(tmp_path / "val.hcpe") and report.held_games == 6
    assert len(held) + report.unscored == 120 and report.unscored >= 1  # the start position is trained on


def test_cli_val_scores_the_separate_file(tmp_path, capsys):
    write_hcpe(tmp_path / "a.hcpe", hcpe_records(selfplay_games(4, 20, seed=14)))
    write_hcpe3(tmp_path / "b.hcpe3", selfplay_games(2, 20, seed=15))
    write_hcpe(tmp_path / "c.hcpe", hcpe_records(selfplay_games(1, 20, seed=16)))
    sets = TINY_MODEL_SETS + ["train.batch_size=16", "train.device=cpu"]
    argv = ["train", "--hcpe", str(tmp_path / "a.hcpe"), "--val", str(tmp_path / "b.hcpe3"), "--val",
            str(tmp_path / "c.hcpe"), "--out", str(tmp_path / "m.pt"), "--steps", "1", "--no-progress"]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    err = capsys.readouterr().err
    assert f"1 steps on 80 positions; held out: {tmp_path / 'b.hcpe3'}, {tmp_path / 'c.hcpe'} (3 games)" in err
    assert "(value against the result); value_loss_target" in err
    assert main(["train", "--hcpe", str(tmp_path / "a.hcpe"), "--val", str(tmp_path / "x.txt"), "--out",
                 str(tmp_path / "n.pt")]) != 0 and "train.val_files" in capsys.readouterr().err


def fixed_value_net(logit: float) -> PolicyValueNet:
    """A network whose value logit is `logit` for every input."""
    net = PolicyValueNet(config().model)
    with torch.no_grad():
        net.value_fc2.weight.zero_()
        net.value_fc2.bias.fill_(logit)
    return net.eval()


def bce(q: float, target: float) -> float:
    return -(target * math.log(q) + (1 - target) * math.log(1 - q))


def test_held_out_value_is_scored_against_the_result_and_the_target_beside_it():
    buf = buffer_from_games(selfplay_games(2, 12, seed=17), 1.0)  # λ 1: the target is the eval alone
    buf = buf.subset(np.flatnonzero(buf.result == 1))  # the winners' positions; evals in [-500, 500)
    q = 1 / (1 + math.exp(-2 * 0.3))
    figures = evaluate(fixed_value_net(0.3), buf, 4, CPU)
    by_result = np.mean([bce(q, z) for z in buf.result.tolist()])
    by_target = np.mean([bce(q, v) for v in buf.value.tolist()])
    assert figures["value_loss"] == pytest.approx(by_result, rel=1e-5)
    assert figures["value_loss_target"] == pytest.approx(by_target, rel=1e-5)
    assert abs(by_result - by_target) > 0.1  # the two are different figures here


def capped(game: Hcpe3Record) -> Hcpe3Record:
    game.result = RESULT_DRAW | FLAG_MAX_MOVES
    return game


def test_move_capped_games_keep_their_policy_and_lose_their_value_target():
    games = selfplay_games(2, 8, seed=18)
    capped(games[1])
    dropped, drawn = buffer_from_games(games, 0.5), buffer_from_games(games, 0.5, capped="draw")
    n = count_positions([games[0]])
    assert len(dropped) == len(drawn) == count_positions(games) == 2 * n  # policy targets kept
    assert not np.isnan(dropped.value[:n]).any() and np.isnan(dropped.value[n:]).all()
    evals = [m.eval for m in games[1].moves if m.is_target]
    assert np.allclose(drawn.value[n:], value_target(np.full(n, 0.5), np.array(evals), 0.5))
    # value-only plies (train.value_plies: searched) of a capped game are no rows at all
    for g in games:
        for m in g.moves[:2]:
            m.eval = 7  # the two replay-only plies, with a cheap search's eval: value-only rows
    searched = buffer_from_games(games, 0.5, value_plies="searched")
    assert len(searched) == 2 * n + 2 == count_positions(games, "searched")
    assert len(buffer_from_games(games, 0.5, value_plies="searched", capped="draw")) == 2 * n + 4
    # hcpe2 records flag the move cap the same way
    records = hcpe_records(games)
    records["gameResult"][len(records) // 2:] |= FLAG_MAX_MOVES
    assert np.isnan(buffer_from_hcpe(records, 0.0).value).sum() == len(records) - len(records) // 2
    assert not np.isnan(buffer_from_hcpe(records, 0.0, "draw").value).any()
    with pytest.raises(ConfigError, match="value_of_capped_games"):
        buffer_from_games(games, 0.5, capped="keep")


def test_a_capped_games_rows_train_the_policy_and_not_the_value():
    buf = buffer_from_games([capped(g) for g in selfplay_games(1, 10, seed=19)], 0.0)
    batch = BatchDecoder(16).decode(buf, np.arange(len(buf)))
    assert not batch.has_value.any() and torch.isfinite(batch.value).all()
    cfg = config(weight_decay=0.0, grad_clip=0.0)

    def moved(data: PositionBuffer) -> tuple[bool, bool]:
        trainer = Trainer(PolicyValueNet(cfg.model), cfg.train, CPU)
        value0 = trainer.model.value_fc2.weight.clone()
        policy0 = trainer.model.policy_out.weight.clone()
        trainer.step(BatchDecoder(16).decode(data, np.arange(len(data))), 0.1)
        return (not torch.equal(trainer.model.value_fc2.weight, value0),
                not torch.equal(trainer.model.policy_out.weight, policy0))

    assert moved(buf) == (False, True)
    draw = buffer_from_games([capped(g) for g in selfplay_games(1, 10, seed=19)], 0.0, capped="draw")
    assert moved(draw) == (True, True)
    # the held-out value figures count only rows with a value target; the policy figures count every row
    plain = buffer_from_games(selfplay_games(1, 10, seed=20), 0.0)
    both = evaluate(fixed_value_net(0.2), PositionBuffer.concat([plain, buf]), 8, CPU)
    alone = evaluate(fixed_value_net(0.2), plain, 8, CPU)
    assert both["value_loss"] == pytest.approx(alone["value_loss"], rel=1e-6)
    assert both["policy_loss"] != pytest.approx(alone["policy_loss"], rel=1e-6)
    assert math.isnan(evaluate(fixed_value_net(0.2), buf, 8, CPU)["value_loss"])


def test_self_play_window_and_supervised_files_drop_capped_values(tmp_path):
    games = selfplay_games(3, 10, seed=21)
    capped(games[2])
    rd = RunDir.create(tmp_path / "run", config(window_min=100))
    write_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3", games)
    write_hcpe3(tmp_path / "t.hcpe3", games)
    n = count_positions(games[:2])
    for cfg, dropped in ((config(window_min=100), True), (config(window_min=100, value_of_capped_games="draw"),
                                                           False)):
        buf, _ = build_window(rd, cfg.train)
        assert np.isnan(buf.value[n:]).all() == dropped and not np.isnan(buf.value[:n]).any()
        supervised = load_supervised([tmp_path / "t.hcpe3"], 0.3, cfg.train.value_of_capped_games)
        assert np.isnan(supervised.value[n:]).all() == dropped and len(supervised) == count_positions(games)


def test_loading_positions_alone_computes_no_game_keys(tmp_path, monkeypatch):
    """Issue 41: `load_supervised` hashed every game into keys (a pass over every position) that only a
    split by game uses, and threw them away."""
    import dlzero.train.supervised as supervised

    games = selfplay_games(2, 6, seed=3)
    write_hcpe3(tmp_path / "t.hcpe3", games)
    write_hcpe(tmp_path / "t.hcpe", hcpe_records(games))
    files = [tmp_path / "t.hcpe3", tmp_path / "t.hcpe"]
    keyed = supervised.load_labelled(files, 0.3).buf

    def no_keys(*args):
        raise AssertionError("game keys computed")

    monkeypatch.setattr(supervised, "game_keys", no_keys)
    monkeypatch.setattr(supervised, "record_game_keys", no_keys)
    alone = load_supervised(files, 0.3)
    assert len(alone) == len(keyed) == count_positions(games) + sum(len(g.moves) for g in games)
    np.testing.assert_array_equal(alone.value, keyed.value)


def test_a_checkpointed_meter_from_before_value_counts_averages_over_every_sample():
    meter = Meter(CPU)
    meter.load([4.0, 2.0, 1.0, 4.0, 1.0, 2.0, 0.0, 0.0, 4.0])  # sums saved before the value-row count existed
    assert summarise(meter.totals())["value_loss"] == pytest.approx(0.5)
    meter.add(torch.tensor(1.0), torch.tensor(3.0), torch.tensor(1), 4, torch.tensor(0), torch.tensor(0),
              values=torch.tensor(2))
    assert summarise(meter.totals())["value_loss"] == pytest.approx(5.0 / 6.0)
