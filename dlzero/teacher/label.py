"""Labelling one part: games played by the teacher, or existing games relabelled, as hcpe3 games.

Teacher games run `batch_size` games in lockstep (one `label` call per ply across them). The first
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
from dlzero.data.hcpe3 import Hcpe3Game
from dlzero.game_end import END_DECLARATION, END_MATE, GameRules, Verdict, game_end
from dlzero.play.game import END_RESIGN, play_rules
from dlzero.play.record import opening_record, result_byte
from dlzero.position import parse_position, start_position
from dlzero.teacher.base import Label, Query, Teacher, move_record
from dlzero.teacher.sources import SourceGame

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


class _TeacherGame:
    """One of the teacher's games in progress."""

    def __init__(self, line: str) -> None:
        self.board = parse_position(line)
        self.start_sfen = start_position(self.board)
        self.record = opening_record(self.board)  # the suite's plies, replay-only
        self.teacher_plies = 0

    def play(self, label: Label, rng: np.random.Generator, settings: PlaySettings, rules: GameRules) -> bool:
        """Record the labelled ply and play a move; True when the game is over (result set)."""
        board = self.board
        if label.move16 is None:  # resigned, or declared a win
            self.record.result = result_byte(Verdict(board.turn, END_DECLARATION) if label.declared
                                             else Verdict(1 - board.turn, END_RESIGN))
            return True
        move16 = label.move16
        if self.teacher_plies < settings.sample_plies and len(label.policy) > 1 and not label.proven:
            probs = np.array([p for _, p in label.policy])
            move16 = label.policy[rng.choice(len(probs), p=probs / probs.sum())][0]
        self.record.moves.append(move_record(label, move16))
        board.push(board.move_from_move16(move16))
        self.teacher_plies += 1
        verdict = game_end(board, rules)
        if verdict is not None:
            self.record.result = result_byte(verdict)
        elif label.proven:  # the teacher sees a mate: the game is won for the side that just moved
            self.record.result = result_byte(Verdict(1 - board.turn, END_MATE))
        return verdict is not None or label.proven


def _new_game(openings: Sequence[str], rng: np.random.Generator, rules: GameRules) -> _TeacherGame:
    """A game from a random suite line that is not already over."""
    for _ in range(100):
        game = _TeacherGame(openings[int(rng.integers(len(openings)))])
        if game_end(game.board, rules) is None:
            return game
    raise ValueError("the opening suite's lines are finished games")


def play_teacher_games(teacher: Teacher, openings: Sequence[str], n_games: int, seed: int, settings: PlaySettings,
                       report: Report) -> tuple[list[Hcpe3Game], int]:

    """`n_games` games of the teacher against itself: (the games with at least one ply, positions labelled)."""
    rng = np.random.default_rng(seed)
    rules = play_rules(settings.max_moves, settings.declaration)
    lockstep = max(1, min(n_games, teacher.batch_size))
    active: list[_TeacherGame] = []
    done: list[Hcpe3Game] = []
    started = positions = 0
    while started < n_games or active:
        while len(active) < lockstep and started < n_games:
            active.append(_new_game(openings, rng, rules))
            started += 1
        labels = label_positions(teacher, [Query(g.start_sfen, g.board) for g in active])
        still = []
        for game, label in zip(active, labels, strict=True):
            positions += label.move16 is not None
            if not game.play(label, rng, settings, rules):
                still.append(game)
            elif game.teacher_plies:  # a game the teacher resigned at once holds no label: nothing to train on
                done.append(game.record)
        report(sum(label.move16 is not None for label in labels))
        active = still
    return done, positions


def relabel_games(teacher: Teacher, games: Sequence[SourceGame], report: Report) -> tuple[list[Hcpe3Game], int]:
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
    out: list[Hcpe3Game] = []
    it = iter(labels)  # a label without a move (resigned, declared) gives a ply without candidates
    for game in games:
        record = Hcpe3Game.from_board(cshogi.Board(game.start_sfen))
        record.result = game.result
        record.moves = [move_record(next(it), move16) for move16 in game.moves]
        out.append(record)
    return out, sum(label.move16 is not None for label in labels)
