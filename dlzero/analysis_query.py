"""Reading analysis queries: one JSON line in, validated tasks (one per analysed turn) out; dlzero's own
callers build the same tasks from Python values (`QueryReader.game_tasks`), with no JSON between.

The fields follow KataGo's analysis engine (docs/Analysis_Engine.md in lightvector/KataGo), with
shogi's own where Go's do not fit; today's dlzero names stay valid as aliases:

| field | meaning |
|---|---|
| `id` | echoed in every answer (any JSON value; optional) |
| `position` | `startpos [moves ...]`, `sfen S [moves ...]` or a bare SFEN (required) |
| `moves` | USI moves played after `position` (or KataGo-style `["b", "7g7f"]` pairs) |
| `analyzeTurns` | turns to analyse: 0 is `position`, k the position after `moves[k-1]`; default: the last |
| `maxVisits` / `playouts` | playouts per turn (aliases; give one); over 10^9 is cut to 10^9, with a warning |
| `multipv` | root moves listed in today's `moves` answer field (default 5) |
| `includePolicy` | add `policy`: the raw network policy (temperature 1) over the legal moves |
| `includePVVisits` | add `pvVisits` (visits of each PV move) to every move info |
| `avoidMoves` / `allowMoves` | `[{"player": "b", "moves": [...], "untilDepth": n}]`: moves `player` may not / |
| | may only play in the first n plies of the search (n = 1: at the root only) |
| `reportDuringSearchEvery` | seconds between partial answers (`isDuringSearch: true`) |
| `priority` / `priorities` | higher is searched first (per query / per turn) |
| `overrideSettings` / `overrides` | `search.*` config keys for this query only (aliases) |
| `action` | `query_version`, `clear_cache`, `terminate` (`terminateId`, `turnNumbers`), `terminate_all` |

A bad field is a `QueryError` naming it, and the query is not searched; a field this engine does
not use (a typo, or a Go-only KataGo field such as `komi`) is a warning naming it, and the query
is still searched. A line that is not a query at all (not JSON, `NaN`, nested deeper than
`MAX_DEPTH`) is a `QueryError` too, with the id read from the line's start where it can be: the
reader must survive every line, and nothing deeper than `MAX_DEPTH` gets past it, so no later
`repr` or `json.dumps` of an echoed value can hit Python's recursion limit.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import cshogi

from dlzero.config import Config, SearchConfig, config_from_dict, config_to_dict
from dlzero.data.jsonfile import json_depth
from dlzero.encoding.features import REPETITION_LOOKBACK
from dlzero.engine.player import MAX_PLAYOUTS
from dlzero.errors import DlzeroError
from dlzero.game_end import REPETITION_PLIES
from dlzero.position import parse_position, push_usi_move
from dlzero.search import Tree

DEFAULT_MULTIPV = 5
ACTIONS = ("query_version", "clear_cache", "terminate", "terminate_all")
QUERY_FIELDS = {
    "id", "position", "moves", "analyzeTurns", "maxVisits", "playouts", "multipv", "includePolicy",
    "includePVVisits", "avoidMoves", "allowMoves", "reportDuringSearchEvery", "priority", "priorities",
    "overrideSettings", "overrides",
}
ACTION_FIELDS = {"id", "action", "terminateId", "turnNumbers"}
# KataGo fields that mean nothing in shogi: accepted with a warning so Go-minded clients still work.
GO_ONLY_FIELDS = {"rules", "komi", "boardXSize", "boardYSize", "initialStones", "initialPlayer", "includeOwnership",
                  "includeMovesOwnership", "whiteHandicapBonus", "rootPolicyTemperature", "rootFpuReductionMax"}
_USI_MOVE_RE = re.compile(r"[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i]")
_PLAYERS = {"b": cshogi.BLACK, "black": cshogi.BLACK, "w": cshogi.WHITE, "white": cshogi.WHITE}
MAX_DEPTH = 32  # nesting of a query; real ones need 4 ({"avoidMoves": [{"moves": [...]}]})
# The history a turn's board keeps: the search and the encoder look back no further (a leaf's repetition
# check, REPETITION_PLIES; the repetition planes, REPETITION_LOOKBACK), so a longer history changes no
# answer, and a full one made every task of a long game hold that game: memory quadratic in its length.
HISTORY_PLIES = max(REPETITION_LOOKBACK, REPETITION_PLIES)
# Distinct `overrideSettings` whose search configs (and, in the engine, Search objects with their caches)
# are kept: the most recently used ones. Each distinct override used to be kept for ever.
MAX_SETTINGS = 8
K = TypeVar("K")
V = TypeVar("V")
# `{"id": <string or number or literal>` at the start of a line: the id of a line that cannot be parsed
_LEADING_ID_RE = re.compile(r'\s*\{\s*"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)')


class QueryError(DlzeroError):
    """A query field that cannot be used; `field` names it (None: the line as a whole)."""

    def __init__(self, message: str, field_name: str | None = None, query_id: Any = None) -> None:
        super().__init__(message)
        self.field = field_name
        self.id = query_id

    def to_answer(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "error": str(self)}
        if self.field is not None:
            out["field"] = self.field
        return out


@dataclass(frozen=True)
class MoveRule:
    """One `avoidMoves` / `allowMoves` entry: `player` may (not) play `moves` above `until_depth`."""

    player: int
    moves: frozenset[str]
    until_depth: int
    allow: bool


class Lru(Generic[K, V]):
    """A mapping that keeps its `size` most recently used entries: what a stream of queries, each free
    to name new settings, may make the engine keep is bounded."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def values(self) -> list[V]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class Game:
    """A query's position and moves, shared by all its tasks: a task's own position string (O(turn)
    characters) is made only when an answer is written, so a query of n turns holds O(n), not O(n^2)."""

    position: str
    moves: list[str]

    def position_at(self, turn: int) -> str:
        """The USI position string of `turn` (the position after the first `turn` moves)."""
        return _with_moves(self.position, self.moves[:turn])


@dataclass
class Task:
    """One turn of one query: what to search and how to answer."""

    id: Any
    turn: int
    game: Game                   # the query's position and moves (`position` is this turn's)
    board: cshogi.Board          # this turn's position, with the last HISTORY_PLIES plies of history
    playouts: int
    multipv: int
    search: SearchConfig
    priority: int = 0
    include_policy: bool = False
    include_pv_visits: bool = False
    report_every: float | None = None
    rules: tuple[MoveRule, ...] = ()
    seq: int = 0                 # arrival order, breaks priority ties
    terminated: bool = False
    # What a search cut into slices keeps between them (`dlzero.analysis.AnalysisServer`): the tree,
    # the playouts and seconds of the slices before, when the last partial answer went out (perf_counter;
    # so reports keep `report_every` across slices), whether the root checks (mate, declaration) are
    # done, and the raw policy once computed.
    tree: Tree | None = None
    searched: int = 0
    seconds: float = 0.0
    reported: float | None = None
    checked: bool = False
    policy: dict[str, float] | None = None

    @property
    def position(self) -> str:
        """The USI position string of this turn, as answers echo it."""
        return self.game.position_at(self.turn)

    def allowed(self, board: cshogi.Board, depth: int, moves: list[str]) -> list[bool] | None:
        """Which of `moves` the search may try at `depth` plies below the root (None: all)."""
        keep = [True] * len(moves)
        touched = False
        for rule in self.rules:
            if depth >= rule.until_depth or board.turn != rule.player:
                continue
            touched = True
            keep = [k and ((m in rule.moves) == rule.allow) for k, m in zip(keep, moves, strict=True)]
        if not touched or all(keep) or not any(keep):  # nothing allowed: the rule cannot apply
            return None
        return keep


@dataclass
class Parsed:
    """A query line read: an action (a dict) or tasks, plus warnings to send first."""

    tasks: list[Task] = field(default_factory=list)
    action: dict | None = None
    warnings: list[dict] = field(default_factory=list)


class QueryReader:
    """Turns JSON lines into tasks with the engine's defaults and search configs."""

    def __init__(self, cfg: Config, playouts: int) -> None:
        self.cfg = cfg
        self.playouts = playouts
        self._configs: Lru[str, SearchConfig] = Lru(MAX_SETTINGS)

    def read(self, line: str) -> Parsed:
        """Parse one line; raises QueryError naming the bad field."""
        try:
            data = json.loads(line, parse_constant=_no_constant)
        except RecursionError:
            raise QueryError(f"JSON nested too deeply (a query has at most {MAX_DEPTH} levels)",
                             query_id=leading_id(line)) from None
        except ValueError as exc:  # bad JSON, NaN/Infinity, an integer of more digits than Python converts
            raise QueryError(f"not valid JSON: {exc}", query_id=leading_id(line)) from None
        if not isinstance(data, dict):
            raise QueryError("a query must be a JSON object")
        qid = data.get("id")
        if json_depth(data) > MAX_DEPTH:
            raise QueryError(f"JSON nested too deeply (a query has at most {MAX_DEPTH} levels)",
                             query_id=qid if json_depth(qid) <= MAX_DEPTH else None)
        if "action" in data:
            return self._action(data, qid)
        parsed = Parsed()
        for name in sorted(set(data) - QUERY_FIELDS):
            why = "is a Go field, not used in shogi" if name in GO_ONLY_FIELDS else "is not a query field"
            parsed.warnings.append({"id": qid, "warning": f"'{name}' {why}; ignored", "field": name})
        parsed.tasks = self._tasks(data, qid)
        name = "maxVisits" if "maxVisits" in data else "playouts"
        if _is_int(data.get(name)) and data[name] > MAX_PLAYOUTS:
            parsed.warnings.append({"id": qid, "warning": f"'{name}' is more than a search takes; searching "
                                    f"{MAX_PLAYOUTS} playouts", "field": name})
        return parsed

    # -- actions --------------------------------------------------------------------------------
    @staticmethod
    def _action(data: dict, qid: Any) -> Parsed:
        action = data["action"]
        if action not in ACTIONS:
            raise QueryError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}", "action", qid)
        unknown = sorted(set(data) - ACTION_FIELDS)
        if unknown:
            raise QueryError(f"'{unknown[0]}' is not a field of action {action}", unknown[0], qid)
        if action == "terminate" and "terminateId" not in data:
            raise QueryError("terminate needs 'terminateId'", "terminateId", qid)
        turns = data.get("turnNumbers")
        if turns is not None and not (isinstance(turns, list) and all(_is_int(t) and t >= 0 for t in turns)):
            raise QueryError("'turnNumbers' must be a list of non-negative integers", "turnNumbers", qid)
        return Parsed(action=data)

    # -- analysis queries -----------------------------------------------------------------------
    def game_tasks(self, position: str, moves: list[str], turns: list[int], playouts: int,
                   multipv: int = DEFAULT_MULTIPV, task_id: Any = None) -> list[Task]:
        """Tasks for `turns` of a game held in Python values (dlzero's own callers: review, the
        dashboard), checked as a query's `position`, `moves`, `analyzeTurns`, `maxVisits` and `multipv`
        are, with the engine's search settings; a QueryError names what is wrong."""
        board = self._board(position, task_id)
        walk = Walk(board)
        moves = self._moves(moves, walk, task_id)
        self._check_turns(turns, len(moves), task_id)
        playouts, multipv = _positive(playouts, "maxVisits", task_id), _positive(multipv, "multipv", task_id)
        search = self._search_config({}, task_id)  # no per-query overrides
        game = Game(position, moves)
        return [Task(task_id, turn, game, walk.board(turn), playouts, multipv, search) for turn in turns]

    def _tasks(self, data: dict, qid: Any) -> list[Task]:
        walk = Walk(self._board(data.get("position"), qid))
        moves = self._moves(data.get("moves", []), walk, qid)
        turns = data.get("analyzeTurns", [len(moves)])
        self._check_turns(turns, len(moves), qid)
        priorities = self._priorities(data, len(turns), qid)
        playouts = self._playouts(data, qid)
        multipv = _positive_int(data, "multipv", DEFAULT_MULTIPV, qid)
        search = self._search_config(data, qid)
        every = data.get("reportDuringSearchEvery")
        if every is not None and (not isinstance(every, int | float) or isinstance(every, bool) or every <= 0):
            raise QueryError("'reportDuringSearchEvery' must be a positive number of seconds",
                             "reportDuringSearchEvery", qid)
        rules = self._rules(data, "avoidMoves", qid, allow=False) + self._rules(data, "allowMoves", qid, allow=True)
        flags = {name: _bool(data, name, qid) for name in ("includePolicy", "includePVVisits")}
        game = Game(data["position"], moves)
        tasks = [Task(qid, turn, game, walk.board(turn), playouts, multipv, search, priority,
                      flags["includePolicy"], flags["includePVVisits"], every, rules)
                 for turn, priority in zip(turns, priorities, strict=True)]
        for task in tasks:
            _check_allowed_at_root(task, qid)
        return tasks

    @staticmethod
    def _board(position: Any, qid: Any) -> cshogi.Board:
        """The board of a query's `position` (a string)."""
        if not isinstance(position, str):
            raise QueryError("'position' must be a string like 'startpos moves 7g7f' or 'sfen ...'", "position", qid)
        try:
            return parse_position(position)
        except DlzeroError as exc:
            raise QueryError(str(exc), "position", qid) from None

    @staticmethod
    def _check_turns(turns: Any, n_moves: int, qid: Any) -> None:
        if not (isinstance(turns, list) and turns and all(_is_int(t) and 0 <= t <= n_moves for t in turns)):
            raise QueryError(f"'analyzeTurns' must be a non-empty list of turns 0..{n_moves}", "analyzeTurns", qid)
        if len(set(turns)) != len(turns):
            raise QueryError("'analyzeTurns' lists a turn twice", "analyzeTurns", qid)

    @staticmethod
    def _moves(moves: Any, walk: Walk, qid: Any) -> list[str]:
        """USI strings of `moves`, played along `walk` (which ends at the last turn)."""
        board = walk.end
        if not isinstance(moves, list):
            raise QueryError("'moves' must be a list of USI moves", "moves", qid)
        out = []
        for i, item in enumerate(moves):
            usi = item
            if isinstance(item, list) and len(item) == 2:  # KataGo's [player, move]
                player = _PLAYERS.get(str(item[0]).lower())
                if player != board.turn:
                    raise QueryError(f"moves[{i}]: player {item[0]!r} is not the side to move", "moves", qid)
                usi = item[1]
            if not isinstance(usi, str):
                raise QueryError(f"moves[{i}] must be a USI move string, got {item!r}", "moves", qid)
            try:
                walk.push(usi)
            except DlzeroError as exc:
                raise QueryError(f"moves[{i}]: {exc}", "moves", qid) from None
            out.append(usi)
        return out

    @staticmethod
    def _priorities(data: dict, n: int, qid: Any) -> list[int]:
        if "priorities" in data:
            values = data["priorities"]
            if not (isinstance(values, list) and len(values) == n and all(_is_int(p) for p in values)):
                raise QueryError("'priorities' must be a list of integers, one per analysed turn", "priorities", qid)
            return list(values)
        priority = data.get("priority", 0)
        if not _is_int(priority):
            raise QueryError(f"'priority' must be an integer, got {priority!r}", "priority", qid)
        return [priority] * n

    def _playouts(self, data: dict, qid: Any) -> int:
        if "maxVisits" in data and "playouts" in data:
            raise QueryError("give 'maxVisits' or its alias 'playouts', not both", "maxVisits", qid)
        name = "maxVisits" if "maxVisits" in data else "playouts"
        return min(_positive_int(data, name, self.playouts, qid), MAX_PLAYOUTS)

    def _search_config(self, data: dict, qid: Any) -> SearchConfig:
        if "overrideSettings" in data and "overrides" in data:
            raise QueryError("give 'overrideSettings' or its alias 'overrides', not both", "overrideSettings", qid)
        name = "overrideSettings" if "overrideSettings" in data else "overrides"
        overrides = data.get(name) or {}
        if not isinstance(overrides, dict):
            raise QueryError(f"'{name}' must be an object of 'search.key': value", name, qid)
        key = json.dumps(overrides, sort_keys=True)
        search = self._configs.get(key)
        if search is None:
            cfg = config_to_dict(self.cfg)
            for k, value in overrides.items():
                section, _, sub = str(k).partition(".")
                if section != "search" or not sub:
                    raise QueryError(f"override '{k}': only search.* keys can be set per query", name, qid)
                cfg["search"][sub] = value
            try:
                search = config_from_dict(cfg).search
            except DlzeroError as exc:
                raise QueryError(f"{name}: {exc}", name, qid) from None
            self._configs.put(key, search)
        return search

    @staticmethod
    def _rules(data: dict, name: str, qid: Any, allow: bool) -> tuple[MoveRule, ...]:
        entries = data.get(name, [])
        if not isinstance(entries, list):
            raise QueryError(f"'{name}' must be a list of {{player, moves, untilDepth}} objects", name, qid)
        if allow and len(entries) > 1:
            raise QueryError("'allowMoves' takes one entry (as in KataGo)", name, qid)
        rules = []
        for i, entry in enumerate(entries):
            where = f"{name}[{i}]"
            if not isinstance(entry, dict) or set(entry) != {"player", "moves", "untilDepth"}:
                raise QueryError(f"{where} must have exactly 'player', 'moves' and 'untilDepth'", name, qid)
            player = _PLAYERS.get(str(entry["player"]).lower())
            if player is None:
                raise QueryError(f"{where}.player must be 'b' or 'w', got {entry['player']!r}", name, qid)
            moves = entry["moves"]
            if not isinstance(moves, list) or not all(isinstance(m, str) and _USI_MOVE_RE.fullmatch(m) for m in moves):
                raise QueryError(f"{where}.moves must be a list of USI moves (e.g. 7g7f, P*5e)", name, qid)
            depth = entry["untilDepth"]
            if not _is_int(depth) or depth < 1:
                raise QueryError(f"{where}.untilDepth must be a positive integer, got {depth!r}", name, qid)
            rules.append(MoveRule(player, frozenset(moves), depth, allow))
        return tuple(rules)


class Walk:
    """One walk along a query's moves, from which the board of every turn is taken.

    Each move is played once; the SFEN before it is kept. The board of a turn starts from the SFEN
    HISTORY_PLIES plies back (or the game's first) and replays those plies, so it has the history the
    search reads and no more: a query of n moves and t turns costs O(n + t * HISTORY_PLIES) in time
    and memory. Taking each turn's board from a copy of the end, popped back, cost O(n) per turn and
    the copy held the whole game: a 108 KiB query took 3 GiB and a minute.
    """

    def __init__(self, board: cshogi.Board) -> None:
        """`board`: the query's position, with the history its position string gave it."""
        self.end = board
        earlier = list(board.history)[-HISTORY_PLIES:]  # the last plies of the position string's own moves
        first = board.copy()
        for _ in earlier:
            first.pop()
        self._sfens: list[str] = []
        self._moves: list[int] = []
        for move in earlier:
            self._sfens.append(first.sfen())
            self._moves.append(move)
            first.push(move)
        self._offset = len(earlier)  # the index of turn 0's SFEN

    def push(self, usi: str) -> None:
        """Play the USI move `usi` (checked: a PositionError when it is not legal)."""
        sfen = self.end.sfen()
        self._moves.append(push_usi_move(self.end, usi))
        self._sfens.append(sfen)

    def board(self, turn: int) -> cshogi.Board:
        """A new board at `turn` (0: the query's position), with the last HISTORY_PLIES plies of history."""
        ply = self._offset + turn
        start = max(ply - HISTORY_PLIES, 0)
        board = cshogi.Board(self._sfens[start] if start < len(self._sfens) else self.end.sfen())
        for move in self._moves[start:ply]:
            board.push(move)
        return board


def _check_allowed_at_root(task: Task, qid: Any) -> None:
    """Refuse an `allowMoves` entry that applies at the task's root but lists no legal move there:
    the search would ignore it (`Task.allowed`: nothing allowed) and answer about every move, which
    the client did not ask for."""
    rules = [rule for rule in task.rules if rule.allow and rule.player == task.board.turn]
    legal = {cshogi.move_to_usi(m) for m in task.board.legal_moves} if rules else set()
    for rule in rules:
        if legal and not rule.moves & legal:
            raise QueryError(f"allowMoves[0].moves: none is legal at turn {task.turn}, where the rule applies; "
                             f"list at least one legal move (e.g. {min(legal)})", "allowMoves", qid)


def _with_moves(position: str, moves: list[str]) -> str:
    """`position` with `moves` appended as USI does it."""
    if not moves:
        return position
    return f"{position} {'' if 'moves' in position.split() else 'moves '}{' '.join(moves)}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(data: dict, key: str, default: int, qid: Any) -> int:
    return _positive(data.get(key, default), key, qid)


def _positive(value: Any, key: str, qid: Any) -> int:
    if not _is_int(value) or value < 1:
        raise QueryError(f"'{key}' must be a positive integer, got {value!r}", key, qid)
    return value


def _bool(data: dict, key: str, qid: Any) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise QueryError(f"'{key}' must be true or false, got {value!r}", key, qid)
    return value


def _no_constant(name: str) -> Any:
    """json's hook for NaN, Infinity and -Infinity, which JSON does not have: they are refused."""
    raise ValueError(f"{name} is not a JSON value")


def leading_id(line: str) -> Any:
    """The id of a line that cannot be parsed whole (bad JSON, too deep, too long), when the line
    starts with it, as clients usually write it; None otherwise."""
    match = _LEADING_ID_RE.match(line)
    if match is None:
        return None
    try:
        return json.loads(match.group(1), parse_constant=_no_constant)
    except ValueError:
        return None
