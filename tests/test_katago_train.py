"""KataGo's training switches: the opponent's-reply target and head, policy-surprise weights, and
training a few steps with each switch (and global pooling) on."""

from __future__ import annotations

import csv
import logging
import random

import cshogi
import numpy as np
import pytest
import torch
from cshogi.dlshogi import make_move_label
from test_train import make_run, random_game, tiny_config

from dlzero.data.hcpe import HCPE_DTYPE
from dlzero.data.hcpe3 import Hcpe3Record, MoveRecord
from dlzero.model import PolicyValueNet, load_model_file, new_model
from dlzero.train.buffer import BatchDecoder, PositionBuffer
from dlzero.train.dataset import buffer_from_games, buffer_from_hcpe
from dlzero.train.reply import reply_loss
from dlzero.train.surprise import policy_surprise, surprise_weights
from dlzero.train.trainer import Trainer, policy_loss, value_loss

CPU = torch.device("cpu")


def _oracle_replies(games: list[Hcpe3Record]) -> list[int]:
    """For each training ply (visit counts > 0), cshogi's label of the next move from its mover's side, or -1."""
    out = []
    for game in games:
        board = game.start_board()
        for ply, move in enumerate(game.moves):
            if move.is_target and move.candidates[:, 1].sum() > 0:
                if ply + 1 < len(game.moves):
                    after = cshogi.Board()
                    after.set_sfen(board.sfen())
                    after.push_move16(move.move16)
                    out.append(make_move_label(after.move_from_move16(game.moves[ply + 1].move16), after.turn))
                else:
                    out.append(-1)
            board.push_move16(move.move16)
    return out


@pytest.fixture(scope="module")
def games() -> list[Hcpe3Record]:
    rng = random.Random(11)
    return [random_game(rng, max_ply=rng.randint(20, 50)) for _ in range(6)]


@pytest.fixture(scope="module")
def buf(games) -> PositionBuffer:
    return buffer_from_games(games, 0.3)


def test_reply_targets_match_cshogi_labels_and_last_plies_are_masked(games, buf):
    expected = _oracle_replies(games)
    assert len(expected) == len(buf)
    assert buf.reply.tolist() == expected
    assert expected.count(-1) == len(games)  # random_game's last ply is a search ply: one masked per game
    # both sides reply somewhere (White's labels are rotated, so a colour mix-up would show)
    assert len({lab for lab in expected if lab >= 0}) > 20


def test_reply_target_survives_subset_concat_and_decode(buf):
    idx = np.array([5, 0, len(buf) - 1, 3])
    sub = buf.subset(idx)
    assert sub.reply.tolist() == buf.reply[idx].tolist()
    both = PositionBuffer.concat([sub, buf.subset(np.array([1, 2]))])
    assert both.reply.tolist() == buf.reply[[5, 0, len(buf) - 1, 3, 1, 2]].tolist()
    batch = BatchDecoder(8).decode(buf, idx)
    assert batch.reply.dtype == torch.int64 and batch.reply.tolist() == buf.reply[idx].tolist()


def test_game_ending_before_a_reply_and_hcpe_have_no_reply():
    board = cshogi.Board()
    game = Hcpe3Record.from_board(board)
    first = next(iter(board.legal_moves))
    game.moves.append(MoveRecord(first & 0xFFFF, 0, np.array([[first & 0xFFFF, 10]], np.uint16)))
    assert buffer_from_games([game], 0.0).reply.tolist() == [-1]
    records = np.zeros(3, HCPE_DTYPE)
    for r in records:
        board.to_hcp(r["hcp"])
    records["bestMove16"] = first & 0xFFFF
    assert buffer_from_hcpe(records, 0.0).reply.tolist() == [-1, -1, -1]


def test_reply_loss_is_zero_where_masked():
    logits = torch.randn(3, 2187)
    target = torch.tensor([4, -1, 2000])
    loss = reply_loss(logits, target)
    assert loss[1] == 0
    assert loss[0] == pytest.approx(-torch.log_softmax(logits[0], 0)[4].item(), rel=1e-5)


def test_reply_head_stays_out_of_model_files():
    """Inference is unchanged: the network the trainer exports has the plain state dict."""
    cfg = tiny_config(aux_reply_weight=0.15)
    trainer = Trainer(new_model(cfg.model, seed=0), cfg.train, CPU)
    assert trainer.train_net.reply is not None
    assert set(trainer.export_model().state_dict()) == set(PolicyValueNet(cfg.model).state_dict())
    assert "reply_head" in trainer.state_dict() and trainer.state_dict()["reply_head"]


def test_reply_head_checkpoint_round_trip_and_switching(tmp_path, caplog):
    on = tiny_config(aux_reply_weight=0.15)
    a = Trainer(new_model(on.model, seed=0), on.train, CPU)
    with torch.no_grad():
        a.train_net.reply.bias.normal_()
    state = a.state_dict()
    b = Trainer(new_model(on.model, seed=1), on.train, CPU)
    b.load_state_dict(state, tmp_path / "c.pt")
    assert torch.equal(b.train_net.reply.bias, a.train_net.reply.bias)
    off = tiny_config()
    c = Trainer(new_model(off.model, seed=1), off.train, CPU)
    with caplog.at_level(logging.WARNING):
        c.load_state_dict(state, tmp_path / "c.pt")  # switched off: resumes, optimizer afresh
    assert "switched off" in caplog.text
    d = Trainer(new_model(on.model, seed=1), on.train, CPU)
    d.load_state_dict(c.state_dict(), tmp_path / "c.pt")  # switched on: a fresh head
    assert "switched on" in caplog.text


# ---------------------------------------------------------------- surprise


def test_policy_surprise_is_the_kl_divergence():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 2187)).astype(np.float32)
    target = np.zeros((4, 2187), np.float32)
    target[:, :3] = [0.5, 0.5, 0.0]
    prior = np.exp(logits - logits.max(1, keepdims=True))
    prior /= prior.sum(1, keepdims=True)
    expected = 0.5 * (np.log(0.5 / prior[:, 0]) + np.log(0.5 / prior[:, 1]))
    got = policy_surprise(torch.from_numpy(logits), torch.from_numpy(target)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_surprise_weights_favour_targets_the_prior_disagrees_with():
    logits = torch.full((4, 2187), -5.0)
    logits[:, 0] = 5.0  # the prior puts almost everything on label 0
    target = torch.zeros(4, 2187)
    target[0, 0] = target[1, 0] = 1.0  # agree
    target[2, 7] = 1.0  # disagree
    target[3, 0] = target[3, 7] = 0.5  # half
    w = surprise_weights(logits, target, 0.5)
    assert w[2] > w[3] > w[0] and w[0] == pytest.approx(w[1].item())
    assert w.mean().item() == pytest.approx(1.0, abs=1e-5)
    assert w.min().item() >= 0.5 - 1e-6  # the uniform half
    assert torch.equal(surprise_weights(logits, target, 0.0), torch.ones(4))
    same = torch.softmax(logits, 1)
    assert torch.allclose(surprise_weights(logits, same, 0.5), torch.ones(4))


# ---------------------------------------------------------------- training with the switches on


SWITCHES = {
    "plain": ({}, {}),
    "global_pool": ({"global_pool_blocks": [0]}, {}),
    "reply": ({}, {"aux_reply_weight": 0.15}),
    "surprise": ({}, {"surprise_weight": 0.5}),
    "all": ({"global_pool_blocks": [0]}, {"aux_reply_weight": 0.15, "surprise_weight": 0.5}),
}


def _losses(trainer: Trainer, batch) -> tuple[float, float]:
    """(policy + value loss, reply loss) of the batch, unweighted, in training mode without updating."""
    with torch.no_grad():
        logits, value, reply = trainer.train_net(batch.planes)
    base = (policy_loss(logits, batch.policy) + value_loss(value, batch.value)).mean().item()
    return base, (reply_loss(reply, batch.reply).mean().item() if reply is not None else 0.0)


@pytest.mark.parametrize("name", list(SWITCHES))
def test_a_few_steps_lower_the_loss_on_a_fixed_batch(name, buf):
    model_keys, train_keys = SWITCHES[name]
    cfg = tiny_config(**train_keys)
    cfg.model.global_pool_blocks = model_keys.get("global_pool_blocks", [])
    trainer = Trainer(new_model(cfg.model, seed=2), cfg.train, CPU)
    batch = BatchDecoder(48).decode(buf, np.arange(48))
    trainer.train_net.train()
    before = _losses(trainer, batch)
    for _ in range(25):
        trainer.step(batch, 0.05)
    after = _losses(trainer, batch)
    assert after[0] < 0.7 * before[0], (before, after)
    if "aux_reply_weight" in train_keys:
        assert after[1] < 0.9 * before[1], (before, after)


def test_generation_trains_with_every_switch_on(tmp_path):
    from dlzero.train import train_generation

    cfg = tiny_config(aux_reply_weight=0.15, surprise_weight=0.5)
    cfg.model.global_pool_blocks = [0]
    rd = make_run(tmp_path / "run", cfg, (2,))
    res = train_generation(rd, cfg, steps=12, progress=False)
    model, _ = load_model_file(res.model_path)
    assert model.cfg.global_pool_blocks == [0] and np.isfinite(res.metrics["policy_loss"])
    # the reply head's loss is logged: a 2187-way guess starts near ln 2187 = 7.7 nats
    with (rd.metrics_dir / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(0.5 < float(r["reply_loss"]) < 12 for r in rows)
    assert res.metrics["reply_loss"] == pytest.approx(float(rows[-1]["reply_loss"]), rel=1e-4)
    res2 = train_generation(rd, cfg, steps=4, progress=False)  # continues from the checkpoint, head included
    assert res2.generation == 2
