"""Any USI engine as a teacher: `usi:COMMAND[;Option=value...]`.

Per position the engine gets `position ...` (the game's start and every move since, so it sees
repetitions) and `go GO`, and we read its `info` lines until `bestmove`. The eval is the score of the
engine's best move (cp, or mate N as +-(30000 - 100 N)); its win rate is the logistic curve
p = 1 / (1 + exp(-cp / eval_scale)) with dlshogi's scale 756 unless the spec says otherwise.

Labels come from the search's final lines only (`final_lines`). An engine prints its lines again at
every depth of iterative deepening, so a shallow line's move and score are stale once a deeper one
exists (keeping every depth's first moves, the policy's top move was not Fairy-Stockfish's `bestmove` in
23 of 30 positions at `go nodes 20000`). With `multipv k` indices (Stockfish, YaneuraOu with MultiPV >
1: k = 1..N at each depth) the final line of index k is its deepest; a `stop` or a node limit cuts the
last depth short, and Fairy-Stockfish then prints index 1 at the new depth and the others at the one
before, which stay, each scored at most as the lines ranked above it: such a line failed low at the new
depth (Stockfish's MultiPV searches every root move for index 1 first), and its older score can be the
higher one (at `go nodes 20000` with MultiPV=4, in 5 of 12 positions). Without an index, a shallower
line cannot be told from a stale one: only the lines of the last depth count, the latest per move (one
line: YaneuraOu without MultiPV; a line per root move within `MultiPVWidth` cp of the best: GPS Shogi,
checked by hand, at depths 4 and 5 of a 3-second search, only its final line in a 0.1-second one).
`lowerbound` and `upperbound` lines (an aspiration window's fail-high or fail-low) are not scores and
are skipped.

The eval is the final line of the move played (`bestmove`), else the best final line. Where the final
lines hold one move (no MultiPV: `multipv 1` lines only, or a single line), the policy is one-hot on
`bestmove`; where they hold several, it is softmax((cp_M - cp_best) / temperature) over their first
moves M, `bestmove` always among them.

Spec keys that are ours, not the engine's: `go` (default `btime 0 wtime 0 byoyomi 1000`: GPS Shogi
refuses `go depth` and stops at its `LimitDepth`), `eval_scale` (756), `temperature` (100 cp) and
`timeout` (seconds a position may take, 60). Every other key is sent as `setoption`, and must be
an option the engine lists.

A score of a mate for the side to move (`mate +N`, or a cp at or beyond 30000 as GPS Shogi prints
its mates) makes a `proven` label, which ends the teacher's own game, and restarts the engine before
the next position: GPS Shogi answers a position its root mate search solves and then reads no
more commands (checked by hand: neither `stop`, `isready` nor `usinewgame` wakes it). An engine that
dies or stays silent past `timeout` is restarted and asked again once before the part fails.

The process (start, option check, `isready`, deadlines, stderr in errors, quit or kill) is
`dlzero.play.usi_client.UsiClient`, the client the rating anchors use; its `go` keeps only the last
scored line, so the teacher adds one call that returns every `info` line of a search (for MultiPV).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

from dlzero.data.hcpe import legal_move16s
from dlzero.play.usi_client import UsiClient, UsiClientError
from dlzero.search.result import EVAL_COEF, MAX_CP
from dlzero.teacher.base import Label, Query, Teacher, TeacherError

log = logging.getLogger(__name__)

DEFAULT_GO = "btime 0 wtime 0 byoyomi 1000"
OUR_KEYS = ("go", "eval_scale", "temperature", "timeout")
# A mate in N scores MAX_CP - 100 N (N capped at 150): still a sure win, and with the default
# temperature of 100 cp the policy prefers the shorter of two mates by a factor e per ply.
MATE_PLY_CP = 100
MATE_PLIES_CAP = 150
PROVEN_CP = MAX_CP - MATE_PLY_CP * MATE_PLIES_CAP  # scores from here up announce a mate


def score_cp(tokens: list[str]) -> int | None:
    """The score of an `info` line in cp: `score cp N`, or `score mate N` as +-(MAX_CP - 100 |N|)."""
    if "score" not in tokens:
        return None
    i = tokens.index("score")
    kind, value = (tokens[i + 1:i + 3] + ["", ""])[:2]
    try:
        if kind == "cp":  # an engine's own mate values (GPS Shogi: 1148897) become MAX_CP
            return max(-MAX_CP, min(MAX_CP, int(value)))
        if kind == "mate":
            plies = min(int(value.lstrip("+-") or 0), MATE_PLIES_CAP)
            return (-1 if value.startswith("-") else 1) * (MAX_CP - MATE_PLY_CP * plies)
    except ValueError:
        return None
    return None


def _int_after(tokens: list[str], key: str) -> int | None:
    """The integer after `key` in an `info` line (`depth 12`, `multipv 2`); None if absent or not a number."""
    try:
        return int(tokens[tokens.index(key) + 1]) if key in tokens else None
    except (ValueError, IndexError):
        return None


def final_lines(infos: Sequence[str]) -> list[tuple[str, int]]:
    """(first pv move, cp) of each final line of a search, one per move, best first (see the module
    docstring): per `multipv` index its deepest line, its score capped by those above it; without an
    index, the lines of the last depth."""
    indexed: dict[int, tuple[int, str, int]] = {}  # multipv index -> (depth, move, cp) of its deepest line
    unindexed: dict[str, int] = {}  # move -> cp, lines of `last_depth` without an index
    last_depth = -1
    for line in infos:
        tokens = line.split()
        cp = score_cp(tokens)
        if cp is None or "lowerbound" in tokens or "upperbound" in tokens or "pv" not in tokens:
            continue
        pv = tokens.index("pv") + 1
        if pv == len(tokens):
            continue
        depth, index, move = _int_after(tokens, "depth") or 0, _int_after(tokens, "multipv"), tokens[pv]
        if index is not None:
            if index not in indexed or depth >= indexed[index][0]:
                indexed[index] = (depth, move, cp)
        elif depth >= last_depth:
            if depth > last_depth:  # a deeper iteration: the shallower lines are stale
                last_depth, unindexed = depth, {}
            unindexed[move] = cp
    ranked = [(move, cp) for _, (_, move, cp) in sorted(indexed.items())]
    ranked += sorted(unindexed.items(), key=lambda item: -item[1])
    final: dict[str, int] = {}
    cap = MAX_CP
    for move, cp in ranked:  # lines of two depths may name one move: its better-ranked line counts
        if move not in final:
            cap = final[move] = min(cap, cp)  # the engine's ranking stands (see the module docstring)
    return list(final.items())


def winrate(cp: float, scale: float) -> float:
    """Logistic win rate of a cp score (clipped so that mate scores at small scales do not overflow)."""
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, cp / scale))))


class UsiTeacher(Teacher):
    """A USI engine process, started on first use, asked one position at a time."""

    batch_size = 1  # an engine searches one position at a time: run more workers instead

    def __init__(self, command: str, options: Mapping[str, str] | None = None, go: str = DEFAULT_GO,
                 eval_scale: float = EVAL_COEF, temperature: float = 100.0, timeout_s: float = 60.0) -> None:
        if eval_scale <= 0 or temperature <= 0 or timeout_s <= 0:
            raise TeacherError("usi teacher: eval_scale, temperature and timeout must be positive")
        try:
            self._engine = UsiClient(command, name=f"usi:{command}", options=options, timeout_s=timeout_s)
        except UsiClientError as exc:
            raise TeacherError(str(exc)) from None
        self.name = f"usi:{command}"
        self.go = go
        self.eval_scale = eval_scale
        self.temperature = temperature
        self._new_game = True  # `usinewgame` before the first position (the engine starts then too)

    def close(self) -> None:
        self._engine.close()
        self._new_game = True

    def label(self, queries: Sequence[Query]) -> list[Label]:
        return [self._label(q) for q in queries]

    def _start(self) -> None:
        """Start the engine if needed (a start that fails, e.g. on an unknown option, is not retried)."""
        if self._new_game:
            try:
                self._engine.new_game()
            except UsiClientError as exc:
                self.close()
                raise TeacherError(str(exc)) from None
            self._new_game = False

    def _search(self, query: Query) -> tuple[list[str], str]:
        """The engine's answer (its info lines, its best move); an engine that died or hung is restarted
        and asked once more."""
        self._start()
        try:
            infos, reply = self._engine.search(query.usi(), self.go)
            return infos, (reply + [""])[1]
        except UsiClientError as exc:
            log.warning("%s; restarting the engine and asking again", exc)
            self.close()
        self._start()
        try:
            infos, reply = self._engine.search(query.usi(), self.go)
            return infos, (reply + [""])[1]
        except UsiClientError as exc:
            self.close()
            raise TeacherError(str(exc)) from None

    def _label(self, query: Query) -> Label:
        infos, best = self._search(query)
        lines = final_lines(infos)
        scored = dict(lines)
        # the eval: the move played's own line, else the best final line, else (no line: a book move) even
        cp_best = scored.get(best, lines[0][1] if lines else 0)
        if best == "win":
            return Label(None, 1.0, declared=True)
        if best == "resign":
            return Label(None, winrate(cp_best, self.eval_scale) if lines else 0.0)
        board = query.board
        legal = legal_move16s(board)
        move = board.move_from_usi(best) if best else 0
        if not move or (move & 0xFFFF) not in legal:
            self.close()
            raise TeacherError(f"{self.name}: answered the illegal move '{best}' in {board.sfen()}")
        policy: dict[int, float] = {}
        if len(scored) > 1:  # MultiPV lines: a soft policy; one line (or none) is one-hot on bestmove
            for usi, cp in scored.items():
                m = board.move_from_usi(usi) & 0xFFFF
                if m in legal:
                    policy[m] = math.exp(max(-50.0, min(50.0, (cp - cp_best) / self.temperature)))
        policy[move & 0xFFFF] = 1.0  # exp(0), also where the best move's own line was not seen
        total = sum(policy.values())
        proven = cp_best >= PROVEN_CP
        if proven:
            self.close()  # started again for the next position (see the module docstring)
        return Label(move & 0xFFFF, winrate(cp_best, self.eval_scale),
                     tuple((m, w / total) for m, w in policy.items()), proven=proven)
