"""Position parsing and validation (dlzero.position), and the legal move sets it relies on."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import cshogi
import pytest
import shogi
from randpos import MANY_DROPS_SFENS, random_histories, random_sfens

from dlzero.errors import DlzeroError, PositionError
from dlzero.position import (
    STARTPOS_SFEN,
    board_from_sfen,
    parse_position,
    position_string,
    push_usi_move,
    start_board,
    start_position,
    validate_sfen,
)

START = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL"

# (SFEN, a fragment the error message must contain). Those marked "abort" make cshogi 1.1.0's
# set_sfen abort the whole process (std::terminate) when given to it directly.
BAD_SFENS = [
    ("", "3 or 4 fields"),
    (START, "3 or 4 fields"),
    (f"{START} b - 1 1", "3 or 4 fields"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "9 ranks"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "9 ranks"),
    ("lnsgkgsnl/1r6b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "covers 10 files"),  # abort
    ("lnsgkgsnl/1r5b/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "covers 8 files"),
    ("lnsgkgsnx/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "unknown piece 'x'"),  # abort
    ("lnsgkgsn+/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "ends with '+'"),  # abort
    ("lnsgkgsnl/1r5b1/ppppppppp/9/4+G4/9/PPPPPPPPP/1B5R1/LNSGKGSN1 b - 1", "cannot be promoted"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/4+K4/9/PPPPPPPPP/1B5R1/LNSG1GSNL b - 1", "cannot be promoted"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/09/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "from 1 to 9"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - \u00b2", "non-ASCII"),
    ("lnsgkgsnl/1r5b1/ppppppppp/\u0669/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "non-ASCII"),
    (f"{START} b \u0662p 1", "non-ASCII"),
    (f"{START} x - 1", "side to move"),  # abort
    (f"{START} B - 1", "side to move"),
    (f"{START} b 2 1", "hands '2'"),
    (f"{START} b P2 1", "hands 'P2'"),
    (f"{START} b 0P 1", "at least 1"),
    (f"{START} b K 1", "hands 'K'"),
    (f"{START} b x 1", "hands 'x'"),
    ("4k4/9/9/9/9/9/9/9/4K4 b PP 1", "'P' is listed twice"),  # cshogi would read one pawn
    ("4k4/9/9/9/9/9/9/9/4K4 b 2P3Pp 1", "'P' is listed twice"),  # cshogi would read three
    (f"{START} b - 0", "move number"),
    (f"{START} b - -3", "move number"),
    (f"{START} b - abc", "move number"),
    (f"{START} b - 1.5", "move number"),
    (f"{START} b - 2147483647", "move number"),  # issue 52: was accepted, and cshogi's C int overflowed
    (f"{START} b - 1000001", "move number"),
    ("9/9/9/9/4k4/4K4/9/9/9 b - 1", "kings stand next to each other"),  # issue 52: bestmove played 5f5e (KxK)
    ("9/9/9/9/3k5/4K4/9/9/9 w - 1", "kings stand next to each other"),
    ("4k4/4R4/9/9/9/9/9/9/4K4 b - 1", "the side not to move is in check"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/4R4/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "3 pieces of kind 'R'"),
    (f"{START} b R 1", "3 pieces of kind 'R'"),
    (f"{START} b P 1", "19 pieces of kind 'P'"),
    (f"{START} b 9P9p 1", "36 pieces of kind 'P'"),
    (f"{START} b 3G 1", "7 pieces of kind 'G'"),
    ("lnsg1gsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
     "one king per side (black 1, white 0)"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSG1GSNL b - 1",
     "one king per side (black 0, white 1)"),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/4K4/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1",
     "one king per side (black 2, white 1)"),
    ("4k4/9/9/9/9/9/9/9/4K4 b Kk 1", "hands 'Kk'"),
    ("P3k4/9/9/9/9/9/9/9/4K4 b - 1", "unpromoted 'P' on the last rank"),
    ("L3k4/9/9/9/9/9/9/9/4K4 b - 1", "unpromoted 'L' on the last rank"),
    ("4k4/9/9/9/9/9/9/9/p3K4 b - 1", "unpromoted 'p' on the last rank"),
    ("4k4/9/9/9/9/9/9/9/l3K4 w - 1", "unpromoted 'l' on the last rank"),
    ("N3k4/9/9/9/9/9/9/9/4K4 b - 1", "unpromoted 'N' on the last two ranks"),
    ("4k4/N8/9/9/9/9/9/9/4K4 b - 1", "unpromoted 'N' on the last two ranks"),
    ("4k4/9/9/9/9/9/9/n8/4K4 b - 1", "unpromoted 'n' on the last two ranks"),
    ("4k4/9/9/9/4P4/9/4P4/9/4K4 b - 1", "nifu"),
    ("4k4/9/3p5/9/9/9/3p5/9/4K4 w - 1", "file 6 (nifu)"),
    ("4k4/9/9/9/4R4/9/9/9/4K4 b - 1", "side not to move is in check"),
    ("4k4/9/9/9/9/9/9/9/4K3r w - 1", "side not to move is in check"),
    ("4k4/9/9/9/9/9/9/9/3gK4 w - 1", "side not to move is in check"),
]

GOOD_SFENS = [
    STARTPOS_SFEN,
    f"{START} w - 2",
    "+P3k4/9/9/9/9/9/9/9/4K4 b - 1",  # promoted pieces may stand anywhere
    "4k4/+N8/9/9/9/9/9/9/4K4 b - 1",
    "4k4/9/9/9/9/9/9/9/+p3K3+l b - 1",
    "4k4/9/9/9/4P4/9/4+P4/9/4K4 b - 1",  # a tokin does not count for nifu
    "4k4/9/9/9/4P4/9/4p4/9/4K4 b - 1",  # one pawn of each colour on a file is fine
    "4k4/9/9/9/9/9/9/9/4K3r b - 1",  # the side to move may be in check
    *MANY_DROPS_SFENS,
]


@pytest.mark.parametrize("sfen,fragment", BAD_SFENS)
def test_bad_sfen_names_the_problem(sfen, fragment):
    with pytest.raises(PositionError) as info:
        validate_sfen(sfen)
    assert fragment in str(info.value)
    assert isinstance(info.value, DlzeroError)
    for text in (f"sfen {sfen}", f"sfen {sfen} moves 7g7f"):
        with pytest.raises(PositionError):
            parse_position(text)


@pytest.mark.parametrize("sfen", GOOD_SFENS)
def test_good_sfens_parse_and_round_trip(sfen):
    board = board_from_sfen(sfen)
    assert board.sfen() == validate_sfen(sfen)
    assert parse_position(f"sfen {sfen}").sfen() == board.sfen()
    assert parse_position(sfen).sfen() == board.sfen()  # a bare SFEN works too


def test_hands_reach_cshogi_exactly():
    """Random hands in any letter order: what validation counted is what cshogi's board holds."""
    rng = random.Random(9)
    limits = {"R": 2, "B": 2, "G": 4, "S": 4, "N": 4, "L": 4, "P": 18}
    order = "PLNSGBR"  # cshogi's hand order
    for _ in range(300):
        counts = {(k, side): 0 for k in limits for side in (0, 1)}
        for kind, limit in limits.items():
            total = rng.randint(0, limit)
            black = rng.randint(0, total)
            counts[kind, 0], counts[kind, 1] = black, total - black
        items = [(k if side == 0 else k.lower(), n) for (k, side), n in counts.items() if n]
        rng.shuffle(items)
        hands = "".join((str(n) if n > 1 else "") + k for k, n in items) or "-"
        board = board_from_sfen(f"4k4/9/9/9/9/9/9/9/4K4 {rng.choice('bw')} {hands} 1")
        assert board.pieces_in_hand == tuple([counts[k, side] for k in order] for side in (0, 1)), hands


def test_sfen_without_move_number_is_normalised():
    assert validate_sfen(f"{START} b -") == f"{START} b - 1"
    assert validate_sfen(f"{START}   w   -   7 ") == f"{START} w - 7"


def test_random_positions_are_all_valid():
    for sfen in random_sfens(300, seed=3):
        assert validate_sfen(sfen) == sfen


def test_startpos_with_moves():
    board = parse_position("startpos moves 7g7f 3c3d 8h2b+ 3a2b B*4e")
    assert board.sfen() == "lnsgkg1nl/1r5s1/pppppp1pp/6p2/5B3/2P6/PP1PPPPPP/7R1/LNSGKGSNL w b 6"
    assert parse_position("startpos").sfen() == STARTPOS_SFEN
    assert parse_position("startpos moves").sfen() == STARTPOS_SFEN
    sfen = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 2"
    assert parse_position(f"sfen {sfen} moves 3c3d").sfen().startswith("lnsgkgsnl/1r5b1/pppppp1pp/6p2/")


def test_position_string_round_trip():
    for moves in random_histories(20, seed=4, max_ply=80):
        board = cshogi.Board()
        for m in moves:
            board.push(m)
        text = position_string(board)
        assert parse_position(text).sfen() == board.sfen()
    start = "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1"
    board = parse_position(f"sfen {start} moves P*5e")
    assert position_string(board, start) == f"sfen {start} moves P*5e"


def test_start_board_walks_back_to_the_first_position_and_leaves_the_board_alone():
    start = "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1"
    board = parse_position(f"sfen {start} moves P*5e 5a4a R*4i")
    after = board.sfen()
    first = start_board(board)
    assert (first.sfen(), len(first.history)) == (start, 0) and start_position(board) == start
    assert (board.sfen(), len(board.history)) == (after, 3)
    assert start_position(parse_position("startpos moves 7g7f 3c3d")) == STARTPOS_SFEN


BAD_MOVES = [
    ("startpos moves 7g7f 7g7f", "move 2 of the position: move '7g7f' is illegal"),
    ("startpos moves 7g7e", "move 1 of the position: move '7g7e' is illegal"),
    ("startpos moves 7g7f+", "'7g7f+' is illegal"),  # no promotion outside the zone
    ("startpos moves 5i5h+", "'5i5h+' is illegal"),  # kings never promote
    ("startpos moves 6i6h+", "'6i6h+' is illegal"),  # nor golds
    ("startpos moves 2h5h+", "'2h5h+' is illegal"),
    ("startpos moves P*5e", "'P*5e' is illegal"),  # nothing in hand
    ("startpos moves 5i5i", "'5i5i' is illegal"),
    ("startpos moves 5e5d", "'5e5d' is illegal"),  # empty origin
    ("startpos moves 3c3d", "'3c3d' is illegal"),  # White's pawn, Black to move
    ("startpos moves 7g7f 3c3d 8h2b 2b3c", "move 4 of the position"),  # not White's piece
    ("startpos moves 7g7", "not a USI move"),
    ("startpos moves 7g7f++", "not a USI move"),
    ("startpos moves 7j7f", "not a USI move"),
    ("startpos moves 0g7f", "not a USI move"),
    ("startpos moves K*5e", "not a USI move"),
    ("startpos moves p*5e", "not a USI move"),
    ("startpos moves 7G7F", "not a USI move"),
    ("startpos moves resign", "not a USI move"),
    ("startpos 7g7f", "expected 'moves'"),
    ("", "empty position"),
    # dead pieces: pawn/lance drops on the last rank, knight moves without promotion to the last two ranks
    ("sfen 4k4/9/9/9/9/9/9/9/4K4 b P 1 moves P*1a", "'P*1a' is illegal"),
    ("sfen 4k4/9/9/9/9/9/9/9/4K4 b L 1 moves L*1a", "'L*1a' is illegal"),
    ("sfen 4k4/9/9/9/9/9/9/9/4K4 b N 1 moves N*1b", "'N*1b' is illegal"),
    ("sfen 4k4/9/9/2N6/9/9/9/9/4K4 b - 1 moves 7d6b", "'7d6b' is illegal"),
    ("sfen 4k4/9/2P6/9/9/9/9/9/4K4 b - 1 moves 7c7b", None),  # legal: pawn may stay unpromoted on rank b
    ("sfen 4k4/2P6/9/9/9/9/9/9/4K4 b - 1 moves 7b7a", "'7b7a' is illegal"),
    # nifu drop and uchifuzume (pawn-drop mate; the gold on 2a could capture but is pinned by the rook)
    ("sfen 4k4/9/9/9/4P4/9/9/9/4K4 b P 1 moves P*5g", "'P*5g' is illegal"),
    ("sfen R6gk/9/7G1/9/9/9/9/9/4K4 b P 1 moves P*1b", "'P*1b' is illegal"),
    # moving a pinned piece, and leaving the king in check
    ("sfen 4k4/4r4/9/9/9/9/9/4G4/4K4 b - 1 moves 5h4h", "'5h4h' is illegal"),
    ("sfen 4k4/9/9/9/9/9/9/9/4K3r b - 1 moves 5i4i", "'5i4i' is illegal"),
]


@pytest.mark.parametrize("text,fragment", BAD_MOVES)
def test_bad_moves_name_the_move(text, fragment):
    if fragment is None:
        parse_position(text)
        return
    with pytest.raises(PositionError) as info:
        parse_position(text)
    assert fragment in str(info.value)


def test_push_usi_move_accepts_exactly_the_legal_moves():
    """Every syntactically valid USI string on a few positions: accepted iff cshogi lists it as legal.

    cshogi's `Board.is_legal` alone accepts e.g. '5a5b+' for a king, which corrupts the board.
    """
    squares = [f + r for f in "123456789" for r in "abcdefghi"]
    all_usi = [a + b + p for a in squares for b in squares if a != b for p in ("", "+")]
    all_usi += [f"{k}*{s}" for k in "PLNSGBR" for s in squares]
    sfens = [STARTPOS_SFEN, f"{START} w - 2", *MANY_DROPS_SFENS[:2], *random_sfens(3, seed=8, max_ply=120)]
    for sfen in sfens:
        board = board_from_sfen(sfen)
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        accepted = set()
        for usi in all_usi:
            try:
                move = push_usi_move(board, usi)
            except PositionError:
                continue
            assert cshogi.move_to_usi(move) == usi
            board.pop()
            accepted.add(usi)
        assert accepted == legal, sfen
        assert board.sfen() == sfen or board.sfen() == validate_sfen(sfen)


def test_nasty_inputs_never_kill_the_process():
    """cshogi aborts on some of these when given them directly; through dlzero each is a PositionError."""
    texts = [f"sfen {s}" for s, _ in BAD_SFENS] + [t for t, f in BAD_MOVES if f]
    texts += ["sfen", "sfen moves", "startpos moves 5a5b+", "sfen 9/9/9/9/9/9/9/9/9 b - 1",
              "sfen +/+/+/+/+/+/+/+/+ b - 1", "sfen 99/9/9/9/9/9/9/9/9 b - 1", "\x00\x01",
              "sfen " + "k" * 5000]
    code = (
        "import json, sys\n"
        "from dlzero.position import parse_position\n"
        "from dlzero.errors import PositionError\n"
        "bad = 0\n"
        "for t in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        parse_position(t)\n"
        "        bad += 1\n"
        "        print('ACCEPTED', repr(t))\n"
        "    except PositionError:\n"
        "        pass\n"
        "print('OK', bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "OK 0", proc.stdout


# ---- legal move sets: cshogi against python-shogi, an independent implementation --------------------


def _usi_sets(sfen: str) -> tuple[set[str], set[str]]:
    return ({cshogi.move_to_usi(m) for m in cshogi.Board(sfen).legal_moves},
            {m.usi() for m in shogi.Board(sfen).legal_moves})


def test_legal_moves_agree_with_python_shogi():
    sfens = random_sfens(400, seed=21) + MANY_DROPS_SFENS + [STARTPOS_SFEN]
    unpromoted_in_zone = 0
    for sfen in sfens:
        ours, theirs = _usi_sets(sfen)
        assert ours == theirs, (sfen, sorted(ours - theirs), sorted(theirs - ours))
        unpromoted_in_zone += sum(1 for u in ours if f"{u}+" in ours)
    # both generate the optional non-promotions (e.g. pawn to rank b or c without promoting)
    assert unpromoted_in_zone > 100


def test_known_difference_uchifuzume_with_pinned_defender():
    """python-shogi 1.1.1 misses pawn-drop mate when the only piece that can take the pawn is pinned.

    White king 1a, white gold 2a pinned by the black rook on 9a, black gold 2c guards 1b and 2b.
    P*1b mates (the gold may not capture: it would expose the king), so the drop is illegal. cshogi
    is right; python-shogi lists the drop. Without the rook the gold may capture and both allow it.
    """
    ours, theirs = _usi_sets("R6gk/9/7G1/9/9/9/9/9/4K4 b P 1")
    assert "P*1b" not in ours
    assert theirs - ours == {"P*1b"} and ours <= theirs
    ours, theirs = _usi_sets("7gk/9/7G1/9/9/9/9/9/4K4 b P 1")
    assert "P*1b" in ours and ours == theirs
    # a plain pawn-drop mate (nothing can take the pawn): both refuse it
    ours, theirs = _usi_sets("7nk/9/7G1/9/9/9/9/9/4K4 b P 1")
    assert "P*1b" not in ours and ours == theirs
