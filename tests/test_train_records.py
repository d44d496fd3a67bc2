"""`dlzero train --records DIR --init default --out mine.pt`: a player's own games fine-tune the shipped network,
held out by whole games, with the network's figures before and after on the same held-out positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlzero.cli import main
from dlzero.model.checkpoint import load_model_file
from dlzero.networks import default_network, load_networks

RECORDS = Path(__file__).resolve().parents[2] / "shared" / "data" / "records" / "mog-core-scala"


@pytest.mark.skipif(not RECORDS.is_dir(), reason=f"{RECORDS} (real game records) not found")
def test_records_fine_tune_the_shipped_network_with_before_and_after(tmp_path, capsys):
    network = default_network(load_networks())
    if network is None:
        pytest.skip("no network ships in this checkout")
    out = tmp_path / "mine.pt"
    assert main(["train", "--records", str(RECORDS), "--init", "default", "--out", str(out), "--steps", "4",
                 "--no-progress", "--set", "train.batch_size=32", "--set", "train.holdout_fraction=0.3"]) == 0
    err = capsys.readouterr().err
    assert f"is the shipped network {network.name}" in err and "record files" in err
    assert (tmp_path / "mine.records.hcpe").stat().st_size > 0
    after = next(line for line in err.splitlines() if line.startswith("wrote "))
    before = next(line for line in err.splitlines() if line.startswith("before training"))
    assert "by game" in after and "policy_acc" in before and "policy_acc" in after
    model, meta = load_model_file(out)
    assert model.cfg == network.architecture and meta.parent == f"{network.name}"


def test_records_that_hold_no_game_are_one_line_and_write_no_model(tmp_path, capsys):
    (tmp_path / "notes.csa").write_text("this is not a game record\n")
    out = tmp_path / "mine.pt"
    assert main(["train", "--records", str(tmp_path), "--init", "default", "--out", str(out), "--steps", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dlzero train: error:") and "no game record could be read" in err[-1]
    assert not out.exists()
    assert main(["train", "--records", str(tmp_path)]) == 2  # --out is required
    assert "--out" in capsys.readouterr().err
