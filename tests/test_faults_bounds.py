"""`dlzero analyze` stays bounded whatever a client sends (issue 52, part 3).

- `analyzeTurns` over a long move list: every task used to hold a copy of the whole game (and its own
  position string), so memory and work grew with the square of its length (a 108 KiB query took 3 GiB and
  delayed the next line by 52 s). A turn's board now keeps the last HISTORY_PLIES plies only, from one walk.
- A new `overrideSettings` with every query made one more Search (with its caches) for ever: now an LRU.
- A numeric flag past what its use takes (`--max-line-bytes 10^20`) ended in a traceback: now one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import cshogi
import pytest

from dlzero.analysis import AnalysisEngine
from dlzero.analysis_query import HISTORY_PLIES, MAX_SETTINGS, QueryReader
from dlzero.config import Config
from dlzero.encoding.features import repetition_count
from dlzero.game_end import REPETITION_PLIES
from dlzero.inference import NullEvaluator

SHUFFLE = ["5i5h", "5a5b", "5h5i", "5b5a"]  # kings step out and back: legal for ever, a repetition every 4 plies


def shuffle(n: int) -> list[str]:
    return [SHUFFLE[i % 4] for i in range(n)]


def held_plies(n: int) -> int:
    """Plies of history the tasks of an all-turns query of `n` moves hold (what copying them cost, too)."""
    query = {"id": 1, "position": "startpos", "moves": shuffle(n), "analyzeTurns": list(range(n + 1))}
    tasks = QueryReader(Config(), 1).read(json.dumps(query)).tasks
    assert len(tasks) == n + 1
    return sum(len(task.board.history) for task in tasks)


def test_analyze_turns_hold_history_linear_in_the_query():
    """Before: 4x the moves held 16x the plies (125,250 -> 2,001,000); each turn held the game before it."""
    small, large = held_plies(500), held_plies(2000)
    assert large <= 4.2 * small, (small, large)
    assert large <= (2000 + 1) * HISTORY_PLIES


@pytest.mark.parametrize("position", ["startpos", "startpos moves 7g7f 3c3d " + " ".join(shuffle(40))])
def test_a_turns_board_answers_as_the_whole_game_does(position):
    """The history kept is what the search and the encoder read: same position, same repetitions, same
    last moves, at every turn, also where the position string's own moves are part of that history."""
    moves = shuffle(60)
    query = {"position": position, "moves": moves, "analyzeTurns": list(range(61))}
    tasks = QueryReader(Config(), 1).read(json.dumps(query)).tasks
    full = cshogi.Board()
    for usi in position.split()[2:]:
        full.push_usi(usi)
    for turn, task in enumerate(tasks):
        assert task.board.sfen() == full.sfen()
        assert task.board.is_draw(REPETITION_PLIES) == full.is_draw(REPETITION_PLIES)
        assert repetition_count(task.board) == repetition_count(full)
        kept = list(task.board.history)
        assert len(kept) == min(HISTORY_PLIES, len(full.history))
        assert kept == list(full.history)[len(full.history) - len(kept):]
        head = position if "moves" in position or not turn else position + " moves"
        assert task.position == head + "".join(f" {m}" for m in moves[:turn])
        if turn < len(moves):
            full.push_usi(moves[turn])


def test_a_108_kib_query_is_read_quickly_and_in_little_memory(model, tmp_path):
    """The issue's probe on the real command: 13,000 moves, every turn analysed, then `query_version` and
    `terminate_all`. Before: RSS went from 276 MiB to 3.1 GiB and `query_version` waited 52.6 s."""
    n = 13_000
    long_query = json.dumps({"id": "long", "position": "startpos", "moves": shuffle(n),
                             "analyzeTurns": list(range(n + 1)), "maxVisits": 1}).encode()
    assert len(long_query) > 108 << 10
    version = b'{"id": "v", "action": "query_version"}\n'
    stop = b'{"id": "t", "action": "terminate_all"}\n'
    peak = {}
    for name, data in (("without", version), ("with", long_query + b"\n" + version + stop)):
        with open(tmp_path / f"{name}.out", "wb") as out, open(tmp_path / f"{name}.err", "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "analyze", "--model", model, "--threads",
                                     "1"], stdin=subprocess.PIPE, stdout=out, stderr=err)
            watchdog = threading.Timer(300, proc.kill)  # a hang fails the test instead of holding the suite
            watchdog.start()
            proc.stdin.write(data)
            proc.stdin.close()
            _, status, usage = os.wait4(proc.pid, 0)  # reaped here, so the peak RSS is this child's alone
            watchdog.cancel()
        assert os.waitstatus_to_exitcode(status) == 0, (tmp_path / f"{name}.err").read_text()[-2000:]
        answers = [json.loads(line) for line in (tmp_path / f"{name}.out").read_text("utf-8").splitlines()]
        assert any(a.get("id") == "v" and "version" in a for a in answers)
        peak[name] = usage.ru_maxrss  # KiB
    assert peak["with"] - peak["without"] < 400 * 1024, peak  # before: ~2.8 GiB more


def test_searches_per_settings_are_bounded():
    """Before: 20 distinct overrides kept 20 Search objects and 20 configs, for ever."""
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=2)
    lines = [json.dumps({"id": i, "position": "startpos", "overrideSettings": {"search.c_init": 1.0 + i / 100}})
             for i in range(20)]
    for line in lines:
        [answer] = engine.answer([line])
        assert "bestmove" in answer
    assert len(engine._searches) <= MAX_SETTINGS and len(engine.reader._configs) <= MAX_SETTINGS
    [again] = engine.answer([lines[0]])  # a setting dropped is made again when used
    assert "bestmove" in again


@pytest.mark.parametrize("flag", [["--max-line-bytes", str(10**20)], ["--max-line-bytes", "0"],
                                  ["--threads", str(10**20)], ["--max-batch", str(10**20)],
                                  ["--playouts", str(10**20)], ["--set", f"analysis.max_line_bytes={10**20}"]])
def test_a_numeric_flag_out_of_range_is_one_line(model, flag):
    """Before: --max-line-bytes 10^20 was an OverflowError traceback (at the first read), --threads 10^20
    onnxruntime's TypeError."""
    done = subprocess.run([sys.executable, "-m", "dlzero.cli", "analyze", "--model", model, *flag],
                          input=b'{"action": "query_version"}\n', capture_output=True, timeout=120)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err, err
    # one error line: the config's check, or argparse's (after its usage block) for a flag with a range of its own
    errors = [line for line in err.strip().splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0] == err.strip().splitlines()[-1], err
    assert "must be between" in err or "must be from" in err
