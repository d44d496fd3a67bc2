"""Self-play on Ray: in local mode, workers writing shards, a killed worker restarted, the server path; on a
cluster of several raylets, a node lost in the middle of self-play."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import TINY_MODEL_SETS
from killers import ShardKiller, assert_restarted_once

from dlzero.config import load_config
from dlzero.data.hcpe3 import read_hcpe3, read_sidecar
from dlzero.rundir import RunDir

pytest.importorskip("ray", reason="Ray is the optional 'cluster' extra (installed with the dev extra)")

SMALL = [*TINY_MODEL_SETS, "inference.backend=onnx",
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


def test_local_ray_starts_its_workers_at_normal_priority():
    """Ray's default worker niceness is 15: beside two busy processes on two cores its workers got ~3 % of
    a core each, and the killed-worker test below took 190 s instead of 20 (its kill helper waits 180 s).
    A local instance gives them the niceness local worker processes have (the caller's, 0 unless the tests
    run under `nice`; play_worker adds selfplay.nice)."""
    import ray

    from dlzero.selfplay.cluster import connect

    def niceness() -> int:  # nested: Ray ships it by value (the tests folder is not on the workers' path)
        return os.nice(0)

    assert connect("local", num_cpus=1)
    try:
        assert ray.get(ray.remote(niceness).remote()) == os.nice(0)  # this process's, as a local worker's (not +15)
    finally:
        ray.shutdown()


def test_killed_ray_worker_is_restarted_for_its_unsaved_games(tmp_path, capfd):
    from dlzero.selfplay.cluster import run_selfplay_ray

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


SMALL_STORE = 80 << 20  # bytes of object store per node: workers pass only a few messages through Ray


def _first_shard_pids(rd: RunDir, workers: int, timeout: float) -> dict[int, int]:
    """Once every worker has committed a shard (its sidecar is there), the pid of each (from the name)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = {}
        for w in range(workers):
            claims = list(rd.data_dir.glob(f"gen-*/selfplay-w{w}-*.hcpe3.json"))
            if claims:
                pids[w] = int(claims[0].name.split("-")[2])
        if len(pids) == workers:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"the workers wrote no shards within {timeout} s")


def _wait_until_gone(pids, timeout: float) -> None:
    """Until none of `pids` runs (gone, or a zombie waiting for its parent to reap it)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while True:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                break
            if state in ("Z", "X"):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"process {pid} of a removed node still runs after {timeout} s")
            time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_lost_nodes_have_their_games_replayed_on_another(tmp_path, capfd):
    """A cluster of real raylets on this machine: a head without CPUs (as Ray advises for clusters)
    that runs only the driver, and two nodes of one CPU, one self-play worker on each. Once both
    workers have committed a shard, both nodes are lost at once (raylets and workers killed) and a
    fresh node joins: the unsaved games of the lost workers are played there, every shard written
    before is still there unchanged, and the run ends with exactly the games asked for.

    Before, the workers' message queue was an actor that Ray placed on a worker node, so losing
    that node ended the whole session with an ActorDiedError."""
    import ray
    from ray.cluster_utils import Cluster

    from dlzero.selfplay.cluster import run_selfplay_ray

    games, workers = 10, 2
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": SMALL_STORE,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4,
                           "worker_niceness": 0}})  # as a local instance: a busy machine starves Ray's 15
    try:
        nodes = [cluster.add_node(num_cpus=1, object_store_memory=SMALL_STORE) for _ in range(workers)]
        ray.init(address=cluster.address, log_to_driver=False)
        cfg = load_config(None, [*SMALL, "selfplay.games_in_parallel=1", "selfplay.games_per_shard=1",
                                 "selfplay.ray=auto"])
        rd = RunDir.create(tmp_path / "run", cfg)
        result: dict = {}

        def selfplay() -> None:  # in a thread: Ray's nodes can only be added from the main thread
            try:
                result["summary"] = run_selfplay_ray(rd, cfg, games=games, address="auto", workers=workers,
                                                     progress=False, seed=0)
            except BaseException as exc:
                result["error"] = exc

        driver = threading.Thread(target=selfplay, daemon=True)
        driver.start()
        lost_pids = _first_shard_pids(rd, workers, timeout=240)
        for node in nodes:
            cluster.remove_node(node, allow_graceful=False)
        # the kill is not synchronous: a worker still alive for a moment can commit one more shard, which the
        # driver then counts as done while a copy of the folder taken now would not (this test failed so once)
        _wait_until_gone(lost_pids.values(), timeout=60)
        saved = {p.name: p.read_bytes() for p in rd.shards()}  # what the lost nodes' workers had written
        cluster.add_node(num_cpus=1, object_store_memory=SMALL_STORE)
        driver.join(timeout=300)
        assert not driver.is_alive(), "self-play did not end after the nodes were lost"
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert "error" not in result, repr(result.get("error"))
    summary = result["summary"]
    shards = rd.shards()
    assert all(any(p.name == name and p.read_bytes() == data for p in shards)
               for name, data in saved.items())  # nothing written before the loss is lost
    assert sum(read_sidecar(p)["games"] for p in shards) == sum(len(read_hcpe3(p)) for p in shards) == games
    # each worker that had unsaved games when its node went was started again, on the new node
    unfinished = [w for w in range(workers) if sum(n.startswith(f"selfplay-w{w}-") for n in saved) < games // workers]
    assert unfinished, "both workers had finished when their nodes went: the test shows nothing"
    assert summary.restarts == len(unfinished) and not summary.failed_workers
    err = capfd.readouterr().err
    assert all(f"worker {w} died" in err for w in unfinished), err[-3000:]
    for w in unfinished:
        pids = {p.name.split("-")[2] for p in shards if p.name.startswith(f"selfplay-w{w}-")}
        assert str(lost_pids[w]) in pids and len(pids) == 2  # the lost process and its replacement


def test_local_ray_is_its_own_when_another_ray_runs_on_the_machine():
    """Issue 41: `--ray local` passed no address to ray.init, which then joins any Ray instance it finds running on
    the machine (another job's, or one that a killed run left behind: the one in Ray's default folder, which
    names it in /tmp/ray/ray_current_cluster) and refuses num_cpus there: a ValueError traceback, and three
    cluster tests failed on a machine where an earlier suite had been killed. A local instance is now always
    dlzero's own."""
    import socket

    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    other = subprocess.Popen([ray_cli, "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
                              "--include-dashboard=false", "--disable-usage-stats"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        from ray._private.services import find_gcs_addresses

        # only a guard against waiting forever: a head node took over 60 s to come up beside a self-play loop
        deadline = time.monotonic() + 300
        while not any(a.endswith(f":{port}") for a in find_gcs_addresses()):
            assert other.poll() is None and time.monotonic() < deadline, "the other Ray instance did not start"
            time.sleep(0.2)
        script = ("import ray; from dlzero.selfplay.cluster import connect; assert connect('local', num_cpus=1); "
                  "print(ray.get_runtime_context().gcs_address); ray.shutdown()")
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not proc.stdout.strip().endswith(f":{port}")  # its own instance, not the other one
    finally:  # `ray start --block` stops its instance on SIGTERM, but leaves its name in the file
        os.killpg(other.pid, 15)
        try:
            other.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(other.pid, 9)
            other.wait()
        current = Path("/tmp/ray/ray_current_cluster")
        if current.is_file() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()
