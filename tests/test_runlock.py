"""One writer per part of a run (issue 24, finding 2): a second loop, trainer or gate is refused.

The holder is a real `dlzero loop` (the finding was two loops on one run), or a real process that
holds a lock and dies; the refused commands are the real CLI. After the holder is SIGKILLed, its
lock is taken over without anything being deleted.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_loop import TINY

from dlzero.runlock import PARTS, RunLockedError, hold, lock_path


def dlzero(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlzero.cli", *args], capture_output=True, text=True, timeout=300)


def wait_for_holder(run: Path, part: str, proc: subprocess.Popen, timeout: float = 120.0) -> dict:
    """The holder written into `part`'s lock file, once `proc` has taken it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "holder exited"
        path = lock_path(run, part)
        if path.is_file() and path.read_text().strip():
            holder = json.loads(path.read_text())
            if holder["pid"] == proc.pid:
                return holder
        time.sleep(0.1)
    raise AssertionError(f"{proc.pid} did not take the {part} lock")


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the holder and every process it started (it leads its own session)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def assert_refused(done: subprocess.CompletedProcess, holder: dict) -> None:
    assert done.returncode != 0
    message = done.stderr
    assert f"PID {holder['pid']} on host {socket.gethostname()}" in message, message
    assert holder["command"] in message and f"since {holder['since']}" in message
    assert "takes" in message and "over" in message  # and how a dead holder's lock is broken


def test_a_running_loop_refuses_a_second_loop_trainer_and_gate_and_is_taken_over_once_killed(tmp_path, caplog):
    run = tmp_path / "run"
    loop = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "loop", "--config", "tiny", "--run", str(run),
                             "--generations", "1000", *TINY], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        holder = wait_for_holder(run, "train", loop)
        assert holder["command"].startswith("dlzero loop --config tiny --run ")
        assert json.loads(lock_path(run, "gate").read_text())["pid"] == loop.pid
        while not (run / "config.yaml").is_file():
            assert loop.poll() is None, "the loop exited"
            time.sleep(0.1)
        config = (run / "config.yaml").read_text()
        assert_refused(dlzero("loop", "--run", str(run), "--generations", "1", "--set", "train.batch_size=16"), holder)
        assert_refused(dlzero("train", "--run", str(run), "--steps", "1"), holder)
        assert_refused(dlzero("gate", "--run", str(run), "--games", "2"), holder)
        assert (run / "config.yaml").read_text() == config  # a refused command wrote nothing
    finally:
        kill_group(loop)
    # the kernel dropped the dead loop's locks: the next writer takes them, naming who left them
    with caplog.at_level(logging.WARNING, logger="dlzero.runlock"), hold(run, tuple(PARTS), command="test"):
        assert json.loads(lock_path(run, "train").read_text())["pid"] == os.getpid()
    assert sum(f"PID {loop.pid}" in r.getMessage() and "without releasing" in r.getMessage()
               for r in caplog.records) == len(PARTS)
    assert lock_path(run, "train").read_text() == ""  # released: nobody to name


def make_run(path: Path) -> Path:
    from dlzero.config import Config
    from dlzero.rundir import RunDir

    RunDir.create(path, Config())
    return path


HOLDER = textwrap.dedent("""
    import os, sys, time
    from dlzero.runlock import hold
    with hold(sys.argv[1], (sys.argv[2],), command="holder"):
        if sys.argv[3] == "fork" and os.fork() == 0:   # a child that inherits the locked file and outlives us
            time.sleep(600)
        print("held", flush=True)
        time.sleep(600)
""")


def test_a_lock_kept_by_a_child_of_a_dead_holder_says_which_file_to_look_at(tmp_path):
    run = make_run(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run), "gate", "fork"], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout.readline() == "held\n"
        os.kill(proc.pid, signal.SIGKILL)  # the holder dies, its forked child keeps the open file
        proc.wait(30)
        done = dlzero("gate", "--run", str(run))
        assert done.returncode == 2
        assert f"PID {proc.pid} has exited" in done.stderr and "fuser -v" in done.stderr
        assert str(lock_path(run, "gate")) in done.stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)


def test_parts_are_separate_and_a_missing_run_gets_no_lock_folder(tmp_path):
    run = make_run(tmp_path / "run")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run), "gate", "plain"], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout.readline() == "held\n"
        with pytest.raises(RunLockedError, match=f"PID {proc.pid} on host"), hold(run, ("train", "gate")):
            pass
        assert lock_path(run, "train").read_text() == ""  # a refusal keeps no part it got before
        with hold(run, ("train",)):  # the trainer's part is free while a gate runs
            pass
        # self-play needs no lock to play, but generation 0 of a new run is the gate's best.json: it waits for
        # it (selfplay.first_model_wait_s), then stops naming the holder
        done = dlzero("selfplay", "--run", str(run), "--games", "1", "--quiet",
                      "--set", "selfplay.first_model_wait_s=1")
        assert done.returncode == 2 and f"PID {proc.pid} on host" in done.stderr and "waiting 1 s" in done.stderr
        assert not (run / "models" / "best.json").exists()
    finally:
        kill_group(proc)
    missing = tmp_path / "missing"
    done = dlzero("train", "--run", str(missing))
    assert done.returncode == 2 and "not a dlzero run directory" in done.stderr
    assert not missing.exists()
