"""Self-play on Ray in local mode: workers writing shards, a killed worker restarted, the server path."""

from __future__ import annotations

import subprocess
import sys

import pytest
from killers import ShardKiller, assert_restarted_once

from dlzero.config import load_config
from dlzero.data.hcpe3 import read_hcpe3
from dlzero.rundir import RunDir

pytest.importorskip("ray", reason="Ray is the optional 'cluster' extra (installed with the dev extra)")

SMALL = ["model.blocks=1", "model.channels=16", "model.value_fc=16", "inference.backend=onnx",
         "inference.threads=1", "selfplay.playouts=8", "selfplay.cheap_playouts=4", "selfplay.max_moves=30",
         "selfplay.random_plies=2"]


def test_cli_ray_local_two_workers_write_shards(tmp_path):
    run = tmp_path / "run"
    args = [sys.executable, "-m", "dlzero.cli", "selfplay", "--run", str(run), "--ray", "local", "--workers", "2",
            "--games", "4", "--parallel", "2", "--seed", "1", "--quiet"]
    for s in SMALL:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 games" in proc.stderr
    rd = RunDir.open(run)
    shards = rd.shards()
    assert {p.name.split("-")[1] for p in shards} == {"w0", "w1"}
    assert sum(len(read_hcpe3(p)) for p in shards) == 4
    assert rd.config().selfplay.ray == "local"  # the run remembers how it was played


def test_killed_ray_worker_is_restarted_for_its_unsaved_games(tmp_path, capfd):
    from selfplay.cluster import run_selfplay_ray

    cfg = load_config(None, [*SMALL, "selfplay.games_in_parallel=1", "selfplay.games_per_shard=1",
                             "server.enabled=true", "selfplay.ray=local"])
    rd = RunDir.create(tmp_path / "run", cfg)
    killer = ShardKiller(rd, worker=0)
    killer.start()
    summary = run_selfplay_ray(rd, cfg, games=10, address="local", workers=2, progress=False, seed=0)
    killer.join()
    assert_restarted_once(rd, summary, killer, 10, capfd.readouterr().err)
    (server,) = summary.servers
    assert server["clients_seen"] == 3 and server["clients_lost"] == 1
