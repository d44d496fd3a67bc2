"""One rule for which config wins in every command that takes `--run` (`run_from_args`)."""

from __future__ import annotations

import argparse

import pytest

from dlzero.commands.common import run_from_args
from dlzero.errors import RunDirError
from dlzero.rundir import RunDir


def _args(run, config=None, sets=(), **flags) -> argparse.Namespace:
    return argparse.Namespace(run=str(run), config=config, set=list(sets), **flags)


def test_existing_run_keeps_its_config_and_records_overrides(tmp_path, capsys):
    run = tmp_path / "run"
    rd, cfg = run_from_args(_args(run, sets=["model.blocks=1", "model.channels=8"]))
    assert (cfg.model.blocks, cfg.model.channels) == (1, 8)

    # a later command: --config is ignored (with a warning), --set and flags apply and are saved back
    keys = {"parallel": "gate.games_in_parallel"}
    rd2, cfg2 = run_from_args(_args(run, config="tiny", sets=["gate.playouts=3"], parallel=5), keys, "dlzero gate",
                              create=False)
    assert "using its config.yaml, not tiny" in capsys.readouterr().err
    assert (cfg2.model.blocks, cfg2.gate.playouts, cfg2.gate.games_in_parallel) == (1, 3, 5)
    stored = RunDir.open(run).config()
    assert (stored.model.blocks, stored.gate.playouts, stored.gate.games_in_parallel) == (1, 3, 5)


def test_commands_that_need_a_run_do_not_create_one(tmp_path):
    with pytest.raises(RunDirError):
        run_from_args(_args(tmp_path / "nope"), create=False)
    assert not (tmp_path / "nope").exists()
