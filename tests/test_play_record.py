"""How a played game is stored (`dlzero.play.record`): the result byte of every way a game ends, the
opening record, and self-play and the teacher storing the same game the same way."""

from __future__ import annotations

from collections.abc import Sequence

import cshogi
import numpy as np
import pytest
from conftest import TINY_MODEL_SETS

import dlzero.game_end
from dlzero.config import load_config
from dlzero.data.hcpe3 import BLACK_WIN, FLAG_MAX_MOVES, FLAG_NYUGYOKU, FLAG_REPETITION, RESULT_DRAW, WHITE_WIN
from dlzero.game_end import GameRules, Verdict, game_end
from dlzero.inference import load_model
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.play import END_RESIGN, play_rules
from dlzero.play.record import opening_record, result_byte
from dlzero.position import parse_position
from dlzero.selfplay.games import END_MATE_FOUND, FinishedRecord, play_selfplay_games
from dlzero.teacher import Label, Query, Teacher
from dlzero.teacher.label import PlaySettings, play_teacher_games

B, W = cshogi.BLACK, cshogi.WHITE
RULES = play_rules(320, "27")
# White's king at 1a has one square to go to each time Black's rook checks it (2b2a, 2a2b; the gold
# on 3b guards the rook, the pawn on 1d takes 1c away): the king's forced reply 1b1a to the last check
# makes the fourth occurrence of the cycle's start, with Black, who gave every check, to move.
PERPETUAL = "sfen 8k/6GR1/9/8P/9/9/9/9/K8 b - 1 moves" + " 2b2a 1a1b 2a2b 1b1a" * 3
BEFORE_PERPETUAL = PERPETUAL.removesuffix(" 1b1a")  # White to move, its only move 1b1a ends the game


def _verdict(position: str, rules: GameRules = RULES) -> Verdict:
    verdict = game_end(parse_position(position), rules)
    assert verdict is not None, position
    return verdict


def test_mate_stores_the_winner_alone():
    verdict = _verdict("sfen 4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1")
    assert verdict == Verdict(B, "mate") and result_byte(verdict) == BLACK_WIN


def test_a_repetition_draw_stores_the_repetition_flag():
    verdict = _verdict("startpos moves" + " 5i5h 5a5b 5h5i 5b5a" * 3)
    assert verdict == Verdict(None, "repetition") and result_byte(verdict) == RESULT_DRAW | FLAG_REPETITION


def test_perpetual_check_stores_the_checked_side_as_winner_and_the_repetition_flag():
    verdict = _verdict(PERPETUAL)
    assert verdict == Verdict(W, "perpetual_check")  # Black gave every check: Black loses
    assert result_byte(verdict) == WHITE_WIN | FLAG_REPETITION


def test_a_superior_repetition_stores_the_winner_and_the_repetition_flag():
    # only a search ends a game this way (`play_rules` do not): White drops a pawn, Black's rook takes
    # it and goes back, Black's king triangulates, White's king steps out and back: the same board with
    # Black to move and a pawn more in hand
    moves = " 5i4h P*9e 9i9e 5a5b 9e9i 5b5a 4h4i 5a5b 4i5i 5b5a"
    position = "sfen 4k4/9/9/9/9/9/9/9/R3K4 b p 1 moves" + moves
    verdict = _verdict(position, GameRules(repetitions=1, superior_repetition=True))
    assert verdict == Verdict(B, "superior_repetition") and result_byte(verdict) == BLACK_WIN | FLAG_REPETITION
    assert game_end(parse_position(position), RULES) is None


def test_a_declaration_stores_the_declarer_and_the_declaration_flag():
    verdict = _verdict("sfen +P+P+P+P1+P+P+P+P/7+P+P/4K4/9/9/9/9/9/4k4 b 2R2B 1")
    assert verdict == Verdict(B, "declaration") and result_byte(verdict) == BLACK_WIN | FLAG_NYUGYOKU


def test_the_move_cap_stores_a_draw_and_the_move_cap_flag():
    verdict = _verdict("sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 321")
    assert verdict == Verdict(None, "max_moves") and result_byte(verdict) == RESULT_DRAW | FLAG_MAX_MOVES


def test_a_resignation_stores_the_winner_alone():
    assert result_byte(Verdict(W, END_RESIGN)) == WHITE_WIN
    assert result_byte(Verdict(B, END_RESIGN)) == BLACK_WIN


def test_every_way_the_rules_end_a_game_is_decided_here():
    """A new reason in `dlzero.game_end` needs a decision (and a test above), not the default of no flag."""
    reasons = {v for k, v in vars(dlzero.game_end).items() if k.startswith("END_")}
    tested = {"mate", "repetition", "perpetual_check", "superior_repetition", "declaration", "max_moves"}
    assert reasons == tested


def test_the_opening_record_starts_where_the_line_starts_with_replay_only_plies():
    board = parse_position("startpos moves 7g7f 3c3d 2g2f")
    record = opening_record(board)
    assert record.start_board().sfen() == cshogi.Board().sfen()
    assert [m.move16 for m in record.moves] == [cshogi.move16(m) for m in board.history]
    assert not any(m.is_target for m in record.moves)
    assert len(board.history) == 3  # the board is left as it was
    sfen_line = parse_position("sfen 8k/6GR1/9/8P/9/9/9/9/K8 b - 1")
    assert opening_record(sfen_line).start_board().sfen() == sfen_line.sfen() and not opening_record(sfen_line).moves


class _FirstMove(Teacher):
    """A teacher that plays the first legal move (the game below leaves one) as a sure thing."""

    name = "first-move"

    def label(self, queries: Sequence[Query]) -> list[Label]:
        labels = []
        for query in queries:
            move16 = cshogi.move16(next(iter(query.board.legal_moves)))
            labels.append(Label(move16, 0.5, ((move16, 1.0),)))
        return labels

    def close(self) -> None:
        pass


def test_selfplay_and_the_teacher_store_a_perpetual_check_alike(tmp_path):
    """The same game, played to its end by self-play's search and by a teacher: the same result byte.
    (The teacher used to flag it as a repetition and self-play not.)"""
    openings = tmp_path / "perpetual.txt"
    openings.write_text(BEFORE_PERPETUAL + "\n", encoding="utf-8")
    cfg = load_config(None, [*TINY_MODEL_SETS, "inference.backend=torch",
                             "inference.optimize=none", "inference.threads=1", "selfplay.playouts=4",
                             "selfplay.cheap_playouts=2", "selfplay.games_in_parallel=1",
                             "selfplay.resign_threshold=0", f"selfplay.openings={openings}"])
    evaluator = load_model(save_model(new_model(cfg.model, seed=0), tmp_path / "m.pt", ModelMetadata()), cfg.inference)
    selfplay: list[FinishedRecord] = []
    play_selfplay_games(evaluator, cfg, 1, selfplay.append, np.random.default_rng(0))
    games, positions = play_teacher_games(_FirstMove(), [BEFORE_PERPETUAL], 1, 0,
                                          PlaySettings(sample_plies=0, max_moves=cfg.selfplay.max_moves),
                                          lambda _: None)

    assert [g.reason for g in selfplay] == ["perpetual_check"] and len(games) == 1 and positions == 1
    ours, theirs = selfplay[0].record, games[0]
    assert ours.result == theirs.result == WHITE_WIN | FLAG_REPETITION
    assert [m.move16 for m in ours.moves] == [m.move16 for m in theirs.moves]  # the same game, from the same start
    assert (ours.start_hcp == theirs.start_hcp).all()


@pytest.mark.parametrize("reason", ["mate", END_RESIGN, END_MATE_FOUND])
def test_ends_without_a_rule_of_their_own_store_no_flag(reason):
    assert result_byte(Verdict(B, reason)) == BLACK_WIN
