"""Record import over every real CSA/KIF file in shared/data/records: nothing crashes, all accounted for."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import cshogi
import numpy as np
import pytest

from dlzero.commands import import_records as command
from dlzero.data.hcpe import read_hcpe
from dlzero.data.hcpe3 import BLACK_WIN, RESULT_DRAW, WHITE_WIN
from dlzero.data.record_import import find_record_files, import_records
from dlzero.data.records import decode_record

RECORDS = Path(__file__).resolve().parents[2] / "shared" / "data" / "records"
CSA = RECORDS / "kifu-for-js-csa"
KIF = RECORDS / "kifu-for-js-kif"
AOBA = CSA / "dr1test1test0+tu-1_aobazero_viper-300-5F+aobazero+viper+20200719201040.csa"

pytestmark = pytest.mark.skipif(not RECORDS.is_dir(), reason=f"shared game records not found at {RECORDS}")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Import the whole folder once: (report, {path: that file's records})."""
    out = tmp_path_factory.mktemp("import") / "all.hcpe"
    report = import_records([str(RECORDS)], str(out), progress=False)
    records = read_hcpe(out)  # validates every position and move
    by_file, start = {}, 0
    for path, n in report.imported:
        by_file[Path(path)] = records[start : start + n]
        start += n
    assert start == len(records) == report.positions
    return report, by_file


def sfen_of(hcp: np.ndarray) -> str:
    board = cshogi.Board()
    board.set_hcp(hcp)
    return board.sfen()


def usi_moves(records: np.ndarray) -> list[str]:
    return [cshogi.move_to_usi(int(m)) for m in records["bestMove16"]]


CSA_DROPS = {"FU": "P", "KY": "L", "KE": "N", "GI": "S", "KI": "G", "KA": "B", "HI": "R"}


def csa_square(text: str) -> str:
    return text[0] + "abcdefghi"[int(text[1]) - 1]


def csa_to_usi(token: str) -> str:
    """CSA token to USI: +7776FU -> 7g7f, -0055KA -> B*5e (the openings compared have no promotions)."""
    frm, to, piece = token[1:3], token[3:5], token[5:7]
    return f"{CSA_DROPS[piece]}*{csa_square(to)}" if frm == "00" else csa_square(frm) + csa_square(to)


def test_every_file_is_imported_or_skipped_with_a_reason(imported):
    report, _ = imported
    files = set(find_record_files([RECORDS]))
    assert len(files) >= 60
    imported_paths = {p for p, _ in report.imported}
    skipped_paths = {p for p, _ in report.skipped}
    assert imported_paths | skipped_paths == files
    assert not imported_paths & skipped_paths
    assert all(reason for _, reason in report.skipped)
    assert len(report.imported) >= 45 and report.positions > 3000


def test_the_crashing_csa_file_is_skipped_as_a_crash(imported):
    report, _ = imported
    reasons = dict(report.skipped)
    assert re.match(r"parser crashed \(signal \d+", reasons[str(CSA / "9fu_komabetsu.csa")])


def test_tsume_positions_without_a_king_are_skipped(imported):
    reasons = dict(imported[0].skipped)
    # the engine's position check refuses them: 9fu.csa's first fault found is two pawns on a file
    assert "start position is refused" in reasons[str(CSA / "9fu.csa")]
    assert "king" in reasons[str(KIF / "taichitsume.kif")]


def test_known_engine_game_replays_as_written(imported):
    _, by_file = imported
    records = by_file[AOBA]
    tokens = re.findall(r"^([+-]\d{4}[A-Z]{2})", AOBA.read_text(), flags=re.M)
    assert len(records) == len(tokens) == 400
    assert usi_moves(records[:30]) == [csa_to_usi(t) for t in tokens[:30]]
    assert sfen_of(records[0]["hcp"]) == cshogi.STARTING_SFEN
    assert set(records["gameResult"]) == {BLACK_WIN}  # aobazero (Black) declared a win: %KACHI
    assert set(records["eval"]) == {0}


def test_kif_result_line_and_first_moves(imported):
    _, by_file = imported
    records = by_file[KIF / "jt201409130101.kif"]
    assert len(records) == 107 and set(records["gameResult"]) == {BLACK_WIN}  # まで107手で先手の勝ち
    assert usi_moves(records[:2]) == ["2g2f", "8c8d"]


def test_handicap_start_positions(imported):
    _, by_file = imported
    lance_odds = by_file[KIF / "20081220kyoochi.kif"]
    assert sfen_of(lance_odds[0]["hcp"]) == cshogi.KIF.Parser.HANDYCAP_SFENS["香落ち"]
    assert usi_moves(lance_odds[:1]) == ["3c3d"]  # 上手 (White) moves first
    assert set(lance_odds["gameResult"]) == {BLACK_WIN}  # まで142手で下手の勝ち
    eight_piece_csa, eight_piece_kif = by_file[CSA / "8mai.csa"], by_file[KIF / "8mai.kif"]
    assert sfen_of(eight_piece_csa[0]["hcp"]) == "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"
    assert eight_piece_csa.tobytes() == eight_piece_kif.tobytes()


def test_same_game_in_cp932_and_utf8_gives_the_same_records(imported):
    _, by_file = imported
    assert by_file[KIF / "no_henka.kif"].tobytes() == by_file[KIF / "no_henka.kifu"].tobytes()


def test_board_diagram_start_position(imported):
    _, by_file = imported
    records = by_file[KIF / "32ryu-cumbersome.kif"]
    assert sfen_of(records[0]["hcp"]) == "7kl/5+R1b1/5K1p1/6+R2/9/8b/9/9/9 b 4g4s4n3l17p 1"
    assert len(records) == 9 and set(records["gameResult"]) == {BLACK_WIN}  # 10 詰み: White is mated


def test_variations_are_ignored_and_results_read(imported):
    report, by_file = imported
    fork = by_file[KIF / "fork.kif"]
    assert usi_moves(fork) == ["7g7f", "3c3d", "2g2f"] and set(fork["gameResult"]) == {BLACK_WIN}
    assert set(by_file[KIF / "illegal.kif"]["gameResult"]) == {WHITE_WIN}  # 先手の反則負け
    assert set(by_file[CSA / "illegal_lose.csa"]["gameResult"]) == {WHITE_WIN}  # %ILLEGAL_MOVE by Black
    assert set(by_file[CSA / "illegal_win.csa"]["gameResult"]) == {BLACK_WIN}  # %-ILLEGAL_ACTION
    assert set(by_file[CSA / "chudan.csa"]["gameResult"]) == {RESULT_DRAW}
    notes = dict(report.notes)
    assert "no winner known (%CHUDAN)" in notes[str(CSA / "chudan.csa")]


def test_illegal_moves_cut_the_game(tmp_path):
    header = "V2.2\nPI\n+\n"
    (tmp_path / "cut.csa").write_text(header + "+7776FU\n-3334FU\n+2725FU\n-8384FU\n%TORYO\n")
    (tmp_path / "first.csa").write_text(header + "+7775FU\n%TORYO\n")
    (tmp_path / "note.txt").write_text("not a record")
    report = import_records([str(tmp_path / n) for n in ("cut.csa", "first.csa", "note.txt")],
                            str(tmp_path / "o.hcpe"), progress=False)  # fmt: skip
    assert report.imported == [(str(tmp_path / "cut.csa"), 2)]
    notes = dict(report.notes)
    assert "move 3 was not understood" in notes[str(tmp_path / "cut.csa")]  # cshogi's CSA parser gives 0
    skipped = dict(report.skipped)
    assert "move 1 was not understood" in skipped[str(tmp_path / "first.csa")]
    assert "unknown record format" in skipped[str(tmp_path / "note.txt")]
    records = read_hcpe(tmp_path / "o.hcpe")
    assert set(records["gameResult"]) == {WHITE_WIN}  # Black to move after 4 recorded moves resigned


def test_import_continues_after_a_crash_and_after_a_timeout(tmp_path):
    crash_then_good = [str(CSA / "9fu_komabetsu.csa"), str(CSA / "chudan.csa")]
    report = import_records(crash_then_good, str(tmp_path / "a.hcpe"), progress=False)
    assert [p for p, _ in report.skipped] == crash_then_good[:1]
    assert report.imported == [(crash_then_good[1], 3)]
    report = import_records([str(CSA / "chudan.csa")], str(tmp_path / "b.hcpe"), False, timeout_s=0.001)
    assert report.skipped == [(str(CSA / "chudan.csa"), "parser timed out after 0.001 s")]
    assert not (tmp_path / "b.hcpe").exists()


def test_decoding_honours_declared_and_fallback_encodings():
    text = "'encoding=Shift_JIS\n'先手\n"
    assert decode_record(text.encode("cp932")) == text
    assert decode_record("手合割：平手\r\n".encode("euc_jp")) == "手合割：平手\n"
    assert decode_record("\ufeff手合割：平手\n".encode()) == "手合割：平手\n"


def test_command_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "cmd.hcpe"
    args = argparse.Namespace(files=[str(CSA)], out=str(out), quiet=True)
    assert command.run(args) == 0
    err = capsys.readouterr().err
    assert re.search(r"imported 12 files / \d+ positions into", err)
    assert "9fu_komabetsu.csa: parser crashed" in err
    assert command.run(argparse.Namespace(files=[str(tmp_path / "none")], out=str(out), quiet=True)) == 1


def test_a_start_position_the_engine_refuses_imports_no_move(tmp_path):
    """Issue 52: record import takes the engine's position check (`dlzero.position.validate_sfen`), so a
    record starting with the two kings adjacent adds no impossible position to the training data."""
    empty = " * " * 9
    rows = [empty] * 9
    rows[4] = " * " * 4 + "-OU" + " * " * 4  # White's king on 5e
    rows[5] = " * " * 4 + "+OU" + " * " * 4  # Black's king on 5f, next to it
    board = "".join(f"P{r + 1}{row}\n" for r, row in enumerate(rows))
    (tmp_path / "kings.csa").write_text("V2.2\n" + board + "+\n+5657OU\n%TORYO\n")
    report = import_records([str(tmp_path / "kings.csa")], str(tmp_path / "o.hcpe"), progress=False)
    assert report.imported == []
    assert "kings stand next to each other" in dict(report.skipped)[str(tmp_path / "kings.csa")]
