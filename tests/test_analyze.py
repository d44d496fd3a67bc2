"""The JSON-lines analysis engine: batched queries, per-query errors and overrides."""

from __future__ import annotations

import io
import json

import cshogi

from dlzero.analysis import AnalysisEngine, serve
from dlzero.config import Config
from dlzero.inference import NullEvaluator


def _queries(*items) -> str:
    return "".join((q if isinstance(q, str) else json.dumps(q)) + "\n" for q in items)


def test_batch_answers_in_order_with_errors():
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
    assert [a["id"] for a in answers] == ["a", "b", None, "c", "d", "e", "f"]
    by_id = {a["id"]: a for a in answers}
    assert {"b", "d", "f"} <= {k for k, a in by_id.items() if "error" in a} and "error" in answers[2]
    assert by_id["a"]["playouts"] == 50 and len(by_id["a"]["moves"]) == 3
    assert by_id["c"]["playouts"] == 80
    board = cshogi.Board()
    board.push_usi("7g7f")
    assert board.is_legal(board.move_from_usi(by_id["c"]["bestmove"]))
    assert by_id["e"]["bestmove"] == "G*5b" and by_id["e"]["mate"] == 1
    assert set(by_id["a"]) >= {"bestmove", "pv", "winrate", "score_cp", "mate", "moves", "nodes", "time_ms"}


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
