"""Data-parallel training on the CPU with gloo: replicas stay identical, ranks see disjoint samples.

Two processes share the machine's two cores, one torch thread each.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fake_teacher import FAKE_ENGINE
from test_train import copy_run, make_run, tiny_config

from dlzero.errors import ConfigError
from dlzero.model import load_model_file, new_model
from dlzero.rundir import RunDir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_take_disjoint_slices_of_each_global_batch():
    from dlzero.train.sampler import EpochSampler

    sampler = EpochSampler(50, seed=4)
    for cursor in (0, 16, 48):  # 48: the batch crosses into the next epoch
        whole = sampler.batch(cursor, 16)
        parts = [sampler.batch(cursor, 16, rank, 2) for rank in range(2)]
        assert np.array_equal(np.concatenate(parts), whole)
        assert not set(parts[0]) & set(parts[1]) or cursor == 48
    assert sorted(sampler.take(0, 50)) == list(range(50))


def _replica(rank: int, world: int, port: int, run_root: str, out_dir: str) -> None:
    from dlzero.train.dataset import build_window
    from dlzero.train.distributed import current, exit_rank
    from dlzero.train.trainer import Segment, Trainer

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        cfg = tiny_config(batch_size=16)
        buf, _ = build_window(RunDir.open(run_root), cfg.train)
        model = new_model(cfg.model, seed=100 + rank)  # different on purpose: DDP starts from rank 0's
        trainer = Trainer(model, cfg.train, torch.device("cpu"), current())
        start = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
        trainer.fit(buf, Segment(1, 4, seed=7), None, None, progress=False)
        end = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
        torch.save({"start": start, "end": end}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
    exit_rank(0)  # as `dlzero train` ranks do: a spawned child's teardown can abort on gloo's threads


def test_two_gloo_replicas_stay_identical(tmp_path):
    root = tmp_path / "run"
    make_run(root, tiny_config(), (2,))
    mp.spawn(_replica, args=(2, free_port(), str(root), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    assert all(torch.equal(r0["end"][k], r1["end"][k]) for k in r0["end"])
    assert not all(torch.equal(r0["start"][k], r0["end"][k]) for k in r0["end"])  # it trained


def test_a_finished_rank_exits_with_its_code_after_what_a_normal_exit_does(tmp_path):
    """`exit_rank` skips only the interpreter's teardown: threads joined, exit handlers run, output
    flushed (a pipe's stdout is block-buffered), and the process ends with the code it was given."""
    script = f"""
import atexit, sys, threading, time
from pathlib import Path
from dlzero.train.distributed import exit_rank
out = Path({str(tmp_path)!r})
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late():
    time.sleep(0.3)
    (out / "thread").write_text("joined")
threading.Thread(target=late).start()
print("unflushed", end="")
sys.stderr.write("err")
exit_rank(3)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "unflushed", "err")
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"


def test_a_thread_that_never_ends_does_not_keep_a_finished_rank(tmp_path):
    """Issue 41: `exit_rank` joined every thread without a timeout, so one that never ends kept the rank
    (and torchrun) waiting for ever; now it waits EXIT_JOIN_S in all, says which, and exits."""
    script = f"""
import atexit, threading
from pathlib import Path
from dlzero.train import distributed
distributed.EXIT_JOIN_S = 0.5
atexit.register(lambda: Path({str(tmp_path)!r}, "atexit").write_text("ran"))
threading.Thread(target=threading.Event().wait, name="stuck").start()
distributed.exit_rank(4)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4 and "stuck still running after 0.5 s" in proc.stderr, proc.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


@pytest.mark.parametrize("failure,status,line", [
    (lambda: ConfigError("no such run"), 2, "dlzero train: error: no such run"),
    (lambda: RuntimeError("a bug"), 1, "RuntimeError: a bug"),
])
def test_a_rank_that_fails_reports_it_and_still_ends_through_exit_rank(failure, status, line, monkeypatch, capsys):
    """Issue 41: a torchrun rank whose training raised left through `dlzero.cli` and the interpreter's
    teardown, where gloo's threads can abort it; now every path ends in `exit_rank`, after the error's
    report (the one line, or a bug's traceback)."""
    import dlzero.commands.train as train_cmd
    from dlzero.cli import main
    from dlzero.train import distributed

    ended: list[int] = []

    def exit_rank(code: int) -> None:
        ended.append(code)
        raise SystemExit(code)  # the real one ends the process

    def fail(args) -> int:
        raise failure()

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")  # rank 1 writes nothing to the run: no lock
    monkeypatch.setattr(train_cmd, "_train", fail)
    monkeypatch.setattr(distributed, "exit_rank", exit_rank)
    with pytest.raises(SystemExit):
        main(["train", "--run-dir", "nowhere"])
    assert ended == [status] and line in capsys.readouterr().err


def _torchrun_train(rd: RunDir, steps: int, *extra: str, timeout: int) -> subprocess.CompletedProcess:
    """`dlzero train --run-dir` on the run under torchrun: two CPU ranks, one torch thread each."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", "-m", "dlzero.cli", "train", "--run-dir", str(rd.root),
           "--steps", str(steps), "--no-progress", "--set", "train.batch_size=16", "--set", "train.device=cpu",
           *extra]
    return _run_group(cmd, env, timeout)


def _run_group(cmd: list[str], env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    """`cmd` in a session of its own: on `timeout` the whole group goes (torchrun and both ranks; a plain
    `subprocess.run` kills only torchrun, and its ranks then went on training beside later tests), and the
    TimeoutExpired is raised as `subprocess.run` would."""
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_torchrun_launch_of_dlzero_train(tmp_path):
    base = tmp_path / "base"
    make_run(base, tiny_config(), (2,))
    rd = copy_run(base, tmp_path)
    proc = _torchrun_train(rd, 3, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("wrote ") == 1  # only rank 0 reports and writes
    trained, meta = load_model_file(rd.model_path(1))
    start, _ = load_model_file(rd.model_path(0))
    assert meta.generation == 1
    assert not all(torch.equal(a, b) for a, b in zip(trained.parameters(), start.parameters(), strict=True))
    ckpt = torch.load(rd.train_dir / "checkpoint.pt", weights_only=True)
    assert ckpt["segment"]["done"] and ckpt["trainer"]["global_step"] == 3


def test_torchrun_ranks_split_the_relabelling(tmp_path):
    """`train.relabel` under torchrun: each rank relabels its slice of the shards rank 0 listed (here 2
    and 1 of 3) with its own teacher, and training reads every twin, so no rank waits out the whole
    relabelling at its first collective."""
    from dlzero.train.train_state import load_checkpoint

    script = tmp_path / "fake_usi.py"
    script.write_text(FAKE_ENGINE)
    base = tmp_path / "base"
    make_run(base, tiny_config(), (2, 2, 2))
    rd = copy_run(base, tmp_path)
    proc = _torchrun_train(rd, 2, "--set", f"train.relabel=usi:{sys.executable} {script}", timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "relabelled 2 shard(s)" in proc.stderr and "relabelled 1 shard(s)" in proc.stderr, proc.stderr[-3000:]
    assert all(rd.relabelled(p).is_file() for p in rd.shards())
    plan = load_checkpoint(rd.train_dir / "checkpoint.pt", tiny_config().model)["segment"]["plan"]
    assert plan["source"] == "relabelled" and len(plan["shards"]) == 3


def test_a_rank_that_fails_ends_the_job_without_waiting_for_the_others(tmp_path):
    """Issue 41: a rank whose work failed went to the exit barrier and waited there for the other ranks
    to finish their own work (here rank 0's relabelling, two minutes) or for gloo's 30-minute timeout.
    A failed rank now leaves at once with its error; torchrun then stops the others, and the job ends
    failed within seconds."""
    script = tmp_path / "fake_usi.py"
    # torchrun's RANK reaches each teacher through the environment: rank 1's dies at once, rank 0's is slow.
    script.write_text('import os, sys, time\nif os.environ.get("RANK") == "1":\n    sys.exit(5)\n'
                      'time.sleep(120)\n' + FAKE_ENGINE)
    base = tmp_path / "base"
    make_run(base, tiny_config(), (2, 2))
    rd = copy_run(base, tmp_path)
    started = time.monotonic()
    proc = _torchrun_train(rd, 2, "--set", f"train.relabel=usi:{sys.executable} {script}", timeout=300)
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert "exited with status 5" in proc.stderr, proc.stderr[-3000:]
    assert time.monotonic() - started < 60, proc.stderr[-3000:]
