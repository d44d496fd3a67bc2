"""The USI engine: driven by cshogi's match runner and library client, and by bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import cshogi
import pytest
from cshogi import cli as cshogi_cli
from cshogi.usi import Engine

from dlzero.config import Config
from dlzero.usi import UsiEngine

USI_LINE = re.compile(r"^(id (name|author) |option name |usiok$|readyok$|info |bestmove |checkmate )")


@pytest.fixture(scope="module")
def engine_cmd(model, tmp_path_factory) -> str:
    """An executable that starts the engine (cshogi launches engines as one path, no arguments)."""
    script = tmp_path_factory.mktemp("bin") / "dlzero-usi"
    script.write_text(f"#!/bin/sh\nexport OMP_NUM_THREADS=1\nexec {sys.executable} -m dlzero.usi "
                      f"--model {model} --threads 1\n")
    script.chmod(0o755)
    return str(script)


def test_match_runner_plays_whole_games(engine_cmd, tmp_path, capsys):
    result = cshogi_cli.main(engine_cmd, engine_cmd, options1={"ByoyomiMargin": 100},
                             options2={"ByoyomiMargin": 100}, games=2, byoyomi=300, time=0, draw=12,
                             csa=str(tmp_path))
    out = capsys.readouterr().out
    assert result["total"] == 2
    assert "切れ負け" not in out and "反則" not in out  # no loss on time, no illegal move
    records = list(tmp_path.glob("*.csa"))
    assert len(records) == 2 and all("%TIME_UP" not in r.read_text() for r in records)


def test_library_client_position_go(engine_cmd):
    engine = Engine(engine_cmd)
    try:
        engine.isready()
        moves = ["7g7f", "3c3d"]
        engine.position(moves)
        start = time.perf_counter()
        best, _ = engine.go(btime=1000, wtime=1000, byoyomi=300)
        assert time.perf_counter() - start < 0.3 + 0.25
        board = cshogi.Board()
        for m in moves:
            board.push_usi(m)
        assert board.is_legal(board.move_from_usi(best))
        best, _ = engine.go(nodes=200)
        assert board.is_legal(board.move_from_usi(best))
        engine.position(sfen="sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1")
        assert engine.go_mate(byoyomi=1000) == "G*5b"
    finally:
        engine.quit()


def test_bad_input_keeps_engine_alive(model):
    commands = [
        "usi", "isready", "frobnicate now", "go",
        "position startpos moves 7g7f 7g7f",                        # illegal move
        "go",
        "position sfen lnsgkgsnl/9/ppppppppp b - 1",                 # too few ranks
        "position sfen 9/9/9/9/9/9/9/9/9 b - 1",                    # no kings (cshogi would abort)
        "position sfen 4k4/9/9/9/9/9/9/9/4K4 b 99P 1",               # impossible hand
        "position sfen lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL x - 1",
        "position sfen lnsgkgsnlZ/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
        "setoption name MultiPV value many", "setoption name ResignThreshold value -5",
        "setoption name NoSuchOption value 1", "setoption name Playouts value 60",
        "isready", "position startpos moves 7g7f", "go", "quit",
    ]
    proc = subprocess.run([sys.executable, "-m", "dlzero.usi", "--model", model, "--threads", "1"],
                          input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0
    assert all(USI_LINE.match(line) for line in lines), lines
    assert lines.count("readyok") == 2
    assert any("unknown command: frobnicate" in line for line in lines)
    assert sum("error: no position" in line for line in lines) == 2
    assert sum(line.startswith("info string error: ") and "SFEN" in line for line in lines) >= 4
    bestmoves = [line.split()[1] for line in lines if line.startswith("bestmove")]
    assert bestmoves[:2] == ["resign", "resign"] and len(bestmoves) == 3
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(bestmoves[2]))


@pytest.mark.parametrize("io_encoding", [None, "utf-8:strict"], ids=["locale", "strict-reader"])
def test_input_bytes_that_are_not_utf8_are_echoed_escaped_and_the_output_stays_utf8(model, io_encoding):
    """Issue 41: `unknown command` echoed 0xff raw, so the output was not UTF-8 (and under a locale whose
    stdin is strict, as PYTHONIOENCODING=utf-8:strict makes it, reading the line ended the session)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONIOENCODING", None)
    if io_encoding:
        env["PYTHONIOENCODING"] = io_encoding
    commands = b"usi\nfoo\xff\xfebar\nposition sfen \xc3(\nisready\nquit\n"
    proc = subprocess.run([sys.executable, "-m", "dlzero.cli", "usi", "--model", model, "--threads", "1"],
                          input=commands, capture_output=True, timeout=60, env=env)
    text = proc.stdout.decode("utf-8")  # strict: raises on any byte that is not UTF-8
    lines = text.splitlines()
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert "info string unknown command: foo\\xff\\xfebar" in lines
    assert any(line.startswith("info string error: ") and "\\xc3(" in line for line in lines), lines
    assert lines[-1] == "readyok"


class _Lines:
    """A thread-safe stdout stand-in that keeps the lines written."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self.lines.extend(text.splitlines())

    def flush(self) -> None:
        pass

    def bestmoves(self) -> list[str]:
        with self._lock:
            return [line for line in self.lines if line.startswith("bestmove")]

    def wait_bestmove(self, timeout: float) -> float:
        start = time.perf_counter()
        while not self.bestmoves():
            assert time.perf_counter() - start < timeout, "no bestmove in time"
            time.sleep(0.005)
        return time.perf_counter() - start


@pytest.fixture()
def in_process(model: str) -> Iterator[tuple[UsiEngine, _Lines]]:
    """The USI engine in this process (its output collected, no pipes: conftest's `usi` is the real command),
    ready, after 2g2f."""
    out = _Lines()
    cfg = Config()
    cfg.inference.threads = 1
    engine = UsiEngine(cfg, model, out)
    engine.handle("isready")
    engine.handle("position startpos moves 2g2f")
    yield engine, out
    engine.handle("quit")


def test_go_infinite_waits_for_stop(in_process):
    engine, out = in_process
    engine.handle("go infinite")
    time.sleep(0.3)
    assert out.bestmoves() == []
    engine.handle("stop")
    assert len(out.bestmoves()) == 1


def test_ponder_then_ponderhit(in_process):
    engine, out = in_process
    engine.handle("setoption name USI_Ponder value true")
    engine.handle("go ponder btime 0 wtime 0 byoyomi 600")
    time.sleep(0.3)
    assert out.bestmoves() == []
    engine.handle("ponderhit")
    assert out.wait_bestmove(2.0) < 0.6
    engine.handle("go ponder btime 0 wtime 0 byoyomi 600")
    time.sleep(0.1)
    engine.handle("stop")  # the pondered move was not played: answer once, at once
    assert len(out.bestmoves()) == 2


def test_go_byoyomi_and_nodes(in_process):
    engine, out = in_process
    engine.handle("go btime 1000 wtime 1000 byoyomi 300")
    assert out.wait_bestmove(2.0) < 0.3 + 0.2
    engine.handle("setoption name MultiPV value 2")
    engine.handle("go nodes 200")
    engine.handle("isready")  # waits for nothing: answered while searching
    engine._finish_search(wait=True)
    assert len(out.bestmoves()) == 2
    infos = [line for line in out.lines if line.startswith("info depth")]
    assert any(" multipv 2 " in line for line in infos)
    assert int(infos[-1].split(" nodes ")[1].split()[0]) >= 150


def test_the_laid_out_engine_loads_one_thread_a_call_and_reloads_when_the_layout_is_set(model):
    """EvalStreams 0 (the default) loads the network with one compute thread a call and searches with one
    call in flight per core; setting EvalStreams with Threads left at 0 gives the library's threads back,
    which is a new load at the next isready (a stream count alone is not)."""
    from dlzero.engine.layout import usable_cores

    out = _Lines()
    engine = UsiEngine(Config(), model, out)
    engine.handle("isready")
    first = engine._evaluator
    assert first.threads == 1 and engine._ensure_player().search.cfg.eval_streams == usable_cores()
    engine.handle("setoption name EvalStreams value 2")
    engine.handle("isready")
    second = engine._evaluator
    assert second is not first and second.threads == 0 and engine._ensure_player().search.cfg.eval_streams == 2
    engine.handle("setoption name EvalStreams value 3")
    engine.handle("isready")
    assert engine._evaluator is second and engine._ensure_player().search.cfg.eval_streams == 3
    engine.handle("position startpos")
    engine.handle("go nodes 100")
    engine._finish_search(wait=True)
    assert len(out.bestmoves()) == 1
    engine.handle("quit")
