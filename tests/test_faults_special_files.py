"""Files that are not files (issue 52, part 5): doctor, the dashboard, training and the networks loader
open only regular files and bound JSON depth.

Every case puts the real thing on disk: a FIFO (`os.mkfifo`), a link to a character device
(`/dev/zero`, which reads without end) or a symlink loop, under a name a reader looks for (a shard, a
CSV log, a model, a JSON state file, a manifest). Before, a FIFO blocked its reader for ever (doctor and
`/api/state` hung), /dev/zero read without end, and a loop was an OSError traceback. The commands run as
real subprocesses with timeouts, so a hang fails its test instead of holding the suite.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_faults_data import TINY

from dlzero.config import load_config
from dlzero.data.hcpe3 import list_shards, read_hcpe3
from dlzero.data.jsonfile import read_json
from dlzero.data.regular import NotRegularFile, open_regular, special_kind
from dlzero.errors import DataError
from dlzero.rundir import RunDir

KINDS = {"fifo": "a FIFO", "device": "a character device", "loop": "a symlink loop"}
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(),
                                reason="needs FIFOs and /dev/zero")


def make_special(path: Path, kind: str) -> None:
    """Put `kind` at `path`: a FIFO, a link to /dev/zero, or a link to itself."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.symlink_to(path.name)


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """`fn()`, or a failed test when it has not returned after `seconds` (a reader blocked on a FIFO)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(("value", fn()))
        except BaseException as exc:  # handed to the test's thread
            out.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)  # a blocked reader must not keep the interpreter
    thread.start()
    thread.join(seconds)
    assert out, f"still blocked after {seconds} s"
    how, value = out[0]
    if how == "raised":
        raise value
    return value


# what a run's readers look for, under names they list
SPECIAL_PATHS = ("data/gen-0001/sp-0001.hcpe3", "metrics/metrics.csv", "models/gen-0001.pt", "loop.json")


def special_run(root: Path, kind: str) -> RunDir:
    """A new run with `kind` under every name of SPECIAL_PATHS (the shard with a sound sidecar, so that
    doctor and training go on to read it)."""
    rd = RunDir.create(root, load_config(None, TINY))
    for rel in SPECIAL_PATHS:
        make_special(rd.root / rel, kind)
    sidecar = rd.root / "data/gen-0001/sp-0001.hcpe3.json"
    sidecar.write_text(json.dumps({"format": "hcpe3", "games": 1, "moves": 1, "meta": {}}))
    return rd


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_regular_file_reader_names_what_it_refuses(tmp_path, kind):
    path = tmp_path / "x.json"
    make_special(path, kind)
    assert special_kind(path) == KINDS[kind]
    with pytest.raises(NotRegularFile, match=f"{KINDS[kind]}, not a regular file"):
        within(10, lambda: open_regular(path))
    with pytest.raises(DataError, match=KINDS[kind]):
        within(10, lambda: read_json(path))
    with pytest.raises(DataError, match=KINDS[kind]):
        within(10, lambda: read_hcpe3(path))
    assert special_kind(tmp_path) == "a directory" and special_kind(tmp_path / "none") is None


@pytest.mark.parametrize("kind", list(KINDS))
def test_doctor_names_each_special_file_and_ends(tmp_path, kind):
    """Before: doctor hung on the FIFO shard and metrics.csv, read /dev/zero without end, and called a FIFO
    model missing."""
    rd = special_run(tmp_path / "run", kind)
    done = subprocess.run([sys.executable, "-m", "dlzero.cli", "doctor", "--run", str(rd.root)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr[-3000:]
    for rel in SPECIAL_PATHS:
        lines = [line for line in done.stdout.splitlines() if line.startswith(f"  PROBLEM {rel}: ")]
        assert len(lines) == 1 and f"{KINDS[kind]}, not a regular file" in lines[0], (rel, done.stdout)
    assert "sidecar without its shard" not in done.stdout  # the shard is there, only not a file


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dashboard:
    """`dlzero dashboard` as a real subprocess (its log is what must hold no traceback)."""

    def __init__(self, run: Path) -> None:
        pytest.importorskip("uvicorn", reason="the dashboard extra is not installed: pip install -e '.[dashboard]'")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "dashboard", "--run", str(run),
                                      "--port", str(self.port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/", timeout=10) as res:
                    res.read()
                return
            except OSError:
                assert time.monotonic() < deadline and self.proc.poll() is None, "dashboard did not start"
                time.sleep(0.2)

    def get(self, path: str) -> tuple[int, Any]:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=90) as res:  # a hang is a timeout
            return res.status, json.loads(res.read())

    def stop(self) -> str:
        """End the server; its whole log."""
        self.proc.terminate()
        try:
            return self.proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.communicate()[0]


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_dashboard_state_warns_about_each_special_file(tmp_path, kind):
    """Before: /api/state hung on a FIFO shard or model, and a looping shard link was a 500."""
    rd = special_run(tmp_path / "run", kind)
    dash = Dashboard(rd.root)
    try:
        status, state = dash.get("/api/state")
    finally:
        log = dash.stop()
    assert status == 200 and "Traceback" not in log, log[-3000:]
    for rel in SPECIAL_PATHS:
        assert any(w.startswith(f"{rel}: ") and KINDS[kind] in w for w in state["warnings"]), (rel, state)


def test_a_client_that_leaves_mid_body_costs_no_traceback(tmp_path):
    """Before: a POST whose Content-Length was more than it sent, then a closed socket, logged Starlette's
    ClientDisconnect with a traceback (the server kept serving)."""
    rd = RunDir.create(tmp_path / "run", load_config(None, TINY))
    dash = Dashboard(rd.root)
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", dash.port), timeout=30) as conn:
                conn.sendall(b"POST /api/analyse HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 1000\r\n\r\n{\"position\"")
                time.sleep(0.3)  # the server is inside the body read when the client goes
        time.sleep(1.0)
        status, _ = dash.get("/api/state")  # and it goes on serving
    finally:
        log = dash.stop()
    assert status == 200
    assert "Traceback" not in log and "ClientDisconnect" not in log, log[-3000:]


@pytest.mark.parametrize("kind", list(KINDS))
def test_training_lists_no_special_shard(tmp_path, kind, caplog):
    """Before: training listed a FIFO shard and hung reading it; a looping link failed the listing."""
    rd = special_run(tmp_path / "run", kind)
    with caplog.at_level("WARNING"):
        assert within(30, rd.shards) == []
        assert within(30, lambda: list_shards(rd.data_dir / "gen-0001")) == []
    assert any("sp-0001.hcpe3" in r.getMessage() and KINDS[kind] in r.getMessage() for r in caplog.records)


def networks(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DLZERO_NETWORKS_DIR": str(folder)}
    return subprocess.run([sys.executable, "-m", "dlzero.cli", *args], capture_output=True, text=True,
                          timeout=240, env=env)


@pytest.mark.parametrize("args", [["networks", "list"], ["networks", "verify"], ["bestmove", "--position", "startpos"]])
def test_a_manifest_nested_100000_deep_is_one_line(tmp_path, args):
    """Before: a RecursionError traceback from `networks list|verify` and `bestmove`."""
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    done = networks(tmp_path, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and "deep.json" in errors[0] and "nested too deeply" in errors[0], done.stderr


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_manifest_that_is_no_file_is_named_and_skipped(tmp_path, kind):
    """Before: a FIFO manifest hung `networks list`; a looping one was an error that hid every network."""
    make_special(tmp_path / "odd.json", kind)
    done = networks(tmp_path, "networks", "list")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"odd.json: {KINDS[kind]}, not a regular file: skipped" in done.stderr, done.stderr
