"""The game-end rules, once (`dlzero.game_end`), and the three callers that use them.

The same positions go through the search leaf (`leaf_result`), every game played (self-play and
matches: `dlzero.play.play_rules`, with the hcpe3 `result_byte` self-play and the teacher store) and
the engine (`root_checks`); where their rules agree they must agree on the verdict, and where they
differ by design (repetition count, move cap) the difference is asserted.
"""

from __future__ import annotations

import cshogi
import pytest

from dlzero.config import SearchConfig
from dlzero.data.hcpe3 import BLACK_WIN, FLAG_MAX_MOVES, FLAG_NYUGYOKU, FLAG_REPETITION, RESULT_DRAW, WHITE_WIN
from dlzero.engine.player import root_checks
from dlzero.game_end import GameRules, Verdict, can_declare, earlier_occurrences, game_end, leaf_value
from dlzero.play import play_rules
from dlzero.play.record import result_byte
from dlzero.position import parse_position
from dlzero.search.rules import leaf_result

B, W = cshogi.BLACK, cshogi.WHITE
CYCLE = " 5i5h 5a5b 5h5i 5b5a"  # both kings step out and back: the start position again
# White's king shuttles 5a<->4a; Black's rook follows it with check every time.
CHECKS = "sfen 4k4/9/9/9/4R4/9/9/9/K8 w - 1 moves"
CHECK_CYCLE = " 5a4a 5e4e 4a5a 4e5e"
# Black's king in the enemy camp with ten tokins there; the hand decides the points.
BLACK_CAMP = "+P+P+P+P1+P+P+P+P/7+P+P/4K4/9/9/9/9/9/4k4 b {hand} 1"
WHITE_CAMP = "4K4/9/9/9/9/9/4k4/+p+p7/+p+p+p+p1+p+p+p+p w {hand} 1"

# name, position, verdict under sennichite rules (self-play/arena), verdict at a search leaf
CASES = [
    ("ordinary", "startpos moves 7g7f 3c3d", None, None),
    ("mated", "sfen 4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1", Verdict(B, "mate"), Verdict(B, "mate")),
    ("mated past the cap", "sfen 4k4/4G4/4P4/9/9/9/9/9/4K4 w - 300", Verdict(B, "mate"), Verdict(B, "mate")),
    ("first repetition", "startpos moves" + CYCLE, None, Verdict(None, "repetition")),
    ("fourth occurrence", "startpos moves" + CYCLE * 3, Verdict(None, "repetition"), Verdict(None, "repetition")),
    ("perpetual check once", CHECKS + CHECK_CYCLE, None, Verdict(W, "perpetual_check")),
    ("perpetual check x4", CHECKS + CHECK_CYCLE * 3, Verdict(W, "perpetual_check"), Verdict(W, "perpetual_check")),
    ("declaration 30 points", "sfen " + BLACK_CAMP.format(hand="2R2B"), Verdict(B, "declaration"),
     Verdict(B, "declaration")),
    ("declaration too few", "sfen " + BLACK_CAMP.format(hand="2RB"), None, None),
    ("move cap", "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 300",
     Verdict(None, "max_moves"), Verdict(None, "max_moves")),
]
MAX_MOVES = 256
DRAW_BLACK, DRAW_WHITE = 0.3, 0.6  # distinct, so the test sees whose draw value was used


def _search_cfg(rule: str = "27") -> SearchConfig:
    return SearchConfig(max_moves=MAX_MOVES, leaf_mate_depth=0, draw_value_black=DRAW_BLACK,
                        draw_value_white=DRAW_WHITE, entering_king_rule=rule)


def _expected_value(verdict: Verdict | None, board: cshogi.Board) -> float | None:
    """A verdict as the search must score it, worked out here independently of the module."""
    if verdict is None:
        return None
    if verdict.winner is None:  # the draw value of the player who moved into the draw
        return 1.0 - (DRAW_BLACK if board.turn == W else DRAW_WHITE)
    return 1.0 if verdict.winner == board.turn else 0.0


@pytest.mark.parametrize(("name", "position", "game", "leaf"), CASES, ids=[c[0] for c in CASES])
def test_four_callers_agree(name: str, position: str, game: Verdict | None, leaf: Verdict | None) -> None:
    board = parse_position(position)
    n_legal = len(list(board.legal_moves))
    sfen_before, history_before = board.sfen(), list(board.history)

    # search leaf: the first repetition already ends the line
    assert leaf_result(board, _search_cfg(), n_legal) == _expected_value(leaf, board)

    # every game played (self-play and matches): sennichite rules, the move cap; self-play and the
    # teacher store the verdict as an hcpe3 result byte
    played = game_end(board, play_rules(MAX_MOVES, "27"))
    assert played == game
    if game is not None:
        win = {None: RESULT_DRAW, B: BLACK_WIN, W: WHITE_WIN}[game.winner]
        flag = {"repetition": FLAG_REPETITION, "perpetual_check": FLAG_REPETITION, "max_moves": FLAG_MAX_MOVES,
                "declaration": FLAG_NYUGYOKU}
        assert result_byte(played) == win | flag.get(game.reason, 0)

    # engine: repetition and the move cap are the GUI's; mate and declaration are its own
    settled = root_checks(board, 0)
    if game is not None and game.reason == "mate":
        assert settled is not None and settled.bestmove == "resign"
    elif game is not None and game.reason == "declaration":
        assert settled is not None and settled.bestmove == "win"
    else:
        assert settled is None
    assert board.sfen() == sfen_before and list(board.history) == history_before  # the rules leave the board be


def test_declaration_rules_by_points() -> None:
    """27-point rule: Black needs 28, White 27; 24-point rule: 31 for both (10 tokins = 10 points)."""
    black_27 = parse_position("sfen " + BLACK_CAMP.format(hand="2RB2G"))  # 10 + 15 + 2 = 27
    white_27 = parse_position("sfen " + WHITE_CAMP.format(hand="2rb2g"))
    assert not can_declare(black_27, "27") and can_declare(white_27, "27")
    black_30 = parse_position("sfen " + BLACK_CAMP.format(hand="2R2B"))  # 30
    black_31 = parse_position("sfen " + BLACK_CAMP.format(hand="2R2BG"))  # 31
    white_31 = parse_position("sfen " + WHITE_CAMP.format(hand="2r2bg"))
    assert can_declare(black_30, "27") and not can_declare(black_30, "24")
    assert can_declare(black_31, "24") and can_declare(white_31, "24")
    assert not any(can_declare(b, "none") for b in (black_30, black_31, white_31))
    # the rule reaches every caller through the config
    assert leaf_result(black_30, _search_cfg("24"), 1) is None
    assert leaf_result(black_30, _search_cfg("27"), 1) == 1.0
    assert game_end(black_30, play_rules(MAX_MOVES, "24")) is None
    assert root_checks(black_30, 0, "24") is None and root_checks(black_30, 0).bestmove == "win"


def test_declaration_needs_the_king_out_of_check() -> None:
    checked = parse_position("sfen +P+P+P+P1+P+P+P+P/4g2+P+P/4K4/9/9/9/9/9/4k4 b 2R2BG 1")
    assert checked.is_check() and not can_declare(checked, "24") and not can_declare(checked, "27")


def test_superior_repetition_is_a_search_shortcut_only() -> None:
    # White's king takes a dropped pawn and both kings return: the same board, White a pawn richer
    board = parse_position("sfen 4k4/9/9/9/9/9/9/9/4K4 w P 1 moves 5a4a P*4b 4a4b 5i5h 4b5a 5h5i")
    assert board.is_draw(16) == cshogi.REPETITION_SUPERIOR
    assert game_end(board, GameRules(superior_repetition=True)) == Verdict(W, "superior_repetition")
    assert leaf_result(board, _search_cfg(), 1) == 1.0
    assert game_end(board, GameRules(repetitions=1)) is None  # not a rule of the game
    assert game_end(board, play_rules(MAX_MOVES, "27")) is None


def test_repetition_count_and_off_switch() -> None:
    board = parse_position("startpos moves" + CYCLE * 3)
    assert earlier_occurrences(board) == 3
    assert game_end(board, GameRules(repetitions=0)) is None
    assert game_end(board, GameRules(repetitions=3)) == Verdict(None, "repetition")
    twice = parse_position("startpos moves" + CYCLE * 2)
    assert earlier_occurrences(twice) == 2 and game_end(twice, GameRules(repetitions=3)) is None


def test_leaf_value_is_zero_sum_by_mover() -> None:
    rules = GameRules(repetitions=1, draw_value_black=0.2, draw_value_white=0.7)
    after_black = parse_position("startpos moves" + CYCLE[:-5])  # White's move closes the cycle next
    drawn_by_white = parse_position("startpos moves" + CYCLE)     # White moved into the draw; Black to move
    assert leaf_value(after_black, rules) is None
    assert leaf_value(drawn_by_white, rules) == pytest.approx(1.0 - 0.7)


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="declaration"):
        GameRules(declaration="26")
    with pytest.raises(ValueError, match="repetitions"):
        GameRules(repetitions=4)


def test_a_long_cycle_still_ends_at_its_fourth_occurrence() -> None:
    # each rook walks a 6-move loop along its own rank: the start position every 12 plies, so its
    # fourth occurrence is 36 plies in, beyond any fixed 16- or 32-ply window
    loop = " 2h3h 8b7b 3h4h 7b6b 4h5h 6b5b 5h6h 5b4b 6h7h 4b3b 7h2h 3b8b"
    assert parse_position("startpos moves" + loop).sfen().split()[:3] == parse_position("startpos").sfen().split()[:3]
    board = parse_position("startpos moves" + loop * 3)
    assert earlier_occurrences(board, len(board.history)) == 3
    assert game_end(board, GameRules(repetitions=3)) == Verdict(None, "repetition")
    assert game_end(board, play_rules(MAX_MOVES, "27")) == Verdict(None, "repetition")
    assert game_end(parse_position("startpos moves" + loop * 2), GameRules(repetitions=3)) is None
