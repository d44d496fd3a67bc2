"""Labelling one part: games played by the teacher, or existing games relabelled, as hcpe3 games.

Teacher games are played as every game is, on `dlzero.play`'s driver (`play_lockstep`): the teacher is
a player (`TeacherPlayer`) of `batch_size` games at once (one `label` call per ply across them). The first
`sample_plies` teacher moves of a game are drawn from its policy (a teacher whose policy is one-hot,
a USI engine without MultiPV, plays its move), later ones are its best move. A game ends by the
rules every game goes by (`dlzero.play.play_rules`: mate, sennichite at the fourth occurrence,
declaration, the move cap), or when the teacher resigns, declares, or announces a mate (the mover
wins: the plies left to mate would teach little). Every teacher ply is a training target: its policy
as counts, its win rate as the eval; the result is the game's, stored as self-play stores it
(`dlzero.play.record`: the result byte and the opening's replay-only plies).

A position with a mate in one ply is not asked: cshogi's mate search labels it (the mating move,
a sure win, `proven`). That is what any teacher should say there (miniosl's network, without search,
misses some), and it spares GPS Shogi the root mates after which it needs a restart (`usi`).

Relabelled games keep their moves and result; every ply gets the teacher's policy and eval. A ply
where the teacher resigned or declared keeps its move as a replay-only ply (no candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cshogi
import numpy as np

from dlzero.config import SearchConfig, SelfplayConfig
from dlzero.data.hcpe3 import Hcpe3Record
from dlzero.game_end import END_DECLARATION, END_MATE, GameRules, Verdict, game_end
from dlzero.play import Game, play_lockstep, play_rules
from dlzero.play.record import opening_record, result_byte
from dlzero.position import parse_position, start_position
from dlzero.teacher.base import Label, Query, Teacher, move_record
from dlzero.teacher.sources import SourceRecord

Report = Callable[[int], None]  # told how many positions were just labelled


@dataclass(frozen=True)
class PlaySettings:
    """How the teacher's own games go (the rules are those of dlzero's self-play).

    The defaults are the config's own defaults of those keys, so the two cannot drift apart."""

    sample_plies: int = SelfplayConfig.random_plies  # teacher moves per game drawn from its policy
    max_moves: int = SelfplayConfig.max_moves  # the move number at which a game is a draw
    declaration: str = SearchConfig.entering_king_rule  # entering-king rule


def _mate_in_one(board: cshogi.Board) -> int:
    """A move that mates at once, or 0. cshogi's mate search assumes the side to move is not in check
    (in check it can answer an illegal drop), so positions in check get 0, and the answer is checked."""
    mate = 0 if board.is_check() else board.mate_move_in_1ply()
    if not mate or mate not in board.legal_moves:
        return 0
    board.push(mate)
    mated = board.is_game_over()
    board.pop()
    return mate if mated else 0


def label_positions(teacher: Teacher, queries: Sequence[Query]) -> list[Label]:
    """The teacher's labels of `queries`, but cshogi's for positions (not in check) with a mate in one ply."""
    labels: list[Label | None] = []
    ask: list[int] = []
    for i, query in enumerate(queries):
        mate = _mate_in_one(query.board)
        labels.append(Label(mate & 0xFFFF, 1.0, ((mate & 0xFFFF, 1.0),), proven=True) if mate else None)
        if not mate:
            ask.append(i)
    for i, label in zip(ask, teacher.label([queries[i] for i in ask]) if ask else [], strict=True):
        labels[i] = label
    return labels


@dataclass(eq=False, kw_only=True)
class TeacherGame(Game):
    """One of the teacher's games in progress (`dlzero.play.Game`: its board from the suite line's start)
    and its hcpe3 record so far. `serial` counts the games in the order they started."""

    start_sfen: str
    record: Hcpe3Record
    serial: int

    @classmethod
    def from_board(cls, board: cshogi.Board, serial: int) -> TeacherGame:
        """A game from `board`, a suite line's position: its history is the opening (replay-only plies)."""
        return cls(board, opening_plies=len(board.history), start_sfen=start_position(board),
                   record=opening_record(board), serial=serial)

    def finished(self) -> Hcpe3Record:
        """The record, its result set from how the game ended (once `end` is set)."""
        self.record.result = result_byte(self.end)
        return self.record


class TeacherPlayer:
    """The teacher as a player (`dlzero.play.MoveChooser`) of both sides of its games: one
    `label_positions` call per ply across every game it is to move in, each ply recorded as a
    training target before its move is played.

    The games are labelled, and the sampled moves drawn from `rng`, in the order the games started,
    not in the order of the driver's slots (where a new game takes a finished one's place), so a
    seed gives the same games however the slots fall. A label without a move ends the game: a
    declaration win for the side to move, or (no `end` set) its resignation. A proven label ends the
    game with its move as a win for the mover, unless the rules end it there first (the move cap, a
    fourth occurrence): the rules come first, as for every move.
    """

    def __init__(self, teacher: Teacher, sample_plies: int, rules: GameRules, rng: np.random.Generator,
                 report: Report) -> None:
        self.name = teacher.name
        self.teacher = teacher
        self.sample_plies = sample_plies
        self.rules = rules
        self.rng = rng
        self.report = report
        self.steps = 0  # `choose` calls: plies played in lockstep
        self.positions = 0  # labels with a move: the training targets recorded

    def choose(self, games: Sequence[TeacherGame]) -> list[int | None]:
        """Label every game's position (in one call), record the plies and return the moves."""
        order = sorted(range(len(games)), key=lambda i: games[i].serial)
        labels = label_positions(self.teacher, [Query(games[i].start_sfen, games[i].board) for i in order])
        moves: list[int | None] = [None] * len(games)
        for i, label in zip(order, labels, strict=True):
            moves[i] = self._move(games[i], label)
        labelled = sum(label.move16 is not None for label in labels)
        self.steps += 1
        self.positions += labelled
        self.report(labelled)
        return moves

    def _move(self, game: TeacherGame, label: Label) -> int | None:
        """Record the labelled ply and return the move to play (the first `sample_plies` drawn from the
        policy), or None when the teacher resigned or declared."""
        board = game.board
        if label.move16 is None:
            if label.declared:
                game.end = Verdict(board.turn, END_DECLARATION)
            return None
        move16 = label.move16
        if game.played < self.sample_plies and len(label.policy) > 1 and not label.proven:
            probs = np.array([p for _, p in label.policy])
            move16 = label.policy[self.rng.choice(len(probs), p=probs / probs.sum())][0]
        game.record.moves.append(move_record(label, move16))
        move = board.move_from_move16(move16)
        if label.proven:  # the teacher sees a mate: the plies left to it would teach little
            board.push(move)
            by_rules = game_end(board, self.rules)
            board.pop()
            if by_rules is None:
                game.end = Verdict(board.turn, END_MATE)
        return move


def play_teacher_games(teacher: Teacher, openings: Sequence[str], n_games: int, seed: int, settings: PlaySettings,
                       report: Report) -> tuple[list[Hcpe3Record], int]:
    """`n_games` games of the teacher against itself, `teacher.batch_size` at a time on the driver
    (`dlzero.play.play_lockstep`): (the games with at least one ply, positions labelled).

    Each game starts at a random suite line that is not already over. The games come back in the
    order they ended, those that ended at the same step of the driver in the order they started (not
    in the order of the slots they ended in)."""
    rng = np.random.default_rng(seed)
    rules = play_rules(settings.max_moves, settings.declaration)
    player = TeacherPlayer(teacher, settings.sample_plies, rules, rng, report)
    started = 0
    ended: list[tuple[int, int, Hcpe3Record]] = []  # (step, serial, record)

    def start() -> TeacherGame | None:
        nonlocal started
        if started >= n_games:
            return None
        started += 1
        for _ in range(100):
            board = parse_position(openings[int(rng.integers(len(openings)))])
            if game_end(board, rules) is None:
                return TeacherGame.from_board(board, started)
        raise ValueError("the opening suite's lines are finished games")

    def on_end(game: TeacherGame) -> None:
        if game.played:  # a game the teacher resigned at once holds no label: nothing to train on
            ended.append((player.steps, game.serial, game.finished()))

    play_lockstep([player], start, on_end, rules, parallel=max(1, min(n_games, teacher.batch_size)),
                  reuse_trees=False)
    ended.sort(key=lambda e: e[:2])
    return [record for _, _, record in ended], player.positions


def relabel_games(teacher: Teacher, games: Sequence[SourceRecord], report: Report) -> tuple[list[Hcpe3Record], int]:
    """Every ply of `games` labelled by the teacher: (the games, positions labelled)."""
    queries: list[Query] = []
    for game in games:
        board = cshogi.Board(game.start_sfen)
        for move16 in game.moves:
            queries.append(Query(game.start_sfen, board.copy()))
            board.push(board.move_from_move16(move16))
    labels: list[Label] = []
    step = max(teacher.batch_size, 16)
    for start in range(0, len(queries), step):
        labels += label_positions(teacher, queries[start:start + step])
        report(len(labels) - start)
    out: list[Hcpe3Record] = []
    it = iter(labels)  # a label without a move (resigned, declared) gives a ply without candidates
    for game in games:
        record = Hcpe3Record.from_board(cshogi.Board(game.start_sfen))
        record.result = game.result
        record.moves = [move_record(next(it), move16) for move16 in game.moves]
        out.append(record)
    return out, sum(label.move16 is not None for label in labels)
