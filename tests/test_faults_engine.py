"""Engines that always answer (issue 41): the real `dlzero usi` and `dlzero analyze` on pipes, driven as a GUI
or a client would, with the settings and numbers that used to freeze or kill them.

- A deep mate search held the GIL for minutes (cshogi's `mate_move` at 21 plies on a bare king against rook
  and bishop in hand: over 60 s): `stop`, `isready`, `quit` and the analysis engine's `query_version` and
  `terminate_all` waited for it. Deep mates now run in a helper process that is killed when the engine must
  answer (`dlzero.search.mate`); each of those commands must be answered within ANSWER_S. The mate guard
  (`MateGuardNodes` up to 10^7) did the same after the search, and now runs in that helper too.
- `go` with numbers past a C int, or with a non-ASCII digit, never answered; now every `go` is answered once.
- `dlzero analyze | head` died with tracebacks and SIGABRT; now it exits quietly with SIGPIPE's status.
- A query of 10^21 visits blocked every later query, whatever its priority; now it is cut to 10^9 with a
  warning and searched in slices that let later (and higher-priority) queries through.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import cshogi
import pytest
from piped import MANY_CHECKS, Piped, is_line

from dlzero.config import Config, config_from_dict, config_to_dict
from dlzero.engine.player import MAX_PLAYOUTS
from dlzero.errors import ConfigError

ANSWER_S = 1.0  # the promise: no command waits longer than this for a mate search, whatever the options
BARE_KING = "sfen 4k4/9/9/9/9/9/9/9/4K4 b RB 1"  # rook and bishop in hand: mate_move(21) took over 60 s
# White's bare king to move, Black holding rook, bishop and silver: after any king move df-pn neither proves
# nor disproves a mate in 10^6 nodes (about 4 s), so a mate guard of 10^7 nodes runs for a minute
GUARD_SLOW = "sfen 9/9/9/9/4k4/9/9/9/4K4 w RBS 1"
# White mates in 15 plies (df-pn at 15 plies proves it in about 4k nodes); mate_move sees nothing in 7
MATE_IN_15 = "sfen 1s5np/2r1g3l/+N2pP1pkb/l1p2p1pP/p1Pn1sg2/P3pP1P1/1P1KG1P1N/LR4+bGL/4S4 w Psp 112"


# ---------------------------------------------------------------- USI: deep mate searches


def test_a_deep_root_mate_search_keeps_the_clock_and_isready(usi):
    """RootMateDepth 31 at byoyomi 1 s: the move came after 21.9 s, `isready` blocked all along."""
    usi.send("setoption name RootMateDepth value 31", f"position {BARE_KING}", "go btime 0 wtime 0 byoyomi 1000")
    time.sleep(0.1)
    usi.send("isready")
    assert usi.wait(is_line("readyok"))[1] < ANSWER_S
    usi.wait(is_line("bestmove"), timeout=30)
    # timed from `go`: the byoyomi less ByoyomiMargin, set to 300 ms to leave a loaded test machine room
    usi.send("setoption name ByoyomiMargin value 300", "go btime 0 wtime 0 byoyomi 1000")
    line, took = usi.wait(is_line("bestmove"), timeout=30)
    assert took < 1.0 and line != "bestmove resign"


def test_a_deep_root_mate_is_found_by_df_pn_and_reported_as_mate(usi):
    usi.send("setoption name RootMateDepth value 15", "isready", f"position {MATE_IN_15}", "go mate nodes 1000")
    usi.wait(is_line("checkmate"), timeout=30)  # the helper process is up (`isready` started it)
    usi.send("go nodes 30")
    line, took = usi.wait(is_line("bestmove"), timeout=30)
    board = cshogi.Board(MATE_IN_15.split(" ", 1)[1])
    board.push_usi(line.split()[1])
    assert cshogi.DfPn(15, 100_000).search_andnode(board)  # every reply is mated
    assert any(" score mate 15 " in seen for seen in usi.seen)
    assert took < 1.0 + ANSWER_S  # the helper process's start and the df-pn within the 1 s of a search without a clock


def test_go_mate_infinite_answers_isready_stop_and_quit_at_once(usi):
    """`go mate infinite` ignored `stop`: `readyok` after 38 s, `quit` after 43 s."""
    usi.send(f"position {MANY_CHECKS}", "go mate infinite")
    time.sleep(0.5)
    usi.send("isready")
    assert usi.wait(is_line("readyok"))[1] < ANSWER_S
    usi.send("stop")
    line, took = usi.wait(is_line("checkmate"))
    assert took < ANSWER_S and line == "checkmate timeout"
    usi.send("go mate 1500")  # a time limit ends it alike
    line, took = usi.wait(is_line("checkmate"), timeout=30)
    assert line == "checkmate timeout" and took < 1.5 + ANSWER_S
    usi.send("go mate infinite")
    time.sleep(0.5)
    start = time.monotonic()
    usi.send("quit")
    usi.proc.wait(timeout=30)
    assert time.monotonic() - start < ANSWER_S


def test_go_mate_still_solves_and_a_new_position_stops_an_infinite_one(usi):
    usi.send("position sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1", "go mate infinite")
    assert usi.wait(is_line("checkmate"))[0] == "checkmate G*5b"
    usi.send(f"position {MANY_CHECKS}", "go mate infinite")
    time.sleep(0.3)
    usi.send("position startpos")  # `go mate infinite` never ends by itself: a new position stops it
    assert usi.wait(is_line("checkmate"))[1] < ANSWER_S


def test_the_mate_guard_keeps_isready_stop_and_quit_at_once(usi):
    """MateGuardNodes 10^7 on a position slow for df-pn: the guard ran df-pn in the engine after the search and
    held the GIL for a minute, so `isready`, `stop` and `quit` waited for it. In the helper process the engine
    answers, `stop` ends the guard and the move the search chose is played. Under a clock the guard ends at
    the move's hard limit (issue 52: a move at byoyomi 1000 took 26 s); without one it runs until `stop`."""
    usi.send("setoption name MateGuardNodes value 10000000", "isready")
    usi.wait(is_line("readyok"))  # `isready` started the helper process
    usi.send(f"position {GUARD_SLOW}", "go btime 0 wtime 0 byoyomi 1000")
    line, took = usi.wait(is_line("bestmove"), timeout=30)
    assert took < 1.0 + 0.5  # the byoyomi, with slack for a loaded machine
    board = cshogi.Board(GUARD_SLOW.split(" ", 1)[1])
    assert line.split()[1] in {cshogi.move_to_usi(m) for m in board.legal_moves}
    usi.send("go nodes 30")
    time.sleep(2.0)  # the search's 30 playouts, then the guard
    usi.send("isready")
    assert usi.wait(is_line("readyok"))[1] < ANSWER_S
    time.sleep(0.2)
    assert not any(is_line("bestmove")(line) for line in usi.arrived())  # the guard still runs
    usi.send("stop")
    line, took = usi.wait(is_line("bestmove"))
    assert took < ANSWER_S
    assert line.split()[1] in {cshogi.move_to_usi(m) for m in board.legal_moves}
    usi.send("go nodes 30")
    time.sleep(2.0)
    start = time.monotonic()
    usi.send("quit")
    usi.proc.wait(timeout=30)
    assert time.monotonic() - start < ANSWER_S


# ---------------------------------------------------------------- USI: every `go` answered once


def test_every_go_is_answered_once_whatever_its_numbers(usi):
    """`go mate 9000000` and `go nodes 99999999999999999999` raised OverflowError in the search thread,
    `go nodes ²` ValueError before it: none of them was ever answered."""
    usi.send(f"position {MANY_CHECKS}", "go mate 9000000")
    time.sleep(0.3)
    usi.send("stop")
    assert usi.wait(is_line("checkmate"))[0] == "checkmate timeout"
    usi.send("go mate nodes 99999999999999999999")
    time.sleep(0.3)
    usi.send("stop")
    usi.wait(is_line("checkmate"))
    assert f"info string go mate nodes 99999999999999999999 is more than df-pn takes; searching {2**31 - 1}" \
        in usi.seen
    usi.send("go nodes 99999999999999999999")
    time.sleep(0.3)
    usi.send("stop")
    usi.wait(is_line("bestmove"))
    usi.send("go nodes \u00b2")
    usi.wait(is_line("bestmove"))
    usi.send("go btime 99999999999999999999 wtime 99999999999999999999 byoyomi 99999999999999999999")
    time.sleep(0.3)
    usi.send("stop")
    usi.wait(is_line("bestmove"))
    usi.send("isready")
    usi.wait(is_line("readyok"))
    answers = [line for line in usi.seen if is_line("bestmove")(line) or is_line("checkmate")(line)]
    assert len(answers) == 5 and "bestmove resign" not in answers
    assert f"info string go nodes 99999999999999999999 is more than a search takes; searching {MAX_PLAYOUTS}" \
        in usi.seen
    assert "info string error: go nodes needs an integer, got '\u00b2'" in usi.seen
    assert usi.proc.poll() is None and not any(line.startswith("info string error: go:") for line in usi.seen)


def test_mate_depths_are_offered_only_as_deep_as_the_engine_can_honour(usi):
    usi.send("usi")
    usi.wait(is_line("usiok"))
    assert "option name RootMateDepth type spin default 7 min 0 max 31" in usi.seen
    assert "option name LeafMateDepth type spin default 3 min 0 max 7" in usi.seen
    usi.send("setoption name LeafMateDepth value 9", "setoption name RootMateDepth value 33")
    line, _ = usi.wait(lambda text: "LeafMateDepth keeps its value" in text)
    assert "LeafMateDepth must be between 0 and 7, got 9" in line
    usi.wait(lambda text: "RootMateDepth keeps its value" in text)
    data = config_to_dict(Config())
    for key, value in (("leaf_mate_depth", 9), ("root_mate_depth", 33)):
        with pytest.raises(ConfigError, match=f"search.{key}"):
            config_from_dict({**data, "search": {**data["search"], key: value}})


# ---------------------------------------------------------------- analysis


END = json.dumps({"id": "end", "action": "terminate_all"})


def _json(line: str) -> dict:
    return json.loads(line)


def _analyze(model: str, *args: str) -> Piped:
    return Piped("analyze", "--model", model, "--threads", "1", *args)


def _answer(pred):
    return lambda line: pred(_json(line))


def test_a_deep_mate_override_keeps_query_version_and_terminate_all_at_once(model):
    """One query with `search.root_mate_depth` 21 froze `query_version` and `terminate_all` for 97.7 s."""
    eng = _analyze(model)
    try:
        eng.send(json.dumps({"id": "up", "action": "query_version"}))
        eng.wait(_answer(lambda a: a.get("id") == "up"))  # the engine is up (the model loaded, git asked)
        eng.send(json.dumps({"id": "deep", "position": BARE_KING, "maxVisits": 1_000_000,
                             "overrides": {"search.root_mate_depth": 21}}))
        time.sleep(0.3)
        eng.send(json.dumps({"id": "v", "action": "query_version"}))
        assert eng.wait(_answer(lambda a: a.get("id") == "v"))[1] < ANSWER_S
        eng.send(json.dumps({"id": "all", "action": "terminate_all"}))
        assert eng.wait(_answer(lambda a: a.get("id") == "all"))[1] < ANSWER_S
        final, took = eng.wait(_answer(lambda a: a.get("id") == "deep" and a["isDuringSearch"] is False))
        assert took < ANSWER_S
        eng.proc.stdin.close()
        assert eng.proc.wait(timeout=30) == 0
    finally:
        eng.end(END)


def test_a_mate_guard_override_keeps_query_version_and_terminate_all_at_once(model):
    """`search.mate_guard_nodes` 10^7 as an override: the guard after the search held the GIL, as a deep root mate
    did. It runs in the helper process now, and `terminate_all` ends it with the searched answer."""
    eng = _analyze(model)
    try:
        eng.send(json.dumps({"id": "up", "action": "query_version"}))
        eng.wait(_answer(lambda a: a.get("id") == "up"))
        eng.send(json.dumps({"id": "guard", "position": GUARD_SLOW, "maxVisits": 32,
                             "overrides": {"search.mate_guard_nodes": 10_000_000}}))
        time.sleep(2.0)  # 32 visits, then the guard
        eng.send(json.dumps({"id": "v", "action": "query_version"}))
        assert eng.wait(_answer(lambda a: a.get("id") == "v"))[1] < ANSWER_S
        time.sleep(0.2)
        assert not any(_json(line).get("id") == "guard" for line in eng.arrived())  # the guard still runs
        eng.send(json.dumps({"id": "all", "action": "terminate_all"}))
        final, took = eng.wait(_answer(lambda a: a.get("id") == "guard" and a["isDuringSearch"] is False))
        assert took < ANSWER_S and _json(final)["rootInfo"]["visits"] == 32
        eng.proc.stdin.close()
        assert eng.proc.wait(timeout=30) == 0
    finally:
        eng.end(END)


def test_a_huge_query_is_cut_and_later_queries_get_through(model):
    """`maxVisits` 10^21 blocked every later query, and a higher `priority` did not get ahead of it."""
    eng = _analyze(model, "--max-batch", "1")
    try:
        eng.send(json.dumps({"id": "huge", "position": "startpos", "maxVisits": 10**21,
                             "reportDuringSearchEvery": 0.05}))
        warning, _ = eng.wait(_answer(lambda a: a.get("id") == "huge" and "warning" in a))
        assert _json(warning)["field"] == "maxVisits"
        eng.wait(_answer(lambda a: a.get("id") == "huge" and a["isDuringSearch"]))
        eng.send(json.dumps({"id": "urgent", "position": "startpos", "maxVisits": 8, "priority": 5}))
        _, took = eng.wait(_answer(lambda a: a.get("id") == "urgent" and a["isDuringSearch"] is False))
        assert took < 10.0
        eng.send(json.dumps({"id": "same", "position": "startpos moves 7g7f", "maxVisits": 8}))
        _, took = eng.wait(_answer(lambda a: a.get("id") == "same" and a["isDuringSearch"] is False))
        assert took < 10.0  # a slice of the huge one (1 s), then its turn
        eng.send(json.dumps({"id": "t", "action": "terminate", "terminateId": "huge"}))
        final, _ = eng.wait(_answer(lambda a: a.get("id") == "huge" and a["isDuringSearch"] is False))
        assert 0 < _json(final)["rootInfo"]["visits"] < MAX_PLAYOUTS
        eng.proc.stdin.close()
        assert eng.proc.wait(timeout=30) == 0
        finals = [_json(line)["id"] for line in eng.seen if _json(line).get("isDuringSearch") is False]
        assert finals == ["urgent", "same", "huge"]
    finally:
        eng.end(END)


def test_a_huge_query_shares_the_batch_with_queries_that_come_later(model):
    eng = _analyze(model)
    try:
        eng.send(json.dumps({"id": "huge", "position": "startpos", "maxVisits": MAX_PLAYOUTS,
                             "reportDuringSearchEvery": 0.05}))
        eng.wait(_answer(lambda a: a.get("id") == "huge" and a["isDuringSearch"]))
        eng.send(json.dumps({"id": "later", "position": "startpos", "maxVisits": 16, "includePolicy": True}))
        final, took = eng.wait(_answer(lambda a: a.get("id") == "later" and a["isDuringSearch"] is False))
        assert took < 10.0 and _json(final)["rootInfo"]["visits"] == 16 and _json(final)["policy"]
        eng.send(json.dumps({"id": "all", "action": "terminate_all"}))
        final, _ = eng.wait(_answer(lambda a: a.get("id") == "huge" and a["isDuringSearch"] is False))
        partials = [_json(line)["rootInfo"]["visits"] for line in eng.seen
                    if _json(line).get("id") == "huge" and _json(line).get("isDuringSearch")]
        assert partials == sorted(partials) and _json(final)["rootInfo"]["visits"] >= partials[-1]  # counts go on
    finally:
        eng.end(END)


def test_analyze_into_a_reader_that_leaves_exits_quietly(model):
    """`dlzero analyze | head -c 100`: BrokenPipe tracebacks, "Fatal Python error ... daemon threads", exit 134.
    Its input stays open here, so the thread reading it is blocked in it when the output breaks."""
    eng = subprocess.Popen([sys.executable, "-m", "dlzero.cli", "analyze", "--model", model, "--threads", "1"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        query = b'{"id": "q", "position": "startpos", "maxVisits": 8}\n'
        eng.stdin.write(query * 4)
        eng.stdin.flush()
        assert len(eng.stdout.read(100)) == 100
        eng.stdout.close()  # `head -c 100` has what it wanted
        eng.stdin.write(query)  # the next answer meets the closed pipe
        eng.stdin.flush()
        assert eng.wait(timeout=60) == 141  # as a pipeline's tool ended by SIGPIPE
        errors = eng.stderr.read().decode()
        assert "Traceback" not in errors and "Fatal" not in errors, errors
    finally:
        if eng.poll() is None:
            eng.end(END)
            eng.wait()


def test_an_analysis_engine_ends_its_mate_helper_when_closed(model):
    """The dashboard builds an AnalysisEngine per request: with root_mate_depth over 7 (tiny's 9) each one starts
    a mate helper process, which close() must end, or every request leaves a process behind."""
    from dlzero.analysis import AnalysisEngine
    from dlzero.config import load_config
    from dlzero.inference import load_model

    cfg = load_config(None, ["search.root_mate_depth=9"])
    evaluator = load_model(model, cfg.inference)
    try:
        engine = AnalysisEngine(evaluator, cfg, 8)
        helper = engine._mate._proc
        assert helper is not None and helper.poll() is None
        engine.close()
        assert helper.poll() is not None and engine._mate._proc is None
    finally:
        evaluator.close()

