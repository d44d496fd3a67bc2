"""A chain of loop runs over several machines (`dlzero chain save`, `dlzero loop --init-from CHAIN`), on real run
folders: what one run leaves in the chain, and what the next run on a fresh folder takes from it."""

from __future__ import annotations

import json
import lzma
import os

import pytest
import torch
from test_train import make_run, tiny_config

from dlzero.chain import CHAIN_JSON, REPLAY_DIR, WEIGHTS, adopt_chain, read_ledger, save_chain
from dlzero.cli import main
from dlzero.data.hcpe3 import read_sidecar
from dlzero.errors import RunDirError
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.rundir import RunDir
from dlzero.runfiles import SEEN_SHARDS


def first_run(root):
    """A run that promoted generation 1, with three shards of 2, 3 and 4 games (newest last) and 90 s of phases
    (two overlapping rows and one after a pause)."""
    cfg = tiny_config()
    rd = make_run(root, cfg, games_per_shard=(2, 3, 4))
    for i, shard in enumerate(sorted(rd.data_dir.glob("gen-0000/*.hcpe3"))):
        os.utime(shard, (1_000 + i, 1_000 + i))  # the listing's newest-first order is by mtime
        os.utime(shard.with_name(shard.name + ".json"), (1_000 + i, 1_000 + i))
    save_model(new_model(cfg.model, seed=7), rd.model_path(1), ModelMetadata(generation=1))
    rd.set_best(1, "won its gate")
    rd.timeline_csv.write_text("phase,generation,start,seconds\n"
                               "selfplay,0,2026-12-06T06:00:00.000+00:00,60\n"
                               "train,1,2026-12-06T06:00:30.000+00:00,20\n"
                               "gate,1,2026-12-06T07:00:00.000+00:00,30\n")
    (rd.metrics_dir / "ratings.csv").write_text("generation,promoted\n1,1\n")
    return rd, cfg


def test_a_save_keeps_the_best_weights_the_newest_games_and_a_ledger_row(tmp_path):
    rd, _ = first_run(tmp_path / "a")
    chain = tmp_path / "chain"
    link = save_chain(rd, chain, games=7, cores=2)
    assert (chain / WEIGHTS).read_bytes() == rd.model_path(1).read_bytes()
    shards = sorted(rd.data_dir.glob("gen-0000/*.hcpe3"))
    kept = sorted(p.name for p in (chain / REPLAY_DIR).glob("*.xz"))
    assert kept == sorted(f"gen-0000-{s.name}.xz" for s in shards[1:])  # 4 + 3 fit in 7, the oldest 2 do not
    for s in shards[1:]:
        assert lzma.decompress((chain / REPLAY_DIR / f"gen-0000-{s.name}.xz").read_bytes()) == s.read_bytes()
    moves = sum(read_sidecar(s)["moves"] for s in shards)
    assert (link["selfplay_games"], link["positions"], link["replay_games"]) == (9, moves, 7)
    assert (link["best_generation"], link["promoted"], link["generations_trained"]) == (1, [1], 1)
    assert link["wall_hours"] == pytest.approx(90 / 3600, abs=1e-3)  # 60 s and 30 s: the overlap counts once
    assert link["cpu_hours"] == pytest.approx(2 * 90 / 3600, abs=1e-3) == link["cpu_hours_total"]
    assert read_ledger(chain)["links"] == [link]

    again = save_chain(rd, chain, games=4, cores=2)  # a second save of one run replaces its link and its replay
    assert len(read_ledger(chain)["links"]) == 1 and again["replay_games"] == 4
    assert sorted(p.name for p in (chain / REPLAY_DIR).glob("*.xz")) == [f"gen-0000-{shards[2].name}.xz"]


def test_the_next_run_starts_from_the_chain_and_adds_its_link(tmp_path, capsys):
    rd, cfg = first_run(tmp_path / "a")
    chain = tmp_path / "chain"
    save_chain(rd, chain, games=7, cores=2)

    nxt = tmp_path / "b"
    assert main(["loop", "--config", "tiny", "--run", str(nxt), "--init-from", str(chain), "--generations", "0",
                 "--precision", "fp32", "--quiet"]) == 0  # the chain's weights bring their architecture
    err = capsys.readouterr().err
    assert f"generation 0 is the chain {chain}" in err and "7 games of the chain's self-play" in err
    b = RunDir.open(nxt)
    assert b.config().model == cfg.model
    gen0 = torch.load(b.model_path(0), weights_only=False)["state_dict"]
    best = torch.load(chain / WEIGHTS, weights_only=False)["state_dict"]
    assert all(torch.equal(gen0[k], best[k]) for k in best)
    unpacked = sorted(b.data_dir.glob("gen-0000/chain-*.hcpe3"))
    assert len(unpacked) == 2 and sum(read_sidecar(p)["games"] for p in unpacked) == 7
    seen = set(json.loads((b.train_dir / SEEN_SHARDS).read_text()))
    assert {p.relative_to(b.data_dir).as_posix() for p in unpacked} <= seen  # replay, not new games

    from dlzero.loop import new_games

    assert new_games(b) == (0, 7)
    link = save_chain(b, chain, games=100, cores=2)  # no own games yet: the chain's replay is not counted twice
    assert link["selfplay_games"] == 0 and link["replay_games"] == 0
    links = read_ledger(chain)["links"]
    assert [x["run"] for x in links] == ["a", "b"]
    assert links[1]["start_weights_sha256"] == links[0]["best_weights_sha256"]
    assert links[1]["cpu_hours_total"] == pytest.approx(links[0]["cpu_hours"] + links[1]["cpu_hours"])


def test_a_run_of_another_chain_and_damaged_replay_are_refused(tmp_path):
    rd, cfg = first_run(tmp_path / "a")
    chain = tmp_path / "chain"
    save_chain(rd, chain, games=7, cores=2)
    stranger = make_run(tmp_path / "c", cfg, games_per_shard=(1,), seed=3)
    save_model(new_model(cfg.model, seed=99), stranger.model_path(0), ModelMetadata(generation=0))
    with pytest.raises(RunDirError, match="another chain"):
        save_chain(stranger, chain, games=7, cores=2)

    packed = next((chain / REPLAY_DIR).glob("*.xz"))
    packed.write_bytes(lzma.compress(b"not the shard"))
    fresh = RunDir.create(tmp_path / "d", cfg)
    with pytest.raises(RunDirError, match="do not match the sha256"):
        adopt_chain(fresh, chain)
    (chain / CHAIN_JSON).write_text("[]")
    with pytest.raises(RunDirError, match="not a chain ledger"):
        adopt_chain(fresh, chain)
