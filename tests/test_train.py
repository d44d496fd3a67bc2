"""Trainer: learning, exact resume, the replay window, bad inputs, supervised mode, the CLI.

Data comes from real cshogi random play. Each full-search ply gets visit counts over a few legal
moves, most of them on one move chosen by a fixed rule (the largest move16), so there is a policy
to learn; the played move is drawn from the candidates.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import random
import shutil
from pathlib import Path

import cshogi
import numpy as np
import pytest
import torch
from conftest import TINY_MODEL
from shards import hcpe_records

from dlzero.config import Config, config_from_dict
from dlzero.data.hcpe import write_hcpe
from dlzero.data.hcpe3 import Hcpe3Record, MoveRecord, write_hcpe3
from dlzero.errors import DlzeroError, ModelFileError
from dlzero.model import ModelMetadata, load_model_file, new_model, save_model
from dlzero.rundir import RunDir

TINY = {
    "model": TINY_MODEL,
    "train": {"batch_size": 32, "lr": 0.05, "steps_per_generation": 50, "window_min": 5000,
              "checkpoint_every": 20, "log_every": 10, "device": "cpu", "seed": 3},
}


def tiny_config(**train: object) -> Config:
    data = {k: dict(v) for k, v in TINY.items()}
    data["train"].update(train)
    return config_from_dict(data)


def random_game(rng: random.Random, max_ply: int = 70, random_plies: int = 4) -> Hcpe3Record:
    """A random game; every ply after the opening is a 'full search' with visit counts."""
    board = cshogi.Board()
    game = Hcpe3Record.from_board(board)
    for ply in range(max_ply):
        legal = list(board.legal_moves)
        if not legal:
            break
        if ply < random_plies:
            move, cands = rng.choice(legal), np.zeros((0, 2), np.uint16)
        else:
            picked = rng.sample(legal, min(len(legal), 5))
            top = max(legal, key=lambda m: m & 0xFFFF)
            picked = [top] + [m for m in picked if m != top][:4]
            visits = [60] + [rng.randint(1, 10) for _ in picked[1:]]
            cands = np.array([[m & 0xFFFF, v] for m, v in zip(picked, visits, strict=True)], np.uint16)
            move = rng.choice(picked)
        game.moves.append(MoveRecord(move & 0xFFFF, rng.randint(-800, 800), cands))
        board.push(move)
    game.result = rng.choice([0, 1, 2, 1, 2])
    return game


def make_run(root: Path, cfg: Config, games_per_shard: tuple[int, ...] = (5,), seed: int = 0) -> RunDir:
    """A run with a random generation-0 best model and hcpe3 shards of random games (older first)."""
    rd = RunDir.create(root, cfg)
    save_model(new_model(cfg.model, seed=1), rd.model_path(0), ModelMetadata(generation=0))
    rd.set_best(0)
    rng = random.Random(seed)
    for i, n in enumerate(games_per_shard):
        path = rd.data_dir_for(0) / f"shard-{i:03d}.hcpe3"
        write_hcpe3(path, [random_game(rng) for _ in range(n)])
        stamp = 1_700_000_000 + i  # distinct mtimes: shards() orders by them
        os.utime(path, (stamp, stamp))
    return rd


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """About 300 training positions in two shards."""
    root = tmp_path_factory.mktemp("base") / "run"
    make_run(root, tiny_config(), (3, 2))
    return root


def copy_run(base: Path, tmp_path: Path) -> RunDir:
    dst = tmp_path / "run"
    shutil.copytree(base, dst)
    return RunDir.open(dst)


def test_window_formula():
    from dlzero.train.dataset import window_size

    cfg = tiny_config(window_min=1000, window_max=8000, window_exponent=0.5).train
    assert window_size(0, cfg) == 1000
    assert window_size(1000, cfg) == 1000
    assert window_size(4000, cfg) == 2000  # 1000 * 4 ** 0.5
    assert window_size(10**9, cfg) == 8000


def test_loss_decreases_and_metrics_are_written(base_run, tmp_path):
    from dlzero.train import train_generation
    from dlzero.train.dataset import build_window

    rd = copy_run(base_run, tmp_path)
    cfg = tiny_config()
    buf, plan = build_window(rd, cfg.train)
    assert 250 <= len(buf) <= 400 and plan.window == 5000 and len(plan.shards) == 2
    assert np.allclose(np.add.reduceat(buf.probs, buf.offsets[:-1]), 1.0, atol=1e-5)

    res = train_generation(rd, cfg, steps=60, progress=False)
    assert res.generation == 1 and res.model_path == rd.model_path(1) and res.parent == "gen-0000"
    model, meta = load_model_file(res.model_path)
    assert meta.generation == 1 and meta.parent == "gen-0000"
    assert meta.positions == len(buf) and meta.games == 5
    with (rd.metrics_dir / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [10, 20, 30, 40, 50, 60]
    first, last = rows[0], rows[-1]
    loss = lambda r: float(r["policy_loss"]) + float(r["value_loss"])  # noqa: E731
    assert loss(last) < 0.7 * loss(first), (first, last)
    assert float(last["policy_acc"]) > float(first["policy_acc"])
    assert 0.0 <= float(last["value_acc"]) <= 1.0
    assert any((rd.metrics_dir / "tb").iterdir())
    assert res.metrics["policy_loss"] == pytest.approx(float(last["policy_loss"]), rel=1e-4)

    res2 = train_generation(rd, cfg, steps=10, progress=False)  # continues training, next generation
    assert res2.generation == 2 and res2.global_step == 70 and not res2.resumed
    with (rd.metrics_dir / "metrics.csv").open() as fh:
        assert [int(r["step"]) for r in csv.DictReader(fh)][-1] == 70


class Killed(Exception):
    pass


def test_resume_after_kill_gives_the_same_weights(base_run, tmp_path, monkeypatch):
    from dlzero.train import train_generation
    from dlzero.train.trainer import Trainer

    cfg = tiny_config(lr_schedule="cosine", warmup_steps=5, ema=True, ema_decay=0.9, checkpoint_every=10)
    straight = copy_run(base_run, tmp_path / "a")
    killed = copy_run(base_run, tmp_path / "b")
    train_generation(straight, cfg, steps=30, progress=False)

    real_step = Trainer.step
    calls = {"n": 0}

    def dying_step(self, batch, lr):
        calls["n"] += 1
        if calls["n"] > 17:  # dies after step 17, between the checkpoints at 10 and 20
            raise Killed
        real_step(self, batch, lr)

    monkeypatch.setattr(Trainer, "step", dying_step)
    with pytest.raises(Killed):
        train_generation(killed, cfg, steps=30, progress=False)
    assert not killed.model_path(1).exists()
    monkeypatch.setattr(Trainer, "step", real_step)
    res = train_generation(killed, cfg, steps=30, progress=False)
    assert res.resumed and res.generation == 1 and res.global_step == 30

    a, _ = load_model_file(straight.model_path(1))
    b, _ = load_model_file(killed.model_path(1))
    pa, pb = params(a), params(b)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    ca = torch.load(straight.train_dir / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    cb = torch.load(killed.train_dir / "checkpoint.pt", weights_only=True)["trainer"]["model"]
    assert all(torch.equal(ca[k], cb[k]) for k in ca)
    assert not all(torch.equal(ca[k], pa[k]) for k in ca)  # the exported model is the EMA
    with (killed.metrics_dir / "metrics.csv").open() as fh:
        steps = [int(r["step"]) for r in csv.DictReader(fh)]
    assert steps == [10, 20, 30]


def test_corrupt_shard_is_skipped_and_named(base_run, tmp_path, caplog):
    from dlzero.train.dataset import build_window

    rd = copy_run(base_run, tmp_path)
    good = len(build_window(rd, tiny_config().train)[0])
    bad = rd.data_dir_for(0) / "shard-bad.hcpe3"
    data = (rd.data_dir_for(0) / "shard-000.hcpe3").read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    shutil.copy(f"{rd.data_dir_for(0) / 'shard-000.hcpe3'}.json", f"{bad}.json")  # committed, then cut short
    with caplog.at_level(logging.WARNING, logger="dlzero.train.dataset"):
        buf, plan = build_window(rd, tiny_config().train)
    assert len(buf) == good
    assert "shard-bad.hcpe3" in caplog.text and "truncated" in caplog.text
    assert all("shard-bad" not in rel for rel, _ in plan.shards)


def test_window_takes_the_newest_positions(base_run, tmp_path):
    from dlzero.train.dataset import build_window

    rd = copy_run(base_run, tmp_path)
    full, _ = build_window(rd, tiny_config().train)
    buf, plan = build_window(rd, tiny_config(window_min=100, window_max=100).train)
    assert len(buf) == 100 and plan.window == 100 and plan.total_positions == len(full)
    assert plan.shards[0][0].endswith("shard-001.hcpe3")  # newest first
    assert np.array_equal(buf.base_hcp, full.base_hcp[-100:])


def test_no_data_is_a_clear_error(tmp_path):
    from dlzero.train import train_generation

    cfg = tiny_config()
    rd = make_run(tmp_path / "run", cfg, games_per_shard=())
    with pytest.raises(DlzeroError, match="no training data"):
        train_generation(rd, cfg, progress=False)


def test_checkpoint_of_another_architecture_is_refused(base_run, tmp_path):
    from dlzero.train import train_generation

    rd = copy_run(base_run, tmp_path)
    train_generation(rd, tiny_config(), steps=2, progress=False)
    ckpt = rd.train_dir / "checkpoint.pt"
    before = ckpt.read_bytes()
    other = config_from_dict({**TINY, "model": {**TINY["model"], "channels": 8}})
    rd.set_best(1)
    with pytest.raises(ModelFileError, match="checkpoint.pt"):
        train_generation(rd, other, steps=2, progress=False)
    assert ckpt.read_bytes() == before and not rd.model_path(2).exists()

    ckpt.write_bytes(before[:1000])
    with pytest.raises(ModelFileError, match="checkpoint.pt"):
        train_generation(rd, tiny_config(), steps=2, progress=False)
    assert ckpt.read_bytes() == before[:1000] and not rd.model_path(2).exists()


def test_batch_decoding_matches_the_real_board(base_run):
    from dlzero.data.hcpe3 import iter_training_positions, read_hcpe3
    from dlzero.encoding import encode_position, labels_of
    from dlzero.train.buffer import BatchDecoder
    from dlzero.train.dataset import buffer_from_games

    games = read_hcpe3(base_run / "data" / "gen-0000" / "shard-001.hcpe3")[:1]
    buf = buffer_from_games(games, 0.0)
    board = games[0].start_board()
    expected = []
    for pos in iter_training_positions(games[0]):
        if pos.is_target:
            expected.append((encode_position(board), pos, labels_of(pos.candidates[:1, 0], pos.turn)[0]))
        board.push_move16(pos.move16)
    batch = BatchDecoder(len(buf)).decode(buf, np.arange(len(buf)))
    assert len(expected) == len(buf)
    for row, (planes, pos, top_label) in enumerate(expected):
        # the rebuilt board has one move of history, enough for every plane but repetition (zero
        # both ways here: no position of this game repeats)
        assert np.array_equal(batch.planes[row].numpy(), planes)
        assert batch.value[row].item() == pytest.approx(pos.result)  # λ = 0: the game result
        visits = pos.candidates[:, 1]
        assert int(batch.policy[row].argmax()) == top_label
        assert batch.policy[row, top_label].item() == pytest.approx(visits[0] / visits.sum())
        assert batch.policy[row].sum().item() == pytest.approx(1.0)


def write_random_hcpe(path: Path, n_games: int, seed: int) -> int:
    """hcpe of random games: every position with the move played and the game's result."""
    rng = random.Random(seed)
    records = hcpe_records([random_game(rng, max_ply=60, random_plies=0) for _ in range(n_games)])
    write_hcpe(path, records)
    return len(records)


def test_supervised_reports_holdout_accuracies(tmp_path):
    from dlzero.train import train_supervised

    path = tmp_path / "games.hcpe"
    n = write_random_hcpe(path, 6, seed=5)
    cfg = tiny_config(holdout_fraction=0.2)
    res = train_supervised([path], cfg, tmp_path / "sl.pt", steps=20, metrics_dir=tmp_path / "m",
                           progress=False)
    # whole games of 60 records held out; each one's start position is a training position too, not scored
    split = res.split
    assert split.source == "by game" and split.games == 6 and split.held_games >= 1
    assert res.holdout_positions == 60 * split.held_games - split.unscored and split.unscored == split.held_games
    assert res.train_positions == n - 60 * split.held_games
    for key in ("policy_acc", "value_acc"):
        assert 0.0 <= res.holdout[key] <= 1.0
    assert res.holdout["policy_loss"] > 0
    assert load_model_file(res.model_path)[1].positions == res.train_positions
    assert not (tmp_path / "sl.pt.ckpt").exists()
    assert (tmp_path / "m" / "metrics.csv").is_file()


def test_supervised_goes_on_training_a_model_file(tmp_path):
    """--init: the weights start from the file (at a vanishing LR they stay there), not from a fresh
    network; the new model names it as its parent; another architecture is refused by name."""
    from dlzero.train import train_supervised

    path = tmp_path / "games.hcpe"
    write_random_hcpe(path, 4, seed=6)
    cfg = tiny_config(lr=1e-12, holdout_fraction=0.2)
    start = new_model(cfg.model, seed=123)
    save_model(start, tmp_path / "start.pt", ModelMetadata(generation=3))
    tuned = train_supervised([path], cfg, tmp_path / "tuned.pt", steps=2, progress=False, init=tmp_path / "start.pt")
    fresh = train_supervised([path], cfg, tmp_path / "fresh.pt", steps=2, progress=False)

    def params(model):
        return dict(model.named_parameters())  # not BN buffers: their running statistics move in training

    tuned_model, meta = load_model_file(tuned.model_path)
    assert meta.parent == "start" and load_model_file(fresh.model_path)[1].parent is None
    for name, p in params(start).items():
        assert torch.allclose(params(tuned_model)[name], p, atol=1e-6), name
    assert not torch.allclose(params(load_model_file(fresh.model_path)[0])["stem.0.weight"],
                              params(start)["stem.0.weight"])
    wider = config_from_dict({**TINY, "model": {**TINY["model"], "channels": 32}})
    with pytest.raises(ModelFileError, match="start.pt: is a .* network but the config asks for"):
        train_supervised([path], wider, tmp_path / "w.pt", steps=1, progress=False, init=tmp_path / "start.pt")


def test_cli_train_on_a_run(base_run, tmp_path, capsys):
    from dlzero.commands import train as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    rd = copy_run(base_run, tmp_path)
    args = parser.parse_args(["train", "--run", str(rd.root), "--steps", "3", "--no-progress",
                              "--set", "train.batch_size=16"])
    assert args.func(args) == 0 and rd.model_path(1).is_file()
    assert "generation 1, 3 steps" in capsys.readouterr().err
    assert torch.load(rd.train_dir / "checkpoint.pt", weights_only=True)["segment"]["cursor"] == 3 * 16
    with pytest.raises(DlzeroError, match="not a dlzero run"):
        args.func(parser.parse_args(["train", "--run", str(tmp_path / "nope")]))
    # a run trains on from its checkpoint
    with pytest.raises(DlzeroError, match="--init, --minutes and --val are for --hcpe mode"):
        args.func(parser.parse_args(["train", "--run", str(rd.root), "--init", str(rd.model_path(1))]))
    with pytest.raises(DlzeroError, match="--val are for --hcpe mode"):  # the loop scores its own held-out games
        args.func(parser.parse_args(["train", "--run", str(rd.root), "--val", str(tmp_path / "v.hcpe")]))


def test_adamw_bf16_and_fp16_on_cpu(base_run):
    from dlzero.errors import ConfigError
    from dlzero.train.dataset import build_window
    from dlzero.train.trainer import Segment, Trainer

    cfg = tiny_config(optimizer="adamw", amp="bf16", lr=1e-3, lr_schedule="cosine", grad_clip=1.0)
    buf, _ = build_window(RunDir.open(base_run), cfg.train)
    trainer = Trainer(new_model(cfg.model, seed=0), cfg.train, torch.device("cpu"))
    summary = trainer.fit(buf, Segment(1, 3, seed=0), None, None, progress=False)
    assert np.isfinite(summary["policy_loss"]) and np.isfinite(summary["value_loss"])
    with pytest.raises(ConfigError, match="fp16 needs CUDA"):
        Trainer(new_model(cfg.model), tiny_config(amp="fp16").train, torch.device("cpu"))


def test_amp_auto_on_the_cpu_is_bf16_only_with_bf16_instructions(monkeypatch):
    """auto trains in bf16 on a CPU that lists avx512_bf16 or amx_bf16 in /proc/cpuinfo, in fp32 on others;
    an explicit setting wins either way."""
    import dlzero.cpu
    from dlzero.train.trainer import amp_dtype

    cpu = torch.device("cpu")
    for flags, expected in (({"avx2", "avx512f", "avx512_vnni"}, None), ({"avx2", "avx512_bf16"}, torch.bfloat16),
                            ({"avx2", "amx_bf16", "amx_tile"}, torch.bfloat16), (None, None)):
        monkeypatch.setattr(dlzero.cpu, "flag_set", lambda flags=flags: None if flags is None else frozenset(flags))
        assert amp_dtype("auto", cpu) is expected, flags
        assert amp_dtype("off", cpu) is None and amp_dtype("bf16", cpu) is torch.bfloat16
    monkeypatch.setattr(dlzero.cpu, "flag_set", lambda: frozenset({"fpu", "avx512_bf16", "avx2", "sse2"}))
    assert dlzero.cpu.cpu_flags() == "avx2 avx512_bf16"  # the speed-relevant ones, in a fixed order


def test_channels_last_changes_the_layout_not_the_weights(base_run):
    """Training in the channels-last layout takes the same steps as the standard layout (fp32, to
    rounding), and the model it exports is in the standard layout, as saving and ONNX expect."""
    from dlzero.train.dataset import build_window
    from dlzero.train.trainer import Segment, Trainer

    buf, _ = build_window(RunDir.open(base_run), tiny_config().train)
    exported = {}
    for channels_last in (False, True):
        cfg = tiny_config(amp="off", channels_last=channels_last)
        trainer = Trainer(new_model(cfg.model, seed=0), cfg.train, torch.device("cpu"))
        conv = trainer.model.stem[0].weight
        assert conv.is_contiguous(memory_format=torch.channels_last) is channels_last
        assert conv.is_contiguous() is not channels_last
        trainer.fit(buf, Segment(1, 5, seed=0), None, None, progress=False)
        exported[channels_last] = trainer.export_model()
        assert all(p.is_contiguous() for p in exported[channels_last].state_dict().values())
    start = params(new_model(tiny_config().model, seed=0))
    standard, last = params(exported[False]), params(exported[True])
    assert any(not torch.equal(standard[k], start[k]) for k in start)  # it did train
    for name, p in standard.items():
        assert torch.allclose(last[name], p, atol=1e-4), name


def test_metrics_csv_survives_a_torn_row_and_replayed_steps(tmp_path):
    from dlzero.train.meters import MetricsLog

    row = {"step": 10, "generation": 1, "samples": 32, "policy_loss": 1.0, "value_loss": 0.5,
           "policy_acc": 0.5, "value_acc": 0.5, "lr": 0.1, "samples_per_s": 100.0}
    log = MetricsLog(tmp_path, 0)
    log.write(row)
    log.write({**row, "step": 20})
    log.close()
    with (tmp_path / "metrics.csv").open("a") as fh:
        fh.write("30,1,32,0.9")  # killed mid-row
    log = MetricsLog(tmp_path, 20)
    log.write(row)  # replayed steps are not written again
    log.write({**row, "step": 20})
    log.write({**row, "step": 30})
    log.close()
    with (tmp_path / "metrics.csv").open() as fh:
        assert [int(r["step"]) for r in csv.DictReader(fh)] == [10, 20, 30]


def test_metrics_without_a_reply_head_and_files_from_before_the_reply_column(tmp_path):
    from dlzero.runfiles import TRAIN_COLUMNS
    from dlzero.train.meters import Meter, MetricsLog, summarise

    meter = Meter(torch.device("cpu"))
    meter.add(torch.tensor(4.0), torch.tensor(2.0), torch.tensor(1), 4, torch.tensor(1), torch.tensor(2))
    assert np.isnan(summarise(meter.totals())["reply_loss"])  # no reply head: not a fake 0
    meter.load([4.0, 2.0, 1.0, 4.0, 1.0, 2.0])  # a checkpoint written before the reply sums existed
    meter.add(torch.tensor(4.0), torch.tensor(2.0), torch.tensor(1), 4, torch.tensor(1), torch.tensor(2),
              torch.tensor(6.0), torch.tensor(3))
    assert summarise(meter.totals())["reply_loss"] == pytest.approx(2.0)
    assert summarise(meter.totals())["policy_loss"] == pytest.approx(1.0)

    old = [c for c in TRAIN_COLUMNS if c != "reply_loss"]  # a metrics.csv begun by an older dlzero
    (tmp_path / "metrics.csv").write_text(",".join(old) + "\n" + ",".join(["5"] * len(old)) + "\n")
    row = {"step": 10, "generation": 1, "samples": 32, "policy_loss": 1.0, "value_loss": 0.5,
           "policy_acc": 0.5, "value_acc": 0.5, "lr": 0.1, "samples_per_s": 100.0, "reply_loss": 3.0}
    log = MetricsLog(tmp_path, 5)
    log.write(row)
    log.close()
    with (tmp_path / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["step"] for r in rows] == ["5", "10"] and rows[1]["samples_per_s"] == "100" and None not in rows[1]
