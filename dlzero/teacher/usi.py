"""Any USI engine as a teacher: `usi:COMMAND[;Option=value...]`.

Per position the engine gets `position ...` (the game's start and every move since, so it sees
repetitions) and `go GO`, and we read its `info` lines until `bestmove`. The eval is the score of the
engine's best move (cp, or mate N as +-(30000 - 100 N)); its win rate is the logistic curve
p = 1 / (1 + exp(-cp / eval_scale)) with dlshogi's scale 756 unless the spec says otherwise.

Soft policy: every `info ... score ... pv M ...` line scores its first move M (the latest line at the
deepest depth wins), which covers both `MultiPV` (Stockfish, YaneuraOu: `multipv k` lines) and
GPS Shogi's `MultiPVWidth` (a line per root move within that many cp of the best). The policy is
softmax((cp_M - cp_best) / temperature) over those moves; an engine that reports only its best line
gives a one-hot policy on its move.

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
`dlzero.gating.usi_client.UsiEngine`, the client the rating anchors use; its `go` keeps only the last
scored line, so the teacher adds one call that returns every `info` line of a search (for MultiPV).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

from dlzero.data.hcpe import legal_move16s
from dlzero.gating.usi_client import UsiEngine, UsiEngineError
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


def _depth(tokens: list[str]) -> int:
    try:
        return int(tokens[tokens.index("depth") + 1]) if "depth" in tokens else 0
    except (ValueError, IndexError):
        return 0


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
            self._engine = UsiEngine(command, name=f"usi:{command}", options=options, timeout_s=timeout_s)
        except UsiEngineError as exc:
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
            except UsiEngineError as exc:
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
        except UsiEngineError as exc:
            log.warning("%s; restarting the engine and asking again", exc)
            self.close()
        self._start()
        try:
            infos, reply = self._engine.search(query.usi(), self.go)
            return infos, (reply + [""])[1]
        except UsiEngineError as exc:
            self.close()
            raise TeacherError(str(exc)) from None

    def _label(self, query: Query) -> Label:
        infos, best = self._search(query)
        scored: dict[str, tuple[int, int]] = {}  # first pv move -> (depth, cp)
        last_cp: int | None = None
        for line in infos:
            tokens = line.split()
            cp = score_cp(tokens)
            if cp is None:
                continue
            last_cp = cp
            if "pv" in tokens and tokens.index("pv") + 1 < len(tokens):
                move, depth = tokens[tokens.index("pv") + 1], _depth(tokens)
                if move not in scored or depth >= scored[move][0]:
                    scored[move] = (depth, cp)
        if best == "win":
            return Label(None, 1.0, declared=True)
        if best == "resign":
            return Label(None, 0.0 if last_cp is None else winrate(last_cp, self.eval_scale))
        board = query.board
        legal = legal_move16s(board)
        move = board.move_from_usi(best) if best else 0
        if not move or (move & 0xFFFF) not in legal:
            self.close()
            raise TeacherError(f"{self.name}: answered the illegal move '{best}' in {board.sfen()}")
        cp_best = scored[best][1] if best in scored else (last_cp or 0)
        policy: dict[int, float] = {}
        for usi, (_, cp) in scored.items():
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
