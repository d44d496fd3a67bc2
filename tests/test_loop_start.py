"""A new run's generation 0: the shipped network by default, random weights on request, and the settings that go
with a trained start (`dlzero.loop_start`), checked on real run directories made by the real CLI."""

from __future__ import annotations

import pytest
import torch

from dlzero.cli import main
from dlzero.config import ModelConfig, load_config
from dlzero.errors import ConfigError
from dlzero.loop_start import plan_start, start_config
from dlzero.model.checkpoint import load_model_file
from dlzero.networks import check_file, default_network, load_networks
from dlzero.rundir import RunDir

TINY = "configs/tiny.yaml"


@pytest.fixture(scope="module")
def shipped():
    network = default_network(load_networks())
    if network is None:
        pytest.skip("no network ships in this checkout")
    return network


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_config_of_the_shipped_shape_starts_from_its_weights(shipped):
    start = plan_start(None, False, shipped.architecture)
    assert start.kind == "model" and start.trained
    assert start.sources == [check_file(shipped, "weights")]
    assert shipped.name in start.note and "--from-scratch" in start.note


def test_another_shape_keeps_random_weights_and_says_why(shipped):
    start = plan_start(None, False, ModelConfig(blocks=1, channels=16))
    assert start.kind == "scratch" and not start.trained
    assert "1x16" in start.note and shipped.arch in start.note


def test_from_scratch_and_init_from_are_one_choice(shipped, tmp_path):
    assert plan_start(None, True, shipped.architecture).kind == "scratch"
    with pytest.raises(ConfigError, match="give one"):
        plan_start(["default"], True, shipped.architecture)
    data = plan_start([str(tmp_path / "t.hcpe3"), str(tmp_path / "u.hcpe")], False, shipped.architecture)
    assert data.kind == "data" and not data.trained
    with pytest.raises(ConfigError, match="not both"):
        plan_start([str(tmp_path / "m.pt"), str(tmp_path / "t.hcpe3")], False, shipped.architecture)
    assert plan_start([str(tmp_path / "m.pt")], False, shipped.architecture).sources == [tmp_path / "m.pt"]


def test_a_named_network_brings_its_shape_whatever_the_config_says(shipped):
    small = ModelConfig(blocks=1, channels=16)
    for spec in (shipped.name, f"network:{shipped.name}", "default"):
        start = plan_start([spec], False, small)
        assert start.kind == "model" and start.architecture == shipped.architecture, spec
    cfg, added = start_config(TINY, ["model.blocks=1", "model.channels=16"], plan_start(["default"], False, small))
    assert cfg.model == ModelConfig(blocks=1, channels=16), "the user's --set still wins over the network's shape"
    assert "model.blocks=5" in added


def test_a_trained_start_gets_loop_from_network_before_the_users_own_settings(shipped):
    start = plan_start(None, False, shipped.architecture)
    cfg, added = start_config(TINY, ["train.lr=0.01"], start)
    assert added == load_config(TINY).loop.from_network
    assert cfg.gate.mode == "sprt" and cfg.selfplay.playouts == 256 and cfg.train.val_lambda == 0
    # gated near the depth users search: at 128 playouts a candidate that lost 12-28 at 1 s scored 22-18
    assert cfg.gate.playouts >= 1024 and load_config(TINY).gate.playouts < 1024
    assert cfg.train.lr == 0.01  # --set after the overlay
    scratch, none = start_config(TINY, [], plan_start(None, True, shipped.architecture))
    assert none == [] and scratch.gate.mode == "off" and scratch.selfplay.playouts == 48


def test_a_bad_from_network_line_is_refused_with_its_key():
    with pytest.raises(ConfigError, match="loop.from_network"):
        load_config(TINY, ["loop.from_network=[selfplay]"])
    with pytest.raises(ConfigError, match="selfplay.nonsense"):
        start_config(TINY, ["loop.from_network=[selfplay.nonsense=1]"],
                     plan_start(None, False, load_config(TINY).model))


def run_cli(run, *extra) -> None:
    # fp32: no int8 file to make, so generation 0 is all these runs do
    assert main(["loop", "--config", "tiny", "--run", str(run), "--generations", "0", "--precision", "fp32",
                 "--quiet", *extra]) == 0


def test_the_readme_command_starts_from_the_shipped_network_and_gates_every_candidate(shipped, tmp_path, capsys):
    run_cli(tmp_path / "run")
    err = capsys.readouterr().err
    assert f"generation 0 is the shipped network {shipped.name}" in err and "loop.from_network" in err
    rd = RunDir.open(tmp_path / "run")
    assert rd.best().generation == 0
    gen0, _ = load_model_file(rd.model_path(0))
    net, _ = load_model_file(check_file(shipped, "weights"))
    assert same_weights(gen0, net)
    cfg = rd.config()
    assert cfg.gate.mode == "sprt" and cfg.train.lr == 0.002  # saved with the run: a resume keeps them

    run_cli(tmp_path / "run", "--from-scratch")  # an existing run: said to be ignored, nothing changes
    assert "ignored" in capsys.readouterr().err
    again, _ = load_model_file(rd.model_path(0))
    assert same_weights(again, net)


def test_from_scratch_is_random_weights_with_the_from_zero_settings(shipped, tmp_path, capsys):
    run_cli(tmp_path / "run", "--from-scratch")
    assert "random weights (--from-scratch)" in capsys.readouterr().err
    rd = RunDir.open(tmp_path / "run")
    gen0, _ = load_model_file(rd.model_path(0))
    assert not same_weights(gen0, load_model_file(check_file(shipped, "weights"))[0])
    assert rd.config().gate.mode == "off" and rd.config().train.lr == 0.02


def test_a_run_directory_plays_its_best_generation(model, tmp_path, capsys):
    """`--model runs/NAME` is what the loop promoted last: the README's loop improves what `dlzero usi` plays."""
    import shutil

    import cshogi

    from dlzero.config import Config
    from dlzero.engine.shipped import _int8_fast, resolve_model

    rd = RunDir.create(tmp_path / "run", Config())
    shutil.copy(model, rd.model_path(0))
    shutil.copy(model, rd.model_path(1))
    rd.set_best(1, "a test's promotion")
    fp32 = load_config(None, ["inference.precision=fp32"])
    assert resolve_model(str(rd.root), fp32).path == rd.model_path(1)
    int8 = rd.model_path(1).with_suffix(".int8.onnx")
    int8.write_bytes(b"")  # never loaded here: only which file is chosen
    auto = load_config(None, [])
    assert resolve_model(str(rd.root), auto).path == (int8 if _int8_fast(auto) else rd.model_path(1))
    int8.unlink()

    assert main(["bestmove", "--model", str(rd.root), "--position", "startpos", "--playouts", "16"]) == 0
    move = capsys.readouterr().out.strip()
    board = cshogi.Board()
    assert board.is_legal(board.move_from_usi(move)), move
    with pytest.raises(Exception, match="not a dlzero run directory"):
        resolve_model(str(tmp_path), auto)
