"""`dlzero review`: records in (CSA, KIF, KI2), annotated KIF out that parses back with the same moves and one
evaluation per move; checked with cshogi's own KIF parser as an independent reader."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import cshogi
import cshogi.CSA
import cshogi.KI2
import cshogi.KIF
import pytest

from dlzero.analysis import AnalysisEngine
from dlzero.config import Config
from dlzero.data.hcpe3 import BLACK_WIN
from dlzero.data.records import read_games
from dlzero.review import find_blunders, review_game, write_review

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "records"  # ../shared beside the checkout
PRO_KIF = SHARED / "kifu-for-js-kif" / "ryuou201409020101.kif"
DECLARATION_CSA = (SHARED / "kifu-for-js-csa"
                   / "dr1test1test0+tu-1_aobazero_viper-300-5F+aobazero+viper+20200719201040.csa")
needs_shared = pytest.mark.skipif(not PRO_KIF.is_file() or not DECLARATION_CSA.is_file(),
                                  reason=f"shared game records not found under {SHARED}")
EVAL_RE = re.compile(r"^#評価値=([+-]?[0-9]+)$")


def _evals(comment: str | None) -> list[int]:
    return [int(m.group(1)) for line in (comment or "").split("\n") if (m := EVAL_RE.match(line))]


def _check_annotated(annotated: Path, original: Path) -> cshogi.KIF.Parser:
    """Same moves as the original (our reader and cshogi's), and exactly one evaluation per position."""
    ours = read_games(annotated)[0]
    assert [cshogi.move_to_usi(m) for m in ours.moves] == \
        [cshogi.move_to_usi(m) for m in read_games(original)[0].moves]
    oracle = cshogi.KIF.Parser.parse_file(str(annotated))
    assert [m & 0xFFFF for m in oracle.moves] == [m & 0xFFFF for m in ours.moves]
    assert len(oracle.comments) == len(oracle.moves)
    assert all(len(_evals(c)) == 1 for c in oracle.comments)
    assert len(_evals(oracle.comment)) == 1  # the start position, above move 1
    return oracle


def _random_game(plies: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    board = cshogi.Board()
    moves = []
    for _ in range(plies):
        legal = list(board.legal_moves)
        if not legal or board.is_nyugyoku():
            break
        move = rng.choice(legal)
        moves.append(move)
        board.push(move)
    return moves


def test_review_command_on_generated_ki2(model, tmp_path):
    """A record made here, so this test always runs: KI2 in, annotated KIF and graph out, via the CLI."""
    record = tmp_path / "game.ki2"
    exporter = cshogi.KI2.Exporter(str(record))
    exporter.header(["sente", "gote"])
    for move in _random_game(40, seed=3):
        exporter.move(move)
    exporter.end("%TORYO")
    exporter.close()
    out, png = tmp_path / "annotated.kifu", tmp_path / "graph.png"
    run = subprocess.run([sys.executable, "-m", "dlzero.cli", "review", str(record), "--model", model, "--threads",
                          "1", "--playouts", "8", "--out", str(out), "--png", str(png), "--blunder-threshold", "0.01",
                          "--positions-per-batch", "16"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "review" in run.stderr  # the progress bar
    oracle = _check_annotated(out, record)
    blunders = re.findall(r"blunder at move (\d+)", run.stdout)
    marked = [i + 1 for i, c in enumerate(oracle.comments) if "【悪手】" in c]
    assert [int(b) for b in blunders] == marked
    text = out.read_text("utf-8")
    assert text.startswith("#KIF version=2.0 encoding=UTF-8") and "まで40手で" in text


def test_review_reads_a_diagram_start_and_marks_the_mate(model, tmp_path):
    """From a board diagram: White steps aside, Black has mate in one and gives it; scores are Black's view."""
    start = "4k4/9/4G4/9/9/9/9/9/4K4 w G 1"
    record = tmp_path / "mate.csa"
    exporter = cshogi.CSA.Exporter(str(record))
    exporter.info(init_board=cshogi.Board(start), names=["b", "w"])
    board = cshogi.Board(start)
    for usi in ("5a4a", "G*4b"):
        move = board.move_from_usi(usi)
        exporter.move(move)
        board.push(move)
    exporter.endgame("%TSUMI")
    exporter.close()
    from dlzero.inference import load_model

    cfg = Config()
    engine = AnalysisEngine(load_model(model, cfg.inference), cfg, 8)
    game = read_games(record)[0]
    review = review_game(engine, game, 8, 4, 0.2, progress=False)
    assert [p.bestmove for p in review.plies[1:]] == ["G*4b", "resign"]
    out = tmp_path / "mate.kif"
    write_review(review, out, ["test"])
    oracle = _check_annotated(out, record)
    assert _evals(oracle.comments[0]) == [30000] and "#詰み=先手勝ち:1手" in oracle.comments[0]
    assert _evals(oracle.comments[1]) == [30000]  # White is mated: +30000 for Black
    assert read_games(out)[0].sfen.split()[:3] == start.split()[:3]  # cshogi's KIF reader ignores diagrams
    assert "encoding=Shift_JIS" in out.read_bytes().decode("cp932")
    assert read_games(out)[0].winner == BLACK_WIN


@needs_shared
def test_review_pro_game_and_declaration_game(model, tmp_path):
    from dlzero.inference import load_model

    cfg = Config()
    engine = AnalysisEngine(load_model(model, cfg.inference), cfg, 4)
    for record in (PRO_KIF, DECLARATION_CSA):
        game = read_games(record)[0]
        review = review_game(engine, game, 4, 64, 0.2, progress=False)
        assert len(review.plies) == len(game.moves) + 1
        assert review.blunders == find_blunders(game, review.plies, 0.2)
        out = tmp_path / f"{record.stem[:20]}.kif"
        write_review(review, out, [])
        _check_annotated(out, record)
        again = read_games(out)[0]
        assert again.winner == game.winner and not again.cut
    # the engine game ends with a declaration: its last position is a win for the side to move
    assert game.ending == "%KACHI" and review.plies[-1].bestmove == "win"
    assert again.ending == "入玉勝ち"
    last = cshogi.KIF.Parser.parse_file(str(out)).comments[-1]
    white_to_move = len(game.moves) % 2 == 1
    assert _evals(last) == [-30000 if white_to_move else 30000]
