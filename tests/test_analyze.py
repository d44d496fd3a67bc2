"""The JSON-lines analysis engine: in-process (batching, errors) and as a real `dlzero analyze` subprocess
driven with every query field and action, including out-of-order priority answers and terminate."""

from __future__ import annotations

import io
import json
import queue
import subprocess
import sys
import threading
import time

import cshogi
import pytest

import dlzero
from dlzero.analysis import AnalysisEngine, serve
from dlzero.config import Config
from dlzero.inference import NullEvaluator


def _queries(*items) -> str:
    return "".join((q if isinstance(q, str) else json.dumps(q)) + "\n" for q in items)


def test_batch_answers_with_errors():
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=50)
    text = _queries(
        {"id": "a", "position": "startpos", "multipv": 3},
        {"id": "b", "position": "startpos moves 7g7f 7g7f"},
        "{not json",
        {"id": "c", "position": "startpos moves 7g7f", "playouts": 80, "overrides": {"search.c_init": 2.0}},
        {"id": "d", "position": "startpos", "overrides": {"search.c_init": -1}},
        {"id": "e", "position": "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1"},
        {"id": "f", "position": "startpos", "overrides": {"train.lr": 1}},
    )
    out = io.StringIO()
    serve(engine, io.StringIO(text), out, max_batch=16)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(map(str, (a["id"] for a in answers))) == sorted(map(str, ["a", "b", None, "c", "d", "e", "f"]))
    by_id = {a["id"]: a for a in answers}
    assert {k for k, a in by_id.items() if "error" in a} == {"b", "d", "f", None}
    assert by_id["b"]["field"] == "position" and by_id["d"]["field"] == by_id["f"]["field"] == "overrides"
    assert by_id["a"]["playouts"] == 50 and len(by_id["a"]["moves"]) == 3
    assert by_id["c"]["playouts"] == 80
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(by_id["c"]["bestmove"]))
    assert by_id["e"]["bestmove"] == "G*5b" and by_id["e"]["mate"] == 1
    assert by_id["e"]["moveInfos"][0]["move"] == "G*5b"
    assert set(by_id["a"]) >= {"bestmove", "pv", "winrate", "score_cp", "mate", "moves", "nodes", "time_ms",
                               "moveInfos", "rootInfo", "turnNumber", "isDuringSearch"}


def test_a_query_without_playouts_takes_search_playouts():
    cfg = Config()
    cfg.search.playouts = 30
    [answer] = AnalysisEngine(NullEvaluator(), cfg).answer([json.dumps({"id": "a", "position": "startpos"})])
    assert answer["playouts"] == 30


def test_one_network_call_per_step_across_queries():
    class Counting(NullEvaluator):
        calls = 0

        def _run(self, planes):
            Counting.calls += 1
            return super()._run(planes)

    engine = AnalysisEngine(Counting(), Config(), playouts=32)
    lines = [json.dumps({"id": i, "position": "startpos"}) for i in range(8)]
    answers = engine.answer(lines)
    assert [a["playouts"] for a in answers] == [32] * 8
    assert Counting.calls <= 8 * 32 // 8  # batched across queries, not one call per leaf per query


def test_analyze_turns_share_batches_and_avoid_moves_hold_below_the_root():
    class Counting(NullEvaluator):
        calls = 0

        def _run(self, planes):
            Counting.calls += 1
            return super()._run(planes)

    engine = AnalysisEngine(Counting(), Config(), playouts=32)
    query = {"id": "g", "position": "startpos", "moves": ["7g7f", "3c3d", "2g2f"], "analyzeTurns": [0, 1, 2, 3],
             "avoidMoves": [{"player": "w", "moves": ["8c8d", "3c3d", "4a3b"], "untilDepth": 2}]}
    answers = engine.answer([json.dumps(query)])
    assert [a["turnNumber"] for a in answers] == [0, 1, 2, 3]
    assert Counting.calls <= 4 * 32 // 4
    for a in answers:
        assert sum(m["visits"] for m in a["moveInfos"]) == 32 - 1  # the first playout expands the root
        for info in a["moveInfos"]:  # white's moves at depth 0 (turns 1, 3) or 1 (turns 0, 2) are filtered
            white_ply = 0 if a["rootInfo"]["currentPlayer"] == "w" else 1
            if len(info["pv"]) > white_ply:
                assert info["pv"][white_ply] not in {"8c8d", "3c3d", "4a3b"}


def test_allow_moves_with_no_legal_move_at_the_root_is_an_error_not_a_search_of_every_move():
    """Issue 41: an `allowMoves` of only illegal moves was ignored and every move searched."""
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=16)

    def allow(player: str, moves: list[str], turns: list[int] | None = None) -> list[dict]:
        query = {"id": "q", "position": "startpos", "moves": ["7g7f", "3c3d"], "analyzeTurns": turns or [1],
                 "allowMoves": [{"player": player, "moves": moves, "untilDepth": 1}]}
        return engine.answer([json.dumps(query)])

    (refused,) = allow("w", ["7g7f", "5i5h"])  # white to move: black's moves are not legal
    assert refused["field"] == "allowMoves" and "none is legal at turn 1" in refused["error"], refused
    (refused,) = allow("b", ["7g7f"], turns=[0, 1, 2])  # legal at turn 0 only: turn 2 is named
    assert refused["field"] == "allowMoves" and "none is legal at turn 2" in refused["error"], refused
    (kept,) = allow("w", ["3c3d", "5i5h"])  # one legal move is enough: only it is searched
    assert [m["move"] for m in kept["moveInfos"]] == ["3c3d"]
    (other_side,) = allow("b", ["5i5h"])  # black's rule does not apply at white's root
    assert len(other_side["moveInfos"]) > 1


def test_partial_answers_keep_their_interval_across_slices(monkeypatch):
    """Issue 41: each slice of a sliced search started the `reportDuringSearchEvery` clock again, so a
    search cut into slices shorter than the interval never reported. On a clock that each network call
    moves by a quarter second, a search cut after every call reports when the unsliced one does."""
    import types

    import dlzero.analysis as analysis

    clock = [0.0]
    monkeypatch.setattr(analysis, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    class Ticking(NullEvaluator):
        def _run(self, planes):
            clock[0] += 0.25
            return super()._run(planes)

    def report_times(sliced: bool) -> list[float]:
        clock[0] = 0.0
        engine = AnalysisEngine(Ticking(), Config(), playouts=200)
        (task,) = engine.reader.read(json.dumps({"position": "startpos", "maxVisits": 200,
                                                 "reportDuringSearchEvery": 1.0,
                                                 "overrides": {"search.leaves_per_tree": 4}})).tasks
        times: list[float] = []
        cut = (lambda: task.tree is not None and task.tree.playouts_done > 0) if sliced else None
        pending = [task]
        while pending:
            pending = engine.search(pending, lambda result: result.during and times.append(clock[0]), cut)
        return times

    whole = report_times(sliced=False)
    assert len(whole) >= 10 and whole == [1.0 + k for k in range(len(whole))]
    assert report_times(sliced=True) == whole


def test_a_failed_batch_answers_its_turns_and_the_engine_goes_on():
    class FailsOnce(NullEvaluator):
        failed = False

        def _run(self, planes):
            if not FailsOnce.failed:
                FailsOnce.failed = True
                raise RuntimeError("device lost")
            return super()._run(planes)

    engine = AnalysisEngine(FailsOnce(), Config(), playouts=8)
    out = io.StringIO()
    serve(engine, io.StringIO(_queries({"id": "x", "position": "startpos", "analyzeTurns": [0]},
                                       {"id": "y", "position": "startpos"})), out, max_batch=1)
    answers = {a["id"]: a for a in map(json.loads, out.getvalue().splitlines())}
    assert "device lost" in answers["x"]["error"] and answers["x"]["turnNumber"] == 0
    assert answers["y"]["playouts"] == 8


def test_clear_cache_empties_the_evaluation_cache_and_priorities_go_per_turn():
    engine = AnalysisEngine(NullEvaluator(), Config(), playouts=16)
    query = {"id": "c", "position": "startpos", "moves": ["7g7f"], "analyzeTurns": [0, 1], "priorities": [1, 9],
             "overrideSettings": {"search.nn_cache_size": 1000}}
    answers = engine.answer([json.dumps(query)])
    assert [a["turnNumber"] for a in answers] == [0, 1]
    (search,) = engine._searches.values()
    assert len(search.cache) > 0
    assert engine.answer([json.dumps({"id": "x", "action": "clear_cache"})]) == [{"id": "x", "action": "clear_cache"}]
    assert len(search.cache) == 0
    out = io.StringIO()  # with one turn per batch, the turn of priority 9 is searched (and answered) first
    serve(engine, io.StringIO(_queries(query)), out, max_batch=1)
    assert [json.loads(line)["turnNumber"] for line in out.getvalue().splitlines()] == [1, 0]
    bad = engine.answer([json.dumps({**query, "priorities": [1]})])
    assert bad[0]["field"] == "priorities"


def test_typed_tasks_answer_as_the_json_query_does():
    """review and the dashboard build tasks from Python values and get typed results; written out, those
    are the protocol's answers to the same query (timings aside)."""
    from dlzero.analysis_query import QueryError

    def untimed(answer: dict) -> dict:
        return {k: v for k, v in answer.items() if k not in ("time_ms", "nps")}

    mate = "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1"
    for position, moves, turns in (("startpos", ["7g7f", "3c3d"], [0, 2]), (mate, [], [0])):
        query = {"id": 7, "position": position, "moves": moves, "analyzeTurns": turns, "maxVisits": 24, "multipv": 2}
        by_json = AnalysisEngine(NullEvaluator(), Config(), playouts=50).answer([json.dumps(query)])
        engine = AnalysisEngine(NullEvaluator(), Config(), playouts=50)
        results = engine.analyse(engine.reader.game_tasks(position, moves, turns, 24, multipv=2, task_id=7))
        assert [r.task.turn for r in results] == turns and all(r.analysis is not None for r in results)
        assert [untimed(r.to_answer()) for r in results] == [untimed(a) for a in by_json]
    assert results[0].analysis.mate == 1 and results[0].move_infos[0].move == "G*5b"
    with pytest.raises(QueryError) as err:
        engine.reader.game_tasks("startpos", ["7g7f", "7g7f"], [2], 24)
    assert err.value.field == "moves"


# ---------------------------------------------------------------- the real command


class AnalyzeProcess:
    """`dlzero analyze` on pipes; answers are collected by a thread so reads can time out."""

    def __init__(self, model: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dlzero.cli", "analyze", "--model", model, "--threads", "1", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.answers: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))

    def send(self, *queries) -> None:
        self.proc.stdin.write(_queries(*queries))
        self.proc.stdin.flush()

    def wait_for(self, pred, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            answer = self.answers.get(timeout=max(0.01, deadline - time.monotonic()))
            self.seen.append(answer)
            if pred(answer):
                return answer

    def close(self, timeout: float = 120.0) -> list[dict]:
        """Close stdin (the engine drains its queue), wait for exit, return every answer seen."""
        self.proc.stdin.close()
        assert self.proc.wait(timeout) == 0, self.proc.stderr.read()
        time.sleep(0.1)
        while not self.answers.empty():
            self.seen.append(self.answers.get())
        return self.seen


def _finals(answers: list[dict], qid) -> list[dict]:
    return [a for a in answers if a.get("id") == qid and a.get("isDuringSearch") is False]


def test_subprocess_fields(model):
    eng = AnalyzeProcess(model, "--playouts", "16")
    eng.send(
        {"id": "turns", "position": "startpos", "moves": ["7g7f", ["w", "3c3d"]], "analyzeTurns": [0, 1, 2],
         "maxVisits": 24, "includePolicy": True, "includePVVisits": True},
        {"id": "alias", "position": "startpos", "playouts": 8, "overrideSettings": {"search.c_init": 2.0}},
        {"id": "both", "position": "startpos", "playouts": 8, "maxVisits": 8},
        {"id": "avoid", "position": "startpos", "maxVisits": 24,
         "avoidMoves": [{"player": "b", "moves": ["7g7f", "2g2f"], "untilDepth": 1}]},
        {"id": "allow", "position": "startpos", "maxVisits": 24,
         "allowMoves": [{"player": "B", "moves": ["7g7f", "2g2f"], "untilDepth": 1}]},
        {"id": "badrule", "position": "startpos", "avoidMoves": [{"player": "b", "moves": ["zz"], "untilDepth": 1}]},
        {"id": "badmove", "position": "startpos", "moves": ["7g7f", "7g7f"]},
        {"id": "badturn", "position": "startpos", "moves": ["7g7f"], "analyzeTurns": [2]},
        {"id": "badover", "position": "startpos", "overrideSettings": {"search.nope": 1}},
        {"id": "komi", "position": "startpos", "komi": 6.5, "maxVisits": 4},
        {"id": "live", "position": "startpos", "maxVisits": 400, "reportDuringSearchEvery": 0.001,
         "overrides": {"search.leaves_per_tree": 2}},
        {"id": "v", "action": "query_version"},
        {"id": "cc", "action": "clear_cache"},
        {"id": "bad", "action": "explode"},
    )
    answers = eng.close()
    turns = _finals(answers, "turns")
    assert sorted(a["turnNumber"] for a in turns) == [0, 1, 2]
    board = cshogi.Board()
    for a in sorted(turns, key=lambda a: a["turnNumber"]):
        assert a["rootInfo"]["currentPlayer"] == ("b" if board.turn == cshogi.BLACK else "w")
        assert a["rootInfo"]["visits"] == 24 and sum(m["visits"] for m in a["moveInfos"]) == 23
        assert set(a["policy"]) == {cshogi.move_to_usi(m) for m in board.legal_moves}
        assert abs(sum(a["policy"].values()) - 1.0) < 1e-3
        for order, info in enumerate(a["moveInfos"]):
            assert info["order"] == order and info["pv"][0] == info["move"]
            assert info["pvVisits"][0] == info["visits"] and len(info["pvVisits"]) == len(info["pv"])
            assert info["pvVisits"] == sorted(info["pvVisits"], reverse=True)
            assert 0.0 <= info["lcb"] <= info["winrate"] and info["scoreCp"] * (info["winrate"] - 0.5) >= 0
        if a["turnNumber"] < 2:
            board.push_usi(["7g7f", "3c3d"][a["turnNumber"]])
    assert turns[0]["position"].startswith("startpos")
    alias = _finals(answers, "alias")[0]
    assert alias["rootInfo"]["visits"] == 8 and alias["playouts"] == 8
    errors = {a["id"]: a for a in answers if "error" in a}
    assert errors["both"]["field"] == "maxVisits" and errors["badrule"]["field"] == "avoidMoves"
    assert errors["badmove"]["field"] == "moves" and "moves[1]" in errors["badmove"]["error"]
    assert errors["badturn"]["field"] == "analyzeTurns" and errors["badover"]["field"] == "overrideSettings"
    assert errors["bad"]["field"] == "action"
    assert not _finals(answers, "both") and not _finals(answers, "badmove")
    assert {m["move"] for m in _finals(answers, "avoid")[0]["moveInfos"]}.isdisjoint({"7g7f", "2g2f"})
    allowed = _finals(answers, "allow")[0]
    assert {m["move"] for m in allowed["moveInfos"]} <= {"7g7f", "2g2f"} and allowed["bestmove"] in {"7g7f", "2g2f"}
    warning = next(a for a in answers if "warning" in a)
    assert warning["id"] == "komi" and warning["field"] == "komi" and len(_finals(answers, "komi")) == 1
    live = [a for a in answers if a.get("id") == "live"]
    assert len(_finals(answers, "live")) == 1 and live[-1]["isDuringSearch"] is False
    partial = [a for a in live if a["isDuringSearch"]]
    assert partial and all(a["rootInfo"]["visits"] <= 400 for a in partial)
    assert live[-1]["rootInfo"]["visits"] == 400
    version = next(a for a in answers if a.get("id") == "v")
    assert version["version"] == dlzero.__version__ and version["git_hash"] and version["action"] == "query_version"
    assert next(a for a in answers if a.get("id") == "cc") == {"id": "cc", "action": "clear_cache"}


def test_subprocess_priority_and_terminate(model):
    eng = AnalyzeProcess(model, "--max-batch", "1")
    huge = {"position": "startpos", "maxVisits": 10_000_000, "reportDuringSearchEvery": 0.05,
            "overrides": {"search.leaves_per_tree": 4}}
    # `block` keeps the engine busy while the others queue: `high` was sent after `low` but answers first.
    eng.send({"id": "block", **huge}, {"id": "low", "position": "startpos", "maxVisits": 8},
             {"id": "high", "position": "startpos", "maxVisits": 8, "priority": 5},
             {"id": "rest", "position": "startpos", "moves": ["7g7f"], "analyzeTurns": [0, 1], "maxVisits": 8,
              "priority": -3})
    eng.wait_for(lambda a: a.get("id") == "block" and a["isDuringSearch"])
    eng.send({"id": "t1", "action": "terminate", "terminateId": "rest", "turnNumbers": [1]})
    eng.wait_for(lambda a: a.get("id") == "rest" and a.get("noResults"))
    eng.send({"id": "t2", "action": "terminate", "terminateId": "block"})
    stopped = eng.wait_for(lambda a: a.get("id") == "block" and not a["isDuringSearch"])
    assert 0 < stopped["rootInfo"]["visits"] < 10_000_000
    eng.wait_for(lambda a: a.get("id") == "rest" and a.get("turnNumber") == 0)
    # `queued` ranks below `block2`, so it waits in the queue (a task of the same priority would get a slice)
    eng.send({"id": "block2", **huge}, {"id": "queued", "position": "startpos", "maxVisits": 8, "priority": -1})
    eng.wait_for(lambda a: a.get("id") == "block2" and a["isDuringSearch"])
    eng.send({"id": "all", "action": "terminate_all"})
    answers = eng.close()
    order = [a["id"] for a in answers if a.get("isDuringSearch") is False]
    assert order.index("high") < order.index("low") < order.index("block2")
    assert {"id": "t1", "action": "terminate", "terminateId": "rest", "turnNumbers": [1]} in answers
    assert {"id": "all", "action": "terminate_all"} in answers
    for qid in ("block", "low", "high", "block2", "queued"):
        assert len(_finals(answers, qid)) == 1, qid
    assert [a["turnNumber"] for a in _finals(answers, "rest")] == [1, 0]
    assert _finals(answers, "queued")[0] == {"id": "queued", "turnNumber": 0, "isDuringSearch": False,
                                             "noResults": True}
    assert 0 < _finals(answers, "block2")[0]["rootInfo"]["visits"] < 10_000_000
