"""JSON-lines analysis engine (KataGo's analysis protocol, for shogi): many positions, one network batch.

Input: one JSON object per line; the fields are listed in `dlzero.analysis_query`. For example

    {"id": "g1", "position": "startpos", "moves": ["7g7f", "3c3d"], "analyzeTurns": [0, 1, 2],
     "maxVisits": 400, "includePolicy": true, "reportDuringSearchEvery": 0.5, "priority": 1}

Output: for every analysed turn, zero or more partial answers (`isDuringSearch: true`, only with
`reportDuringSearchEvery`) and exactly one final answer (`isDuringSearch: false`):

    {"id", "turnNumber", "isDuringSearch", "position",
     "moveInfos": [{"move", "visits", "winrate", "scoreCp", "prior", "lcb", "order", "pv", ["pvVisits"]}],
     "rootInfo": {"winrate", "scoreCp", "visits", "currentPlayer"}, ["policy"],
     "bestmove", "ponder", "pv", "winrate", "score_cp", "mate", "nodes", "playouts", "time_ms", "nps", "moves"}

Win rates are for the side to move (`currentPlayer`, "b" or "w"); `scoreCp` is dlshogi's
756 * logit(win rate). `lcb` is a 95% lower bound of a move's win rate that treats each playout
as a win/loss trial (the tree keeps no variance). `bestmove` is `win` when the side to move can
declare and `resign` when it has no legal move. `policy` maps every legal move to the network's
raw probability (softmax at temperature 1, before any search). A turn terminated before any
playout answers `{"id", "turnNumber", "isDuringSearch": false, "noResults": true}`. Errors are
`{"id", "error", "field"}`, warnings `{"id", "warning", "field"}`; action queries are echoed back
(`query_version` adds `version` and `git_hash`).

Scheduling: a reader thread parses lines as they come (actions act at once, even mid-search);
the main thread takes up to `max_batch` waiting turns, highest `priority` first (ties: arrival
order), and searches those sharing a search config in lockstep in one `Search.run`, so the
network sees one batch across positions (each tree adds `search.leaves_per_tree` leaves to it).
It searches in slices, so that no turn holds the engine (a query of 10^21 visits did; `maxVisits`
is now cut to 10^9): a slice ends when a turn is done or another waits (`AnalysisServer`), and the
unfinished turns go back to the queue, keeping their trees. Answers therefore come out of order
when priorities differ. End of input drains the queue, then the engine exits; a broken output
(its reader gone) stops it at once (`serve`).

Bad input costs one answer, never the engine: every line is answered (an error line when it is not
a query: bad JSON, nested too deeply, not UTF-8, longer than `analysis.max_line_bytes`), and an
exception met while handling a line (a bug included) becomes that line's error answer, logged with
its traceback. Lines are read with a bounded `readline`, so an over-long line is skipped chunk by
chunk, never held whole in memory. Output is always UTF-8 JSON: what cannot be written as UTF-8 (a
lone surrogate from a `"\\ud800"` escape in a query) is written as a JSON `\\u` escape instead.
"""

from __future__ import annotations

import dataclasses
import errno
import heapq
import json
import logging
import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

import cshogi
import numpy as np

from dlzero.analysis_query import ACTIONS, MAX_SETTINGS, Lru, Parsed, QueryError, QueryReader, Task, leading_id
from dlzero.config import MATE_MOVE_MAX_PLIES, AnalysisConfig, Config, SearchConfig
from dlzero.encoding import Encoder, legal_moves_and_labels, new_batch_buffer
from dlzero.engine.layout import engine_config
from dlzero.engine.player import Analysis, root_checks
from dlzero.inference.base import Evaluator
from dlzero.search import (
    Search,
    Tree,
    best_index,
    mate_distance,
    move_stats,
    principal_variation,
    root_winrate,
    softmax_priors,
    winrate_to_cp,
)
from dlzero.search.mate import MateSolver
from dlzero.version import __version__

LCB_Z = 1.96
log = logging.getLogger(__name__)
PV_MAX = 32
DISCARD_CHUNK = 1 << 16  # what an over-long line is read (and dropped) in


def analysis_of(tree: Tree, elapsed: float, playouts: int | None = None) -> Analysis:
    """Analysis of a searched tree (no resignation: an analysis reports the best move); `playouts`:
    those of all its searches, when it was searched in slices (default: the last search's)."""
    playouts = tree.playouts_done if playouts is None else playouts
    stats = move_stats(tree)
    if not stats:
        return Analysis(bestmove="resign", nodes=tree.nodes)
    pv = [cshogi.move_to_usi(m) for m in principal_variation(tree)] or [stats[0].usi]
    winrate = root_winrate(tree)
    return Analysis(bestmove=pv[0], ponder=pv[1] if len(pv) > 1 else None, pv=pv, winrate=winrate,
                    score_cp=winrate_to_cp(winrate), mate=mate_distance(tree), moves=stats, nodes=tree.nodes,
                    playouts=playouts, time_ms=int(elapsed * 1000), nps=playouts / max(elapsed, 1e-6))


@dataclass
class MoveInfo:
    """One root move of an answer (an entry of KataGo's `moveInfos`)."""

    move: str  # USI
    visits: int
    winrate: float  # for the side to move; a proven move's proof (1 or 0)
    score_cp: int
    prior: float
    lcb: float
    order: int  # 0 for the best move
    pv: list[str]  # starting with `move`
    pv_visits: list[int]  # visits of each PV move

    def to_dict(self, pv_visits: bool) -> dict:
        """The protocol's JSON fields (`pvVisits` only when the query asked for it)."""
        info = {"move": self.move, "visits": self.visits, "winrate": round(self.winrate, 6), "scoreCp": self.score_cp,
                "prior": round(self.prior, 6), "lcb": round(self.lcb, 6), "order": self.order, "pv": self.pv}
        if pv_visits:
            info["pvVisits"] = self.pv_visits
        return info


@dataclass
class TurnResult:
    """One answer for one analysed turn, typed: what `AnalysisEngine.analyse` returns, and what
    `to_answer` writes as the protocol's JSON (the only place that JSON is made)."""

    task: Task
    during: bool = False  # a partial answer (`reportDuringSearchEvery`); every turn ends with a final one
    analysis: Analysis | None = None  # None: terminated before any playout (`noResults`)
    move_infos: list[MoveInfo] = field(default_factory=list)
    visits: int = 0  # playouts of the root (0 when the rules settled it)
    policy: dict[str, float] | None = None  # the raw network policy, when the task asked for it

    def to_answer(self) -> dict:
        task = self.task
        if self.analysis is None:
            return {"id": task.id, "turnNumber": task.turn, "isDuringSearch": False, "noResults": True}
        out = {"id": task.id, "turnNumber": task.turn, "isDuringSearch": self.during, "position": task.position,
               "moveInfos": [m.to_dict(task.include_pv_visits) for m in self.move_infos],
               "rootInfo": {"winrate": round(self.analysis.winrate, 6), "scoreCp": self.analysis.score_cp,
                            "visits": self.visits, "currentPlayer": _player(task.board)},
               **self.analysis.to_dict(task.multipv)}
        if self.policy is not None:
            out["policy"] = self.policy
        return out


def move_infos(tree: Tree) -> list[MoveInfo]:
    """KataGo-style `moveInfos`: every root move the search tried (or proved), best first."""
    infos: list[MoveInfo] = []
    for stat in move_stats(tree):
        if stat.visits <= 0 and stat.proven is None:
            continue
        winrate = stat.proven if stat.proven is not None else stat.winrate
        pv, visits = _line(tree, stat.move)
        infos.append(MoveInfo(stat.usi, stat.visits, winrate, winrate_to_cp(winrate), stat.prior,
                              _lcb(winrate, stat.visits, stat.proven is not None), len(infos), pv, visits))
    return infos


def _line(tree: Tree, move: int) -> tuple[list[str], list[int]]:
    """The PV starting with root move `move`, and the visits of each of its moves."""
    node = tree.root
    i = node.child_index(move)
    pv, visits = [cshogi.move_to_usi(move)], [int(round(node.n[i]))]
    node = node.child(i)
    while node is not None and node.expanded and len(node.moves) and len(pv) < PV_MAX:
        j = best_index(node)
        n = node.n[j]
        if n <= 0:
            break
        pv.append(cshogi.move_to_usi(int(node.moves[j])))
        visits.append(int(round(n)))
        node = node.child(j)
    return pv, visits


def _lcb(winrate: float, visits: int, proven: bool) -> float:
    """Normal-approximation lower bound of a win rate measured over `visits` win/loss trials."""
    if proven:
        return winrate
    if visits <= 0:
        return 0.0
    return min(1.0, max(0.0, winrate - LCB_Z * math.sqrt(winrate * (1.0 - winrate) / visits)))


def _player(board: cshogi.Board) -> str:
    return "b" if board.turn == cshogi.BLACK else "w"


class AnalysisEngine:
    """Searches tasks with one Evaluator; Search objects (and their caches) are kept per search config,
    for the MAX_SETTINGS configs used last: a client that sends a new `overrideSettings` with every
    query made one more for ever (5,000 queries held 2.3 GiB). A config dropped is made again when
    it is next used; the trees of paused tasks are their own and do not depend on it."""

    def __init__(self, evaluator: Evaluator, cfg: Config, playouts: int | None = None) -> None:
        """`playouts`: those of a query that names none (default `search.playouts`)."""
        self.evaluator = evaluator
        self.cfg = cfg
        self.playouts = cfg.search.playouts if playouts is None else playouts
        self.reader = QueryReader(cfg, self.playouts)
        self._searches: Lru[str, Search] = Lru(MAX_SETTINGS)
        self._clear_cache = threading.Event()
        # deep root mate searches (`search.root_mate_depth` over 7) and the mate guard, in a helper process
        self._mate = MateSolver()
        if cfg.search.root_mate_depth > MATE_MOVE_MAX_PLIES or cfg.search.mate_guard_nodes:
            self._mate.start()
        self._encoder = Encoder()

    def close(self) -> None:
        """End the mate helper process (the evaluator belongs to the caller)."""
        self._mate.close()

    # -- synchronous API ------------------------------------------------------------------------
    def answer(self, lines: Iterable[str]) -> list[dict]:
        """Every answer for `lines` (warnings, partial and final answers), grouped by line in input order.

        Valid queries are searched together, as `serve` does with queries that arrive at once.
        `terminate` has nothing to stop here and is only acknowledged.
        """
        out: list[tuple[int, dict]] = []
        tasks: list[Task] = []
        for i, line in enumerate(lines):
            parsed = self.parse(line)
            if isinstance(parsed, dict):
                out.append((i, parsed))
                continue
            out.extend((i, w) for w in parsed.warnings)
            if parsed.action is not None:
                out.append((i, self.act(parsed.action)))
            for task in parsed.tasks:
                task.seq = i
                tasks.append(task)
        self.search(tasks, lambda result: out.append((result.task.seq, result.to_answer())))
        out.sort(key=lambda item: item[0])
        return [answer for _, answer in out]

    def analyse(self, tasks: list[Task]) -> list[TurnResult]:
        """The final result of each of `tasks` (from `self.reader.game_tasks`), in their order, searched
        together: the typed way in, for dlzero's own callers (review, the dashboard)."""
        final: dict[int, TurnResult] = {}

        def keep(result: TurnResult) -> None:
            if not result.during:
                final[id(result.task)] = result

        self.search(tasks, keep)
        return [final[id(task)] for task in tasks]

    def parse(self, line: str) -> Parsed | dict:
        """A line read into tasks or an action, or the error answer that replaces it; never raises."""
        try:
            return self.reader.read(line)
        except QueryError as exc:
            return exc.to_answer()
        except Exception as exc:  # a bug met by one line must cost that line's answer, not the engine
            return internal_error(line, exc)

    def act(self, action: dict) -> dict:
        """Answer an action that needs no scheduler (query_version, clear_cache; others are echoed)."""
        assert action["action"] in ACTIONS
        if action["action"] == "query_version":
            return {**action, "version": __version__, "git_hash": _git_hash()}
        if action["action"] == "clear_cache":
            self._clear_cache.set()  # done by the search thread, between two network calls
        return dict(action)

    # -- searching ------------------------------------------------------------------------------
    def search(self, tasks: list[Task], emit: Callable[[TurnResult], None],
               should_yield: Callable[[], bool] | None = None) -> list[Task]:
        """Search `tasks` and emit their results: those sharing a search config run in lockstep.

        With `should_yield` (the server's scheduler) the search comes in slices: a group's search
        ends when one of its trees is done (so its answer goes out at once, whatever its batch-mates
        still have to do) or when `should_yield()` says other tasks are waiting, and no further root
        check or group starts after that. The tasks without a final answer are returned, each
        keeping its tree and counts, for a later call to go on with. Without it, every task is
        searched to its end, and none is returned.
        """
        self._maybe_clear_cache()
        self._policies([t for t in tasks if t.include_policy and t.policy is None and not t.terminated])
        groups: dict[str, list[Task]] = {}
        paused: list[Task] = []
        for task in tasks:
            if task.terminated:
                emit(self.final(task))
            elif task.checked:
                groups.setdefault(repr(task.search), []).append(task)
            elif should_yield is not None and should_yield():
                paused.append(task)
            else:
                settled = root_checks(task.board, 0 if task.rules else task.search.root_mate_depth,
                                      task.search.entering_king_rule, solver=self._mate,
                                      stop=lambda task=task: task.terminated)
                task.checked = True
                if settled is not None:
                    emit(self._settled_result(task, settled))
                else:
                    groups.setdefault(repr(task.search), []).append(task)
        for key, members in groups.items():
            live = []
            for task in members:  # a task may be terminated while an earlier group runs
                if task.terminated:
                    emit(self.final(task))
                else:
                    live.append(task)
            if live and should_yield is not None and paused:  # an earlier group's slice has ended
                paused.extend(live)
            elif live:
                paused.extend(self._run_group(self._search(key, live[0].search), live, emit, should_yield))
        return paused

    def final(self, task: Task) -> TurnResult:
        """The final answer of `task` as its search left it (`noResults`: terminated before any playout)."""
        if task.tree is None or (task.searched == 0 and task.terminated):
            return TurnResult(task)
        return self._result(task, 0, 0.0, False)

    def _run_group(self, search: Search, tasks: list[Task], emit: Callable[[TurnResult], None],
                   should_yield: Callable[[], bool] | None) -> list[Task]:
        """One search of `tasks` (to their ends, or one slice with `should_yield`); the unfinished ones."""
        for task in tasks:
            if task.tree is None:
                task.tree = Tree(task.board.copy(), move_filter=_move_filter(task) if task.rules else None)
        trees = [task.tree for task in tasks]
        start = time.perf_counter()
        for task in tasks:
            if task.reported is None:  # the report clock starts with the first slice and runs across slices
                task.reported = start

        def on_step() -> None:
            self._maybe_clear_cache()
            now = time.perf_counter()
            for task, tree in zip(tasks, trees, strict=True):
                if task.terminated and tree.playouts_wanted > tree.playouts_done:
                    tree.playouts_wanted = tree.playouts_done  # the tree leaves the search at this step
                if task.report_every and not tree.done and now - task.reported >= task.report_every:
                    task.reported = now
                    emit(self._result(task, tree.playouts_done, now - start, True))

        def slice_ends() -> bool:
            return any(tree.done or search.tree_full(tree) for tree in trees) or should_yield()

        sliced = should_yield is not None
        search.run(trees, [t.playouts - t.searched for t in tasks], leaves_per_tree=search.cfg.leaves_per_tree,
                   on_step=on_step, should_stop=slice_ends if sliced else None, resume=sliced, guard=False)
        elapsed = time.perf_counter() - start
        paused = []
        for task, tree in zip(tasks, trees, strict=True):
            task.searched += tree.playouts_done
            task.seconds += elapsed
            if task.terminated or task.searched >= task.playouts or search.tree_full(tree) or not sliced:
                if not task.terminated:  # its last slice: the guard's one run, in the helper so `terminate` ends it
                    search.guard_roots([tree], self._mate, stop=lambda task=task: task.terminated)
                emit(self.final(task))
            else:
                paused.append(task)
        return paused

    # -- results --------------------------------------------------------------------------------
    @staticmethod
    def _result(task: Task, playouts: int, seconds: float, during: bool) -> TurnResult:
        """The answer from `task`'s tree, with `playouts` and `seconds` of the slice running now (0
        between slices) added to those of the slices before."""
        total = task.searched + playouts
        return TurnResult(task, during, analysis_of(task.tree, task.seconds + seconds, total), move_infos(task.tree),
                          total, task.policy)

    @staticmethod
    def _settled_result(task: Task, analysis: Analysis) -> TurnResult:
        """The result when the rules decide the root (no legal move, a declaration, a mate)."""
        infos = []
        if analysis.mate is not None:
            infos.append(MoveInfo(analysis.bestmove, 0, 1.0, analysis.score_cp, 0.0, 1.0, 0, list(analysis.pv),
                                  [0] * len(analysis.pv)))
        return TurnResult(task, False, analysis, infos, 0, task.policy)

    def _policies(self, tasks: list[Task]) -> None:
        """Raw policy over the legal moves of each task's root (`task.policy`), in one network call."""
        if not tasks:
            return
        planes = self._encoder.encode_batch([task.board for task in tasks], new_batch_buffer(len(tasks)))
        logits, _ = self.evaluator.evaluate(np.asarray(planes))
        for k, task in enumerate(tasks):
            moves, labels = legal_moves_and_labels(task.board)
            probs = softmax_priors(logits[k], labels, 1.0) if len(moves) else np.zeros(0)
            order = np.argsort(-probs, kind="stable")
            task.policy = {cshogi.move_to_usi(int(moves[i])): round(float(probs[i]), 6) for i in order}

    def _search(self, key: str, cfg: SearchConfig) -> Search:
        search = self._searches.get(key)
        if search is None:
            laid_out = engine_config(dataclasses.replace(self.cfg, search=cfg), self.evaluator).search
            search = Search(self.evaluator, laid_out)
            self._searches.put(key, search)
        return search

    def _maybe_clear_cache(self) -> None:
        if self._clear_cache.is_set():
            self._clear_cache.clear()
            for search in self._searches.values():
                search.cache.clear()


def internal_error(line: str, exc: Exception) -> dict:
    """The answer to a line whose handling raised something other than a QueryError (logged: a bug)."""
    log.error("analysis: handling a line failed", exc_info=exc)
    return {"id": leading_id(line), "error": f"internal error on this line: {type(exc).__name__}: {exc}"}


def dump_answer(answer: dict[str, Any]) -> str:
    """One answer as a JSON line that is valid UTF-8 whatever the query held."""
    text = json.dumps(answer, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a "\ud800" escape in the query): \u escapes instead
        text = json.dumps(answer)
    return text + "\n"


def read_lines(stream: IO, max_bytes: int) -> Iterator[str | QueryError]:
    """The lines of `stream` (bytes decoded as UTF-8, or text), or a QueryError in place of a line
    that is longer than `max_bytes` (characters on a text stream) or not UTF-8.

    `readline` is bounded, so no line is ever held in memory beyond `max_bytes`: the rest of an
    over-long line is read in `DISCARD_CHUNK` pieces and dropped.
    """
    while True:
        raw = stream.readline(max_bytes + 1)
        if not raw:
            return
        newline = "\n" if isinstance(raw, str) else b"\n"
        if len(raw) > max_bytes and not raw.endswith(newline):
            while (chunk := stream.readline(DISCARD_CHUNK)) and not chunk.endswith(newline):
                pass
            head = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
            yield QueryError(f"line longer than {max_bytes} bytes (analysis.max_line_bytes, --max-line-bytes); "
                             "skipped", query_id=leading_id(head))
            continue
        if isinstance(raw, str):
            yield raw
            continue
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start:exc.end]
            yield QueryError(f"line is not valid UTF-8 (bytes {bad!r} at offset {exc.start}); JSON text is UTF-8",
                             query_id=leading_id(raw[:exc.start].decode("utf-8")))


def _move_filter(task: Task) -> Callable[[cshogi.Board, int, np.ndarray], np.ndarray | None]:
    """The Tree hook that applies a task's avoidMoves / allowMoves."""
    def keep(board: cshogi.Board, depth: int, moves: np.ndarray) -> np.ndarray | None:
        mask = task.allowed(board, depth, [cshogi.move_to_usi(int(m)) for m in moves])
        return None if mask is None else np.asarray(mask, dtype=bool)

    return keep


_GIT_HASH: list[str] = []


def _git_hash() -> str:
    """The checkout's commit, or "<omitted>" outside a git checkout (as KataGo answers)."""
    if not _GIT_HASH:
        try:
            run = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                                 capture_output=True, text=True, timeout=5)
            _GIT_HASH.append(run.stdout.strip() if run.returncode == 0 else "<omitted>")
        except (OSError, subprocess.SubprocessError):
            _GIT_HASH.append("<omitted>")
    return _GIT_HASH[0]


class AnalysisServer:
    """The asynchronous side of `serve`: a priority queue of tasks, actions applied as they arrive.

    Tasks are searched in slices (`AnalysisEngine.search` with `should_yield`), so no query holds
    the engine: a slice ends when one of its tasks is done, when a task of higher priority than one
    running waits (at the next step), or, for a waiting task of the same priority, at once when
    the batch has room for it, else after SLICE_S. The unfinished tasks go back to the queue behind
    those of their priority that waited, and the next batch is again the highest priority first.
    A task of lower priority waits until every higher one is answered.
    """

    LINGER_S = 0.002  # after the first waiting task, how long to wait for more to batch with it
    SLICE_S = 1.0  # the longest slice while a task of the same priority waits for room in the batch

    def __init__(self, engine: AnalysisEngine, out: TextIO, max_batch: int = 64) -> None:
        self.engine = engine
        self.out = out
        self.max_batch = max_batch
        self._cond = threading.Condition()
        self._out_lock = threading.Lock()
        self._heap: list[tuple[int, int, Task]] = []
        self._running: list[Task] = []
        self._seq = 0
        self._eof = False
        self._slice_start = 0.0
        self.gone = False  # the reader of the answers has gone (a broken pipe): nothing is searched any more

    def emit(self, answer: dict) -> None:
        """Write one answer; when its reader has gone, stop: no answer could reach anyone."""
        text = dump_answer(answer)
        with self._out_lock:
            if self.gone:
                return
            try:
                self.out.write(text)
                self.out.flush()
            except BrokenPipeError:
                self.gone = True
        if self.gone:
            self._give_up()

    def _give_up(self) -> None:
        """The output is gone: drop the queue, end the running search at its next step, read no more."""
        with self._cond:
            self._heap = []
            self._eof = True
            for task in self._running:
                task.terminated = True
            self._cond.notify()

    def submit(self, line: str) -> None:
        """Handle one input line (reader thread): queue its tasks, or apply its action now."""
        if not line.strip():
            return
        parsed = self.engine.parse(line)
        if isinstance(parsed, dict):
            self.emit(parsed)
            return
        try:
            self._queue(parsed)
        except Exception as exc:  # a failed action or a bug: this line's answer, and the engine goes on
            self.emit(internal_error(line, exc))

    def _queue(self, parsed: Parsed) -> None:
        for warning in parsed.warnings:
            self.emit(warning)
        if parsed.action is not None:
            self._act(parsed.action)
            return
        with self._cond:
            if self.gone:
                return
            self._push(parsed.tasks)
            self._cond.notify()

    def _push(self, tasks: list[Task]) -> None:
        """Queue `tasks` behind every task of their priority already waiting (the lock is held)."""
        for task in tasks:
            self._seq += 1
            task.seq = self._seq
            heapq.heappush(self._heap, (-task.priority, task.seq, task))

    def close_input(self) -> None:
        with self._cond:
            self._eof = True
            self._cond.notify()

    def _act(self, action: dict) -> None:
        if action["action"] not in ("terminate", "terminate_all"):
            self.emit(self.engine.act(action))
            return
        turns = set(action["turnNumbers"]) if action.get("turnNumbers") is not None else None
        everything = action["action"] == "terminate_all"

        def hit(task: Task) -> bool:
            return (everything or task.id == action["terminateId"]) and (turns is None or task.turn in turns)

        self.emit(dict(action))
        with self._cond:
            dropped = [t for _, _, t in self._heap if hit(t)]
            self._heap = [item for item in self._heap if not hit(item[2])]
            heapq.heapify(self._heap)
            for task in self._running:
                if hit(task):
                    task.terminated = True
        for task in dropped:  # a task between two slices answers with what it found so far
            self.emit(self.engine.final(task).to_answer())

    def run(self) -> None:
        """Search queued tasks until the input has ended and the queue is empty."""
        while True:
            with self._cond:
                while not self._heap and not self._eof:
                    self._cond.wait()
                if not self._heap:
                    return
                if len(self._heap) < self.max_batch and not self._eof:
                    self._cond.wait(self.LINGER_S)
                batch = [heapq.heappop(self._heap)[2] for _ in range(min(self.max_batch, len(self._heap)))]
                self._running = batch
                self._slice_start = time.monotonic()
            paused = self._search_batch(batch)
            with self._cond:
                self._running = []
                if not self.gone:
                    self._push(paused)  # a task terminated meanwhile answers when it is next taken

    def _should_yield(self) -> bool:
        """Whether the running slice should end for a waiting task (the rule in the class docstring)."""
        with self._cond:
            if not self._heap or not self._running:
                return False
            waiting = -self._heap[0][0]
            lowest = min(task.priority for task in self._running)
            if waiting != lowest:
                return waiting > lowest
            return len(self._running) < self.max_batch or time.monotonic() - self._slice_start >= self.SLICE_S

    def _search_batch(self, batch: list[Task]) -> list[Task]:
        """Search one slice of a batch; the tasks it left unfinished. If the search fails, every turn
        without a final answer gets an error answer."""
        answered: set[int] = set()

        def emit(result: TurnResult) -> None:
            if not result.during:
                answered.add(id(result.task))
            self.emit(result.to_answer())

        try:
            return self.engine.search(batch, emit, self._should_yield)
        except Exception as exc:  # one failed batch (a broken model file, a device error) must not end the others
            log.exception("analysis batch failed")
            for task in batch:
                if id(task) not in answered:
                    self.emit({"id": task.id, "turnNumber": task.turn, "isDuringSearch": False,
                               "error": f"search failed: {type(exc).__name__}: {exc}"})
            return []


def serve(engine: AnalysisEngine, stream: IO, out: TextIO, max_batch: int = 64,
          max_line_bytes: int = AnalysisConfig.max_line_bytes) -> None:
    """Answer queries from `stream` (bytes, read as UTF-8, or text) until it ends and every queued
    turn is answered; an error reading `stream` itself is raised once the queue is drained.

    When the reader of `out` goes (a broken pipe: `dlzero analyze | head`), the search stops at its
    next step and BrokenPipeError is raised at once, without waiting for `stream` to end: the
    reading thread may still be blocked on it, so the caller should end the process without
    the interpreter's teardown (`dlzero.commands.analyze` does).
    """
    server = AnalysisServer(engine, out, max_batch)
    failed: list[BaseException] = []

    def reader() -> None:
        try:
            for line in read_lines(stream, max_line_bytes):
                if isinstance(line, QueryError):
                    server.emit(line.to_answer())
                else:
                    server.submit(line)
        except BaseException as exc:  # the input itself failed (not a line in it): end like EOF, report it
            failed.append(exc)
        finally:
            server.close_input()

    thread = threading.Thread(target=reader, name="analysis-reader", daemon=True)
    thread.start()
    server.run()
    if server.gone:
        raise BrokenPipeError(errno.EPIPE, "the reader of the answers has gone")
    thread.join()
    if failed:
        raise failed[0]
