"""Inference server: parity with in-process evaluation from 3 worker processes, killed workers,
bad requests, model hot-swap, a dead server, and self-play workers writing shards through it."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from multiprocessing.connection import Client
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_MODEL_SETS
from randpos import random_sfens

from dlzero.config import Config, load_config
from dlzero.data.hcpe3 import read_hcpe3
from dlzero.encoding import Encoder
from dlzero.errors import ServerError
from dlzero.inference import load_model
from dlzero.inference.remote import RemoteEvaluator
from dlzero.inference.server import ModelSource, ServerAddress, start_server
from dlzero.inference.slots import shm_dir
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.rundir import RunDir

SMALL = [*TINY_MODEL_SETS, "inference.backend=onnx",
         "inference.threads=1"]


def small_config(*extra: str) -> Config:
    return load_config(None, [*SMALL, *extra])


def real_planes(n: int, seed: int) -> np.ndarray:
    """Encoded positions from random games (real inputs, not noise)."""
    import cshogi

    enc = Encoder()
    out = np.zeros((n, 100, 9, 9), dtype=np.float32)
    for i, sfen in enumerate(random_sfens(n, seed)):
        board = cshogi.Board(sfen)
        enc.encode_into(board, out[i])
    return out


def _save(cfg: Config, path: Path, seed: int, generation: int = 0) -> Path:
    return save_model(new_model(cfg.model, seed=seed), path, ModelMetadata(generation=generation))


# -- child processes (spawned: module-level functions) ---------------------------------------------
def _client_main(address: ServerAddress, seed: int, rounds: int, out: str, go) -> None:
    """Evaluate the same positions in chunks of varying size, `rounds` times; save every answer."""
    x = real_planes(40, seed)
    ev = RemoteEvaluator(address, capacity=16)
    go.wait(60)  # all three start together, so their requests meet at the server
    rng = np.random.default_rng(seed)
    policies, values = [], []
    for _ in range(rounds):
        start = 0
        while start < len(x):
            n = int(rng.integers(1, 17))
            p, v = ev.evaluate(x[start:start + n])
            policies.append(p)
            values.append(v)
            start += n
    ev.close()
    np.savez(out, x=x, policy=np.concatenate(policies), value=np.concatenate(values), requests=len(values))


def _die_mid_request(address: ServerAddress) -> None:
    """Send a request, then die before reading the answer (SIGKILL: no cleanup at all)."""
    conn = Client(address.path, family="AF_UNIX", authkey=address.authkey)
    conn.send(("hello", os.getpid(), 8))
    conn.recv()
    conn.send(("eval", 8))
    os.kill(os.getpid(), signal.SIGKILL)


def _evaluate_forever(address: ServerAddress) -> None:
    ev = RemoteEvaluator(address, capacity=32)
    x = real_planes(32, 5)
    while True:
        ev.evaluate(x)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A model file and a server for it (max_wait long enough that workers' requests meet)."""
    cfg = small_config("server.max_wait_ms=20", "server.max_batch=64")
    path = _save(cfg, tmp_path_factory.mktemp("srv") / "m.pt", seed=3, generation=7)
    srv = start_server(ModelSource.file(path), cfg.inference, cfg.server, verbose=False)
    yield cfg, path, srv
    srv.stop()


def test_three_workers_get_what_in_process_evaluation_gives(served, tmp_path):
    cfg, path, srv = served
    before = srv.stats()
    ctx = mp.get_context("spawn")
    outs = [tmp_path / f"w{i}.npz" for i in range(3)]
    go = ctx.Event()
    procs = [ctx.Process(target=_client_main, args=(srv.address, 10 + i, 6, str(outs[i]), go)) for i in range(3)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60
    while srv.stats()["clients"] < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    go.set()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    local = load_model(path, cfg.inference)
    total = requests = 0
    for out in outs:
        data = np.load(out)
        want_p, want_v = local.evaluate(data["x"])
        rounds = len(data["value"]) // len(data["x"])
        assert rounds == 6
        np.testing.assert_allclose(data["policy"], np.tile(want_p, (rounds, 1)), atol=1e-4)
        np.testing.assert_allclose(data["value"], np.tile(want_v, rounds), atol=1e-5)
        total += len(data["value"])
        requests += int(data["requests"])
    after = srv.stats()
    assert after["positions"] - before["positions"] == total
    # the server merged requests of different workers into one network call
    assert after["batches"] - before["batches"] < requests
    assert after["generation"] == 7
    assert after["clients_lost"] == before["clients_lost"]


def test_killed_workers_do_not_wedge_the_server(served):
    cfg, path, srv = served
    before = srv.stats()["clients_lost"]
    ctx = mp.get_context("spawn")
    sudden = ctx.Process(target=_die_mid_request, args=(srv.address,))
    sudden.start()
    sudden.join(60)
    assert sudden.exitcode == -signal.SIGKILL
    start = srv.stats()["positions"]
    busy = ctx.Process(target=_evaluate_forever, args=(srv.address,))
    busy.start()
    deadline = time.monotonic() + 60
    while srv.stats()["positions"] < start + 1000 and time.monotonic() < deadline:
        time.sleep(0.05)  # let it get into its stride, then kill it at an arbitrary point
    time.sleep(0.3)
    os.kill(busy.pid, signal.SIGKILL)
    busy.join(10)
    x = real_planes(10, 1)
    ev = RemoteEvaluator(srv.address, capacity=16, timeout_s=30)
    p, v = ev.evaluate(x)
    want_p, want_v = load_model(path, cfg.inference).evaluate(x)
    np.testing.assert_allclose(p, want_p, atol=1e-4)
    np.testing.assert_allclose(v, want_v, atol=1e-5)
    ev.close()
    deadline = time.monotonic() + 10
    while srv.stats()["clients_lost"] < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.stats()["clients_lost"] == before + 2
    # nothing left in shared memory: the slot of the worker that died before mapping it was unlinked too
    assert not list(shm_dir().glob(f"dlzero-slot-{srv.process.pid}-*"))


def test_bad_requests_get_errors_and_the_server_goes_on(served):
    _, _, srv = served
    raw = Client(srv.address.path, family="AF_UNIX", authkey=srv.address.authkey)
    raw.send(("hello", os.getpid(), 4))
    assert raw.recv()[0] == "slot"
    raw.send(("eval", 5))  # more than the slot holds
    kind, msg = raw.recv()
    assert kind == "error" and "slot holds 4" in msg
    raw.send(("launch missiles",))
    assert raw.recv()[0] == "error"
    raw.send_bytes(b"not a pickle")  # garbage: this connection is dropped, nobody else is
    with pytest.raises(EOFError):
        raw.recv()
    with pytest.raises(ServerError, match="refused"):
        RemoteEvaluator(ServerAddress(srv.address.path, b"wrong key"))
    ev = RemoteEvaluator(srv.address, capacity=4)
    assert ev.evaluate(real_planes(3, 2))[0].shape == (3, 2187)
    ev.close()


def test_hot_swap_follows_best_json_without_stopping(tmp_path):
    cfg = small_config("server.check_interval_s=0.1")
    rd = RunDir.create(tmp_path / "run", cfg)
    _save(cfg, rd.model_path(0), seed=1, generation=0)
    rd.set_best(0, "initial")
    x = real_planes(12, 3)
    with start_server(ModelSource.run(rd.root), cfg.inference, cfg.server, verbose=False) as srv:
        ev = RemoteEvaluator(srv.address, capacity=16)
        p0, _ = ev.evaluate(x)
        assert ev.generation == 0
        np.testing.assert_allclose(p0, load_model(rd.model_path(0), cfg.inference).evaluate(x)[0], atol=1e-4)
        errors: list[BaseException] = []
        stop = threading.Event()

        def keep_evaluating() -> None:  # a second worker, busy all through the swap
            other = RemoteEvaluator(srv.address, capacity=16)
            try:
                while not stop.is_set():
                    other.evaluate(x)
            except BaseException as exc:
                errors.append(exc)
            finally:
                other.close()

        t = threading.Thread(target=keep_evaluating)
        t.start()
        _save(cfg, rd.model_path(1), seed=2, generation=1)
        rd.set_best(1, "test promotion")
        deadline = time.monotonic() + 30
        while ev.generation != 1 and time.monotonic() < deadline:
            p1, _ = ev.evaluate(x)
        stop.set()
        t.join()
        assert ev.generation == 1 and ev.metadata.generation == 1
        want1 = load_model(rd.model_path(1), cfg.inference).evaluate(x)[0]
        np.testing.assert_allclose(p1, want1, atol=1e-4)
        assert not np.allclose(p0, p1, atol=1e-3)
        assert not errors
        # a broken promoted file is refused: the server keeps serving generation 1
        rd.model_path(2).write_bytes(b"not a model")
        rd.set_best(2, "broken")
        time.sleep(1.0)
        p, _ = ev.evaluate(x)
        np.testing.assert_allclose(p, want1, atol=1e-4)
        assert srv.stats()["swaps"] == 1
        ev.close()


def test_dead_server_and_missing_model_are_clear_errors(tmp_path):
    cfg = small_config()
    with pytest.raises(ServerError, match="does not exist"):
        start_server(ModelSource.file(tmp_path / "nope.pt"), cfg.inference, cfg.server, verbose=False)
    path = _save(cfg, tmp_path / "m.pt", seed=0)
    srv = start_server(ModelSource.file(path), cfg.inference, cfg.server, verbose=False)
    ev = RemoteEvaluator(srv.address, capacity=8, timeout_s=20)
    ev.evaluate(real_planes(2, 0))
    srv.process.kill()
    srv.process.join(10)
    with pytest.raises(ServerError, match="closed the connection"):
        ev.evaluate(real_planes(2, 0))
    srv.stop()
    with pytest.raises(ServerError, match="cannot reach"):
        RemoteEvaluator(srv.address)


def test_selfplay_workers_write_shards_through_the_server(tmp_path, capfd):
    from dlzero.selfplay.session import run_selfplay

    cfg = small_config("server.enabled=true", "selfplay.playouts=8", "selfplay.cheap_playouts=4",
                       "selfplay.max_moves=30", "selfplay.games_in_parallel=2", "selfplay.games_per_shard=2",
                       "selfplay.random_plies=2")
    rd = RunDir.create(tmp_path / "run", cfg)
    summary = run_selfplay(rd, cfg, games=6, workers=3, progress=False, seed=0)
    assert summary.games == 6 and not summary.failed_workers
    assert len(summary.servers) == 1 and summary.servers[0]["clients_seen"] == 3
    assert summary.servers[0]["positions"] > 0 and summary.servers[0]["clients_lost"] == 0
    games = [g for p in rd.shards() for g in read_hcpe3(p)]
    assert len(games) == 6
    assert {p.name.split("-")[1] for p in rd.shards()} == {"w0", "w1", "w2"}


def test_bench_server_cli_reports_figures(tmp_path):
    import json
    import subprocess
    import sys

    path = _save(small_config(), tmp_path / "m.pt", seed=0)
    args = [sys.executable, "-m", "dlzero.cli", "bench", "server", "--model", str(path), "--workers", "2",
            "--seconds", "1", "--parallel", "4", "--json"]
    for s in SMALL:
        args += ["--set", s]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert row["workers"] == 2 and row["config"] == "b1c16"
    assert row["evals_per_s"] > 0 and row["inference_only_per_s"] > 0 and row["positions_per_s"] > 0
    assert 1 <= row["mean_batch"] <= 8  # two workers, at most 4 leaves each per request
    assert 0 < row["busy"] <= 1
