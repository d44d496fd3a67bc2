"""`dlzero score`: model files scored on the games a training run held out, side by side (and train.threads)."""

from __future__ import annotations

import csv
import math
import re

import numpy as np
import pytest
import torch
from conftest import TINY_MODEL, TINY_MODEL_SETS
from shards import selfplay_games

from dlzero.cli import main
from dlzero.config import config_from_dict
from dlzero.data.hcpe3 import BLACK_WIN, FLAG_MAX_MOVES, RESULT_DRAW, WHITE_WIN, write_hcpe3
from dlzero.model import new_model, save_model
from dlzero.train.dataset import count_positions

SETS = [*TINY_MODEL_SETS, "train.batch_size=16", "train.device=cpu", "train.holdout_fraction=0.25", "train.seed=3"]
FLAGS = [x for s in SETS for x in ("--set", s)]
MODEL_CFG = config_from_dict({"model": TINY_MODEL}).model


def read_csv(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_score_rebuilds_the_hold_out_training_printed(tmp_path, capsys):
    write_hcpe3(tmp_path / "a.hcpe3", selfplay_games(40, 16, seed=21))
    write_hcpe3(tmp_path / "b.hcpe3", selfplay_games(20, 16, seed=22))
    files = [str(tmp_path / "a.hcpe3"), str(tmp_path / "b.hcpe3")]
    assert main(["train", "--hcpe", *files, "--out", str(tmp_path / "m.pt"), "--steps", "3", "--no-progress",
                 *FLAGS]) == 0
    printed = capsys.readouterr().err
    trained = {k: float(v) for k, v in re.findall(r"(\w+) (\d+\.\d{4})", printed.split("held out:")[1])}
    held = re.search(r"held out: (\d+) of 60 games, ([\d,]+) positions", printed)
    assert held and set(trained) >= {"policy_loss", "policy_acc", "value_loss", "value_acc", "value_loss_target"}

    other = tmp_path / "other.pt"
    save_model(new_model(MODEL_CFG, seed=9), other)
    # the files in the other order: the split is by each game's own hash, not by where it lies
    assert main(["score", str(tmp_path / "m.pt"), str(other), "--hcpe", *files[::-1], "--csv",
                 str(tmp_path / "s.csv"), *FLAGS]) == 0
    out = capsys.readouterr()
    assert f"held out: {held[1]} of 60 games, {held[2]} positions, by game" in out.err
    rows = read_csv(tmp_path / "s.csv")
    assert [r["model"] for r in rows] == ["m.pt", "other.pt"] and out.out.splitlines()[1].startswith("m.pt ")
    assert {r["positions"] for r in rows} == {held[2].replace(",", "")}
    for key, value in trained.items():  # training's own figures, to the four places it printed
        assert float(rows[0][key]) == pytest.approx(value, abs=6e-5), key
    assert rows[0]["policy_loss"] != rows[1]["policy_loss"]  # each model scored, not the first one twice


def test_score_on_a_separate_file_scores_all_of_it(tmp_path, capsys):
    games = selfplay_games(5, 12, seed=23)
    write_hcpe3(tmp_path / "v.hcpe3", games)
    save_model(new_model(MODEL_CFG, seed=1), tmp_path / "m.pt")
    assert main(["score", str(tmp_path / "m.pt"), "--val", str(tmp_path / "v.hcpe3"), "--csv",
                 str(tmp_path / "s.csv"), *FLAGS]) == 0
    assert f"({len(games)} games), {count_positions(games)} positions" in capsys.readouterr().err
    assert int(read_csv(tmp_path / "s.csv")[0]["positions"]) == count_positions(games)


def test_score_refuses_what_it_cannot_score_before_loading_data(tmp_path, capsys):
    (tmp_path / "bad.hcpe3").write_bytes(b"\x07" * 100)  # loaded first, it would be the error reported
    val = ["--val", str(tmp_path / "bad.hcpe3"), "--csv", str(tmp_path / "s.csv")]
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    assert main(["score", str(tmp_path / "m.onnx"), *val, *FLAGS]) == 2
    assert ".pt model files" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "gone.pt"), *val, *FLAGS]) == 2
    assert "gone.pt: no such model file" in capsys.readouterr().err
    assert main(["score", "no-such-network", *val, *FLAGS]) == 2
    assert "neither a model file" in capsys.readouterr().err
    save_model(new_model(MODEL_CFG, seed=1), tmp_path / "m.pt")
    assert main(["score", str(tmp_path / "m.pt"), *FLAGS]) == 2
    assert "nothing to score on" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "m.pt"), *val, *FLAGS]) == 2  # then the data's own error, one line
    err = capsys.readouterr().err
    assert "bad.hcpe3" in err and "Traceback" not in err
    assert not (tmp_path / "s.csv").exists()


def test_train_sample_scores_training_positions_beside_the_hold_out(tmp_path, capsys):
    """Scored beside the held-out games, the training sample is training positions, as many as are held out
    (here fewer exist: all of them, in their order, so its figures are those of scoring the file whole)."""
    write_hcpe3(tmp_path / "t.hcpe3", selfplay_games(2, 10, seed=27))
    write_hcpe3(tmp_path / "v.hcpe3", selfplay_games(6, 16, seed=28))
    save_model(new_model(MODEL_CFG, seed=1), tmp_path / "m.pt")
    model = str(tmp_path / "m.pt")
    assert main(["score", model, "--val", str(tmp_path / "t.hcpe3"), "--csv", str(tmp_path / "whole.csv"),
                 *FLAGS]) == 0
    assert main(["score", model, "--hcpe", str(tmp_path / "t.hcpe3"), "--val", str(tmp_path / "v.hcpe3"), "--csv",
                 str(tmp_path / "held.csv"), *FLAGS]) == 0
    capsys.readouterr()
    assert main(["score", model, "--hcpe", str(tmp_path / "t.hcpe3"), "--val", str(tmp_path / "v.hcpe3"),
                 "--train-sample", "--csv", str(tmp_path / "s.csv"), *FLAGS]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("m.pt  training sample ")
    (whole,), (held,), rows = (read_csv(tmp_path / f) for f in ("whole.csv", "held.csv", "s.csv"))
    assert [(r["model"], r["set"]) for r in rows] == [("m.pt", "held out"), ("m.pt", "training sample")]
    assert int(whole["positions"]) < int(held["positions"])
    for got, want in zip(rows, (held, whole), strict=True):
        assert got["positions"] == want["positions"]
        for key in ("policy_loss", "policy_acc", "value_loss", "value_loss_target"):
            assert float(got[key]) == pytest.approx(float(want[key]), abs=1e-6), key
    assert main(["score", model, "--val", str(tmp_path / "v.hcpe3"), "--train-sample", *FLAGS]) == 2
    assert "--train-sample needs the training files" in capsys.readouterr().err


def test_score_takes_the_shipped_default_networks_weights(tmp_path, capsys):
    from dlzero.networks import default_network, load_networks

    network = default_network(load_networks())
    if network is None:
        pytest.skip("no network ships in this checkout")
    write_hcpe3(tmp_path / "v.hcpe3", selfplay_games(2, 10, seed=25))
    assert main(["score", "default", "--val", str(tmp_path / "v.hcpe3"), "--csv", str(tmp_path / "s.csv"),
                 "--set", "train.device=cpu"]) == 0
    row = read_csv(tmp_path / "s.csv")[0]
    assert row["model"] == network.name and 0.0 <= float(row["policy_acc"]) <= 1.0


def test_train_threads_sets_torchs_compute_threads(tmp_path):
    write_hcpe3(tmp_path / "a.hcpe3", selfplay_games(8, 10, seed=26))
    before = torch.get_num_threads()
    try:
        want = 1 if before != 1 else 2
        assert main(["train", "--hcpe", str(tmp_path / "a.hcpe3"), "--out", str(tmp_path / "m.pt"), "--steps", "1",
                     "--threads", str(want), "--no-progress", *FLAGS]) == 0
        assert torch.get_num_threads() == want
    finally:
        torch.set_num_threads(before)


def _constant_model(path, logit: float) -> None:
    """A model whose value logit is `logit` at every position (value_fc2 zeroed, its bias set): figures
    against it can be worked out by hand."""
    model = new_model(MODEL_CFG, seed=4)
    with torch.no_grad():
        model.value_fc2.weight.zero_()
        model.value_fc2.bias.fill_(logit)
    save_model(model, path)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)


def test_value_diagnosis_matches_figures_worked_out_by_hand(tmp_path, capsys):
    games = selfplay_games(7, 40, seed=31)
    games[0].result = RESULT_DRAW  # a draw: 1/2 for both sides, scored
    games[1].result = RESULT_DRAW | FLAG_MAX_MOVES  # capped: no value target (train.value_of_capped_games: drop)
    assert {g.result for g in games[2:]} == {BLACK_WIN, WHITE_WIN}  # the rest won by either side
    games[2].moves[5].eval = 30000 if games[2].result == WHITE_WIN else -30000  # a proven result: p of 1 or 0
    write_hcpe3(tmp_path / "v.hcpe3", games)
    _constant_model(tmp_path / "c.pt", 0.25)
    save_model(new_model(MODEL_CFG, seed=2), tmp_path / "r.pt")
    val = ["--val", str(tmp_path / "v.hcpe3"), *FLAGS]
    assert main(["score", str(tmp_path / "c.pt"), str(tmp_path / "r.pt"), *val, "--csv", str(tmp_path / "plain.csv"),
                 "--set", "train.val_lambda=0.4"]) == 0
    capsys.readouterr()
    assert main(["score", str(tmp_path / "c.pt"), str(tmp_path / "r.pt"), *val, "--csv", str(tmp_path / "s.csv"),
                 "--set", "train.val_lambda=0.4", "--value-diagnosis", "--ply-buckets", "10,20",
                 "--diagnosis-csv", str(tmp_path / "d.csv")]) == 0
    out = capsys.readouterr().out
    assert "c.pt KL to teacher" in out and "20+" in out and "standard error by game" in out

    # every scored position by hand: plies with candidates, of games not capped; Black moves at even plies
    ply, z, logit, gid = [], [], [], []
    for g, game in enumerate(games):
        if game.result & FLAG_MAX_MOVES:
            continue
        for i, move in enumerate(game.moves):
            if len(move.candidates):
                ply.append(i)
                gid.append(g)
                winner = game.result & 3
                z.append(0.5 if winner == RESULT_DRAW else float((winner == BLACK_WIN) == (i % 2 == 0)))
                logit.append(move.eval / 756.0)
    ply, z, logit, gid = np.array(ply), np.array(z), np.array(logit), np.array(gid)
    p = 1.0 / (1.0 + np.exp(-logit))
    c = 2 * 0.25  # the constant model's win rate is sigmoid(2 x)
    got = {(r["who"], r["figure"], r["plies"]): r for r in read_csv(tmp_path / "d.csv")}
    for bucket, sel in [("all", ply >= 0), ("0-9", ply < 10), ("10-19", (ply >= 10) & (ply < 20)), ("20+", ply >= 20)]:
        m = z[sel].mean()
        teacher = _softplus(logit) - z * logit
        expected = {
            ("constant", "vs_result"): -(z * np.log(m) + (1 - z) * np.log(1 - m)),
            ("teacher", "vs_result"): teacher,
            ("c.pt", "vs_result"): _softplus(c) - z * c,
            ("c.pt", "minus_teacher"): _softplus(c) - z * c - teacher,
            ("c.pt", "vs_teacher"): _softplus(c) - p * c,
            ("c.pt", "kl_teacher"): _softplus(c) - p * c - (_softplus(logit) - p * logit),
        }
        for key, losses in expected.items():
            row = got[(*key, bucket)]
            mean = losses[sel].mean()
            assert float(row["value"]) == pytest.approx(mean, rel=1e-5), (key, bucket)
            assert int(row["positions"]) == sel.sum() and int(row["games"]) == len(set(gid[sel]))
            assert float(row["draws"]) == pytest.approx(np.mean(z[sel] == 0.5))
            # the standard error by game, each game one sample: its residual sum about the mean
            residuals = [sum(losses[sel & (gid == g)] - mean) for g in sorted(set(gid[sel]))]
            n_games = len(residuals)
            se = math.sqrt(n_games / (n_games - 1) * sum(r * r for r in residuals)) / sel.sum()
            assert float(row["se"]) == pytest.approx(se, rel=1e-4), (key, bucket)
    assert float(got[("r.pt", "kl_teacher", "all")]["value"]) > 0
    plain, scored = read_csv(tmp_path / "plain.csv"), read_csv(tmp_path / "s.csv")
    for before, after in zip(plain, scored, strict=True):  # the diagnosis's single load blends the same target
        for key in ("value_loss", "value_loss_target", "policy_loss"):
            assert float(after[key]) == pytest.approx(float(before[key]), abs=1e-6), key
    for row in scored:  # and a model's loss against the results over all plies is the trainer's value_loss
        assert float(got[(row["model"], "vs_result", "all")]["value"]) == pytest.approx(float(row["value_loss"]),
                                                                                      abs=1e-5)


def test_value_diagnosis_flags_are_checked(tmp_path, capsys):
    write_hcpe3(tmp_path / "v.hcpe3", selfplay_games(2, 10, seed=32))
    save_model(new_model(MODEL_CFG, seed=1), tmp_path / "m.pt")
    val = [str(tmp_path / "m.pt"), "--val", str(tmp_path / "v.hcpe3"), *FLAGS]
    assert main(["score", *val, "--diagnosis-csv", str(tmp_path / "d.csv")]) == 2
    assert "go with --value-diagnosis" in capsys.readouterr().err
    for bad in ("30,20", "0,30", "x"):
        assert main(["score", *val, "--value-diagnosis", "--ply-buckets", bad]) == 2
        assert "ascending plies" in capsys.readouterr().err
    assert not (tmp_path / "d.csv").exists()


def test_two_models_of_one_file_name_keep_a_row_each(tmp_path, capsys):
    """Two runs' `gen-0001.pt` side by side: each is labelled by its path, in the table, the CSV and the
    diagnosis (keyed by label, where the second used to replace the first)."""
    write_hcpe3(tmp_path / "v.hcpe3", selfplay_games(4, 20, seed=41))
    paths = []
    for run, seed in (("a", 1), ("b", 2)):
        (tmp_path / run).mkdir()
        save_model(new_model(MODEL_CFG, seed=seed), tmp_path / run / "gen-0001.pt")
        paths.append(str(tmp_path / run / "gen-0001.pt"))
    assert main(["score", *paths, paths[0], "--val", str(tmp_path / "v.hcpe3"), "--csv", str(tmp_path / "s.csv"),
                 "--value-diagnosis", "--diagnosis-csv", str(tmp_path / "d.csv"), *FLAGS]) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "s.csv")
    assert [r["model"] for r in rows] == [paths[0], paths[1], f"{paths[0]} (2)"]
    assert rows[0]["value_loss"] != rows[1]["value_loss"] and rows[0]["value_loss"] == rows[2]["value_loss"]
    diagnosed = {r["who"] for r in read_csv(tmp_path / "d.csv")}
    assert {paths[0], paths[1], f"{paths[0]} (2)"} <= diagnosed
    assert f"{paths[1]} vs result" in out
