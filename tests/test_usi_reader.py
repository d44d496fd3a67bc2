"""Issue 52: the USI reader never waits on a search. The real `dlzero usi` on pipes, driven with the probes
that hung it: a `ponderhit` in a search only `stop` ends, then `position`; `position`, `go` and `usinewgame`
during `go nodes 1000000000` or under a 30 s byoyomi; `go mate infinite` after a `ponderhit`. Each command
must be read and answered while a search runs; a search a new `position`, `go` or `usinewgame` meets is
ended first and answers with its one `bestmove` (or `checkmate`)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import cshogi
import pytest
from piped import MANY_CHECKS, Piped, is_line

# The promise is 1 s; the slack is for a machine shared with other test runs. A hang, or a wait for the
# search's own end (29 s in the probes), still fails by far.
REPLY_S = 2.5
ROOT = Path(__file__).resolve().parents[1]
START_BOARD = cshogi.STARTING_SFEN.split()[0]


def _answers(gui: Piped) -> list[str]:
    return [line for line in gui.seen if line.startswith(("bestmove", "checkmate"))]


def _ready_at_once(gui: Piped) -> None:
    gui.send("isready")
    assert gui.wait(is_line("readyok"), timeout=30)[1] < REPLY_S


def _quit_at_once(gui: Piped) -> None:
    start = time.monotonic()
    gui.send("quit")
    gui.proc.wait(timeout=30)
    assert time.monotonic() - start < REPLY_S
    gui.seen.extend(gui.arrived())


@pytest.mark.parametrize("position,go", [("startpos", "go infinite"), ("startpos", "go ponder"),
                                         (MANY_CHECKS, "go mate infinite")])
def test_a_ponderhit_in_a_search_only_stop_ends_then_position(usi, position, go):
    """The issue's first probe: no `readyok`, no `bestmove`, and `quit` never read (`go mate infinite`:
    27.6 s). The `ponderhit` is said to be ignored, and `position` ends the search."""
    usi.send(f"position {position}", go)
    time.sleep(0.5)
    usi.send("ponderhit")
    note, _ = usi.wait(is_line("info string ponderhit:"), timeout=30)
    assert "until stop" in note
    usi.send("position startpos")
    answer = "checkmate" if "mate" in go else "bestmove"
    assert usi.wait(is_line(answer), timeout=30)[1] < REPLY_S
    _ready_at_once(usi)
    usi.send("stop")  # nothing runs: no second answer
    _ready_at_once(usi)
    _quit_at_once(usi)
    assert len(_answers(usi)) == 1


@pytest.mark.parametrize("command", ["position startpos moves 7g7f", "go nodes 10", "usinewgame"])
@pytest.mark.parametrize("go", ["go nodes 1000000000", "go btime 0 wtime 0 byoyomi 30000"])
def test_a_command_mid_search_ends_it_first(usi, go, command):
    """The reader joined a search only `stop` (or its 30 s clock) could end, so `isready` and `stop` went
    unread (`isready` waited 29.1 s). Now the search answers at once, then the command acts."""
    usi.send("position startpos", go)
    time.sleep(0.5)
    usi.send(command)
    assert usi.wait(is_line("bestmove"), timeout=30)[1] < REPLY_S
    _ready_at_once(usi)
    if command.startswith("go") and len(_answers(usi)) < 2:  # the new search's own answer, unless already in
        usi.wait(is_line("bestmove"), timeout=30)
    usi.send("stop")
    _ready_at_once(usi)
    _quit_at_once(usi)
    assert len(_answers(usi)) == (2 if command.startswith("go") else 1)


def test_ponderhit_with_a_clock_still_times_the_search(usi):
    usi.send("setoption name USI_Ponder value true", "position startpos", "go ponder btime 0 wtime 0 byoyomi 1000")
    time.sleep(0.5)
    _ready_at_once(usi)
    assert not _answers(usi)
    usi.send("ponderhit")
    assert usi.wait(is_line("bestmove"), timeout=30)[1] < 1.0 + 0.5  # timed from the hit: byoyomi less its margin
    usi.send("ponderhit")  # no ponder search now: said, and nothing else
    assert "no ponder search" in usi.wait(is_line("info string ponderhit:"), timeout=30)[0]
    _quit_at_once(usi)
    assert len(_answers(usi)) == 1


def test_quit_during_any_search_exits_at_once(usi):
    usi.send("setoption name MateGuardNodes value 10000000", "position startpos", "go nodes 1000000000")
    time.sleep(0.5)
    _quit_at_once(usi)
    assert usi.proc.returncode == 0


def test_an_illegal_position_is_refused_in_one_line_and_the_last_one_stays(usi):
    """Adjacent kings were searched (`bestmove 5f5e`, the king taking the king); a move number of 2^31 - 1
    was taken. Each is one `info string error`, and the position set before is searched."""
    usi.send("position startpos moves 7g7f")
    for bad in ("sfen 9/9/9/9/4k4/4K4/9/9/9 b - 1", f"sfen {START_BOARD} b - 2147483647",
                "sfen 4k4/4R4/9/9/9/9/9/9/4K4 b - 1"):
        usi.send(f"position {bad}")
        line, _ = usi.wait(is_line("info string error:"), timeout=30)
        assert "the position stays as it was" in line
    usi.send("go nodes 20")
    move = usi.wait(is_line("bestmove"), timeout=30)[0].split()[1]
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(move))  # White's reply to 7g7f


def test_a_seeded_fuzz_answers_every_isready_at_once_and_exits_on_quit(model):
    """scripts/usi_fuzz.py at 3,000 lines (the issue's 3,000-line fuzz stalled at line 1,540): valid and
    invalid commands, every kind of `go`; each `isready` within the bound, one answer per `go`, `quit` obeyed."""
    # a rare isready took over a second on a machine at load 8 (docs/benchmarks/usi-responsiveness.md): the
    # bound here is what a stall (the issue's, for good at line 1,540) fails, not the promise itself
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "usi_fuzz.py"), "--model", model, "--lines",
                           "3000", "--seed", "52", "--ready-limit", str(2 * REPLY_S)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "all isready answered" in proc.stdout


@pytest.mark.parametrize("option", ["BatchSize value 4096", "Threads value 256", "MateGuardNodes value 10000000",
                                    "EvalStreams value 64"])
def test_an_option_at_the_end_of_its_range_keeps_the_byoyomi(usi, option):
    """In-range options overran a 1 s byoyomi (BatchSize 4096: 7 s a move, Threads 256: 4-6 s, MateGuardNodes
    10^7: 26 s). A step's batch is cut to the search's speed, the threads to the cores, the guard to the clock.
    With this test's small network only BatchSize overran before (2.1 s); the guard's overrun needs a position
    slow for df-pn (test_faults_engine's mate guard test) and the threads' a real network (test_layout)."""
    usi.send(f"setoption name {option}", "isready")
    usi.wait(is_line("readyok"), timeout=60)
    played: list[str] = []
    for _ in range(3):
        usi.send("position startpos" + (" moves " + " ".join(played) if played else ""),
                 "go btime 0 wtime 0 byoyomi 1000")
        line, took = usi.wait(is_line("bestmove"), timeout=60)
        assert took < 1.0 + 0.5, (option, took)  # the byoyomi, with slack for a loaded machine
        played.append(line.split()[1])


def test_a_step_is_cut_to_what_the_search_evaluates_in_a_tenth_of_a_second():
    """The grain at which a search sees `stop` and its clock: BatchSize 4096 made one step take 7 s."""
    from dlzero.config import Config
    from dlzero.engine.player import FIRST_STEP_LEAVES, MIN_STEP_LEAVES, STEP_MS, Player
    from dlzero.inference import NullEvaluator

    cfg = Config()
    cfg.search.leaves_per_tree = 4096
    player = Player(NullEvaluator(), cfg)
    streams = player.search.cfg.eval_streams
    assert player._step_leaves(700.0) == FIRST_STEP_LEAVES  # no search timed yet
    player._rate = 20.0  # playouts per ms
    assert player._step_leaves(None) == int(20.0 * STEP_MS / streams)
    assert player._step_leaves(80.0) == max(int(20.0 * 10.0 / streams), MIN_STEP_LEAVES)  # an eighth of the limit
    player._rate = 0.01
    assert player._step_leaves(700.0) == MIN_STEP_LEAVES
    cfg.search.leaves_per_tree = 16
    fast = Player(NullEvaluator(), cfg)
    fast._rate = 1000.0
    assert fast._step_leaves(700.0) == 16  # never more than BatchSize
