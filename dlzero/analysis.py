"""JSON-lines analysis engine (like KataGo's): many positions searched through one network batch.

Input: one JSON object per line.

    {"id": "q1", "position": "startpos moves 7g7f", "playouts": 400, "multipv": 3,
     "overrides": {"search.c_init": 1.5}}

- `id` (any JSON value, optional): echoed in the answer so answers can be matched to queries.
- `position` (string, required): `startpos [moves ...]`, `sfen S [moves ...]` or a bare SFEN.
- `playouts` (int >= 1, optional): playouts for this query (default: the engine's default).
- `multipv` (int >= 1, optional): how many root moves to list in `moves` (default 5).
- `overrides` (object, optional): `search.*` config keys for this query only, validated like `--set`.

Output: one JSON object per query, in the order the queries were read:
`{"id", "position", "bestmove", "ponder", "pv", "winrate", "score_cp", "mate", "nodes", "playouts",
"time_ms", "nps", "moves": [{"move", "visits", "winrate", "prior"}, ...]}`, or `{"id", "error"}` for
a query that is not valid JSON, has a bad position or a bad override; the engine keeps running.
`bestmove` is `win` for a declaration win and `resign` when there is no legal move; win rates are
for the side to move.

Why batching: all queries read together (up to `max_batch` lines already waiting) get one Tree
each, and queries sharing a search config run in lockstep in one `Search.run`, so the network
sees one batch across positions instead of many small ones.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

import cshogi

from dlzero.config import Config, SearchConfig, config_from_dict, config_to_dict
from dlzero.engine.player import Analysis, root_checks
from dlzero.errors import ConfigError, DlzeroError
from dlzero.inference.base import Evaluator
from dlzero.position import parse_position
from dlzero.search import (
    Search,
    Tree,
    mate_distance,
    move_stats,
    principal_variation,
    root_winrate,
    winrate_to_cp,
)

DEFAULT_MULTIPV = 5


@dataclass
class Query:
    """One validated query."""

    id: Any
    position: str
    board: cshogi.Board
    playouts: int
    multipv: int
    search: SearchConfig


def analysis_of(tree: Tree, elapsed: float) -> Analysis:
    """Analysis of a searched tree (no resignation: an analysis reports the best move)."""
    stats = move_stats(tree)
    if not stats:
        return Analysis(bestmove="resign", nodes=tree.nodes)
    pv = [cshogi.move_to_usi(m) for m in principal_variation(tree)] or [stats[0].usi]
    winrate = root_winrate(tree)
    return Analysis(bestmove=pv[0], ponder=pv[1] if len(pv) > 1 else None, pv=pv, winrate=winrate,
                    score_cp=winrate_to_cp(winrate), mate=mate_distance(tree), moves=stats, nodes=tree.nodes,
                    playouts=tree.playouts, time_ms=int(elapsed * 1000),
                    nps=tree.playouts / max(elapsed, 1e-6))


class AnalysisEngine:
    """Answers batches of queries with one Evaluator; Search objects are kept per search config."""

    def __init__(self, evaluator: Evaluator, cfg: Config, playouts: int = 800) -> None:
        self.evaluator = evaluator
        self.cfg = cfg
        self.playouts = playouts
        self._searches: dict[str, Search] = {}

    def parse(self, line: str) -> Query:
        """A Query from one JSON line; DlzeroError (or ValueError) says what is wrong."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("a query must be a JSON object")
        unknown = set(data) - {"id", "position", "playouts", "multipv", "overrides"}
        if unknown:
            raise ValueError(f"unknown query fields: {', '.join(sorted(unknown))}")
        position = data.get("position")
        if not isinstance(position, str):
            raise ValueError("'position' must be a string like 'startpos moves 7g7f' or 'sfen ...'")
        playouts = _positive_int(data, "playouts", self.playouts)
        multipv = _positive_int(data, "multipv", DEFAULT_MULTIPV)
        return Query(data.get("id"), position, parse_position(position), playouts, multipv,
                     self._search_config(data.get("overrides") or {}))

    def answer(self, lines: Iterable[str]) -> list[dict]:
        """Answers for `lines`, in order; valid queries are searched together."""
        lines = list(lines)
        answers: list[dict | None] = [None] * len(lines)
        groups: dict[str, list[tuple[int, Query]]] = {}
        for i, line in enumerate(lines):
            try:
                q = self.parse(line)
            except (DlzeroError, ValueError) as exc:
                answers[i] = {"id": _id_of(line), "error": str(exc)}
                continue
            settled = root_checks(q.board, q.search.root_mate_depth)
            if settled is not None:
                answers[i] = self._answer(q, settled)
            else:
                groups.setdefault(repr(q.search), []).append((i, q))
        for key, members in groups.items():
            search = self._search(key, members[0][1].search)
            trees = [Tree(q.board) for _, q in members]
            start = time.perf_counter()
            search.run(trees, [q.playouts for _, q in members], leaves_per_tree=search.cfg.leaves_per_tree)
            elapsed = time.perf_counter() - start
            for (i, q), tree in zip(members, trees, strict=True):
                answers[i] = self._answer(q, analysis_of(tree, elapsed))
        return [a for a in answers if a is not None]

    # -- helpers --------------------------------------------------------------------------------
    @staticmethod
    def _answer(q: Query, analysis: Analysis) -> dict:
        return {"id": q.id, "position": q.position, **analysis.to_dict(q.multipv)}

    def _search_config(self, overrides: Any) -> SearchConfig:
        if not isinstance(overrides, dict):
            raise ValueError("'overrides' must be an object of 'search.key': value")
        data = config_to_dict(self.cfg)
        for key, value in overrides.items():
            section, _, name = str(key).partition(".")
            if section != "search" or not name:
                raise ConfigError(f"override '{key}': only search.* keys can be set per query")
            data["search"][name] = value
        return config_from_dict(data).search

    def _search(self, key: str, cfg: SearchConfig) -> Search:
        if key not in self._searches:
            self._searches[key] = Search(self.evaluator, cfg)
        return self._searches[key]


def _positive_int(data: dict, key: str, default: int) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"'{key}' must be a positive integer, got {value!r}")
    return value


def _id_of(line: str) -> Any:
    """The id of a query that failed validation, when it can still be read."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return None
    return data.get("id") if isinstance(data, dict) else None


def serve(engine: AnalysisEngine, stream: TextIO, out: TextIO, max_batch: int = 64) -> None:
    """Answer queries from `stream` until it ends, batching the lines that are already waiting.

    A reader thread feeds a queue; the main thread blocks for one line, then takes whatever else
    has arrived (up to `max_batch`), so a client that writes many queries at once gets them
    searched together while a client that writes one at a time is not kept waiting.
    """
    lines: queue.Queue[str | None] = queue.Queue()

    def reader() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=reader, name="analysis-reader", daemon=True).start()
    ended = False
    while not ended:
        batch: list[str] = []
        item = lines.get()
        while item is not None:
            if item.strip():
                batch.append(item)
            if len(batch) >= max_batch:
                break
            try:
                item = lines.get_nowait()
            except queue.Empty:
                break
        ended = item is None
        for answer in engine.answer(batch):
            out.write(json.dumps(answer) + "\n")
        out.flush()
