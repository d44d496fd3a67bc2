"""The miniosl teacher (`onnx:miniosl`): its labels on positions whose best move is known, and its labelling.

Skipped where miniosl is not installed (`pip install -e '.[teacher]'`; 0.1.6 is a Python 3.11 wheel).
"""

from __future__ import annotations

import random

import cshogi
import cshogi.dlshogi
import pytest

from dlzero.data.hcpe3 import read_hcpe3, read_sidecar
from dlzero.position import parse_position, start_position
from dlzero.teacher import PlaySettings, Query, TeachSettings, open_teacher, teach
from dlzero.teacher.driver import parts_dir_of

miniosl = pytest.importorskip("miniosl", reason="miniosl is not installed: pip install -e '.[teacher]' "
                                                "(miniosl 0.1.6 is a wheel for Python 3.11)")


@pytest.fixture(scope="module")
def teacher():
    with open_teacher("onnx:miniosl;batch=4") as t:
        yield t


def label_of(teacher, line: str):
    board = parse_position(line)
    (label,) = teacher.label([Query(start_position(board), board)])
    return board, label


def usi(board: cshogi.Board, move16: int) -> str:
    return cshogi.move_to_usi(board.move_from_move16(move16))


@pytest.mark.parametrize(("line", "best"), [
    ("sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1", "G*5b"),  # mate in one: the gold drop in front of the king
    ("startpos moves 7g7f 3c3d 8h2b+", "3a2b"),  # take back the bishop
    ("startpos moves 7g7f 3c3d 2g2f 2b8h+", "7i8h"),  # Black takes back the bishop the same way
])
def test_best_move_and_a_sound_policy(teacher, line, best):
    board, label = label_of(teacher, line)
    assert usi(board, label.move16) == best
    moves = [m for m, _ in label.policy]
    assert sorted(moves) == sorted(m & 0xFFFF for m in board.legal_moves)  # every legal move, once
    assert sum(p for _, p in label.policy) == pytest.approx(1.0)
    assert max(label.policy, key=lambda mp: mp[1])[0] == label.move16


def test_value_is_the_win_rate_of_the_side_to_move(teacher):
    _, mating = label_of(teacher, "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1")
    _, mated = label_of(teacher, "sfen 4k4/9/4G4/9/9/9/9/9/4K4 w G 1")  # the same board, the other side to move
    _, even = label_of(teacher, "startpos")
    assert mating.winrate > 0.95 and mated.winrate < 0.2 and 0.4 < even.winrate < 0.6


def test_miniosl_labels_differ_from_dlshogis_so_moves_are_mapped_one_by_one():
    """miniosl numbers the 2187 (move kind, square) labels in another order than dlshogi: a fixed
    one-to-one correspondence, but not the identity. The adapter never uses the numbers across the two."""
    rng = random.Random(3)
    to_dlshogi: dict[int, int] = {}
    for _ in range(10):
        board, state = cshogi.Board(), miniosl.State()
        for _ in range(80):
            legal = list(board.legal_moves)
            if not legal:
                break
            for move in legal:
                mlabel = state.to_move(cshogi.move_to_usi(move)).policy_move_label
                assert to_dlshogi.setdefault(mlabel, cshogi.dlshogi.make_move_label(move, board.turn)) == \
                    cshogi.dlshogi.make_move_label(move, board.turn)
            move = rng.choice(legal)
            board.push(move)
            state.make_move(state.to_move(cshogi.move_to_usi(move)))
    assert len(set(to_dlshogi.values())) == len(to_dlshogi) > 500
    assert sum(m == d for m, d in to_dlshogi.items()) < len(to_dlshogi) // 10


def test_teach_with_miniosl_writes_readable_hcpe3(tmp_path):
    out = tmp_path / "m.hcpe3"
    report = teach(TeachSettings(teacher="onnx:miniosl;batch=4", positions=40, out=out, openings="startpos",
                                 play=PlaySettings(sample_plies=4, max_moves=40), part_games=4), progress=False)
    games = read_hcpe3(out)  # replays every move and candidate with cshogi
    assert report.games == len(games) and report.positions == sum(len(g.moves) for g in games) >= 40
    # parts are sized by the positions still wanted: the first plays one game (of up to 40 plies), not 4
    assert read_sidecar(parts_dir_of(out) / "part-00000.hcpe3")["games"] == 1
    for game in games:
        assert all(len(m.candidates) for m in game.moves)
        assert game.result & 0x10 or game.result & 0x3  # the move cap (a draw) or a decisive game
