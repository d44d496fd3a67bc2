"""`dlzero teach` and the warm start, with a fake USI engine: a real subprocess speaking USI.

The fake engine sorts the legal moves by their USI text and answers the first as its best move,
with `info depth 3 multipv i score cp EVAL - 50 (i - 1) pv MOVE_i` for the first `MultiPV` moves, and
resigns (score cp -2000) once the move number passes its `ResignPly` option. So every label is
known in advance: the played move, the eval, the soft policy's counts and the game's result. Around
those lines it prints what real engines print and a label must not take: stale shallower iterations
(depths 1 and 2, other moves scored higher) and a deeper fail-high and fail-low (`lowerbound`,
`upperbound`); its `multipv` token only with MultiPV > 1, as YaneuraOu. `Cut=K` adds the first K lines
of a depth-4 iteration cut short, which ranks the first two moves the other way round (cp EVAL + 20,
then EVAL - 180); `Best=J` answers the J-th move as `bestmove`.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import cshogi
import numpy as np
import pytest
from conftest import TINY_MODEL
from shards import selfplay_games

from dlzero.config import config_from_dict
from dlzero.data.hcpe3 import BLACK_WIN, WHITE_WIN, Hcpe3Record, MoveRecord, read_hcpe3, write_hcpe3
from dlzero.errors import DlzeroError
from dlzero.model import load_model_file, new_model, save_model
from dlzero.position import parse_position, start_position
from dlzero.rundir import RunDir
from dlzero.search.result import EVAL_COEF, MAX_CP, winrate_to_cp
from dlzero.teacher import PlaySettings, Query, TeacherError, TeachSettings, open_teacher, parse_spec, teach
from dlzero.teacher.base import VISIT_TOTAL
from dlzero.teacher.driver import parts_dir_of
from dlzero.teacher.label import label_positions
from dlzero.teacher.usi import final_lines, winrate
from dlzero.train.supervised import warm_start


def first_move(board: cshogi.Board) -> int:
    """The fake engine's best move: the first legal move by USI text."""
    return board.move_from_usi(min(cshogi.move_to_usi(m) for m in board.legal_moves)) & 0xFFFF


def expected_counts(multipv: int, temperature: float = 100.0) -> list[int]:
    weights = [math.exp(-50 * i / temperature) for i in range(multipv)]
    return [round(w / sum(weights) * VISIT_TOTAL) for w in weights]


def check_label_plies(game: Hcpe3Record, multipv: int, eval_cp: int) -> int:
    """Every ply with candidates is the fake engine's label of its position; returns how many there were."""
    board = game.start_board()
    labelled = 0
    for move in game.moves:
        if len(move.candidates):
            sorted_moves = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)[:multipv]
            assert [board.move_from_usi(u) & 0xFFFF for u in sorted_moves] == move.candidates[:, 0].tolist()
            assert move.candidates[:, 1].tolist() == expected_counts(multipv)
            assert move.eval == eval_cp
            labelled += 1
        board.push_move16(move.move16)
    return labelled


def test_spec_parsing(engine):
    spec = parse_spec(f"{engine};MultiPV=3;go=nodes 10;Eval=7")
    assert (spec.kind, dict(spec.options)) == ("usi", {"MultiPV": "3", "go": "nodes 10", "Eval": "7"})
    assert parse_spec("miniosl").kind == parse_spec("onnx:miniosl;batch=8").kind == "miniosl"
    # the limits a usi: player names are the teacher's go
    limited = parse_spec(f"{engine};MultiPV=3;nodes=10")
    assert (limited.settings, limited.options) == ((("nodes", 10),), (("MultiPV", "3"),))
    with open_teacher(limited) as teacher:
        assert teacher.go == "nodes 10"
    for bad in ("gps", "usi:", "usi:/no/such/engine", "onnx:other", "onnx:miniosl;batch=x", "onnx:miniosl;foo=1",
                f"{engine};NoEquals", f"{engine};eval_scale=abc", f"{engine};go=nodes 5;nodes=10"):
        with pytest.raises(TeacherError):
            parse_spec(bad)


def test_usi_teacher_labels_with_multipv_and_rejects_unknown_options(engine):
    board = parse_position("startpos moves 7g7f 3c3d")
    with open_teacher(f"{engine};MultiPV=3;Eval=300;eval_scale=600") as teacher:
        (label,) = teacher.label([Query(start_position(board), board)])
    assert label.move16 == first_move(board)
    assert label.winrate == pytest.approx(1 / (1 + math.exp(-300 / 600)))
    probs = [p for _, p in label.policy]
    assert sum(probs) == pytest.approx(1.0) and probs == sorted(probs, reverse=True) and len(probs) == 3
    assert winrate_to_cp(label.winrate) == round(756 * 300 / 600)  # the eval in dlshogi's units
    with open_teacher(f"{engine};NoSuchOption=1") as teacher, pytest.raises(TeacherError, match="NoSuchOption"):
        teacher.label([Query(start_position(board), board)])


def test_usi_labels_come_from_the_final_lines_not_stale_or_bound_ones(engine):
    """Each label is the final lines': without MultiPV one-hot on bestmove, with it the softmax over each
    index's deepest line (a depth cut short replaces the lines it printed), the eval from the played move's
    own line."""
    board = parse_position("startpos moves 7g7f 3c3d")
    moves = [board.move_from_usi(u) & 0xFFFF for u in sorted(cshogi.move_to_usi(m) for m in board.legal_moves)]

    def label(options: str) -> tuple[int | None, float, dict[int, float]]:
        with open_teacher(f"{engine};Eval=100;{options}") as teacher:
            (lab,) = teacher.label([Query(start_position(board), board)])
        return lab.move16, lab.winrate, dict(lab.policy)

    def softmax(cps: dict[int, float]) -> dict[int, float]:
        weights = {m: math.exp(cp / 100) for m, cp in cps.items()}
        return {m: pytest.approx(w / sum(weights.values())) for m, w in weights.items()}

    assert label("MultiPV=1") == (moves[0], pytest.approx(winrate(100, EVAL_COEF)), {moves[0]: 1.0})
    assert label("MultiPV=3") == (moves[0], pytest.approx(winrate(100, EVAL_COEF)),
                                  softmax({moves[0]: 0, moves[1]: -50, moves[2]: -100}))
    # depth 4 cut after two of three lines: its two lines (cp 120 and -80) and depth 3's third, whose cp 0
    # is capped by the line ranked above it (-80)
    assert label("MultiPV=3;Cut=2;Best=1") == (moves[1], pytest.approx(winrate(120, EVAL_COEF)),
                                               softmax({moves[1]: 0, moves[0]: -200, moves[2]: -200}))
    # cut after one: index 2's depth-3 line names the move of index 1's depth-4 line, which counts
    assert label("MultiPV=3;Cut=1;Best=1") == (moves[1], pytest.approx(winrate(120, EVAL_COEF)),
                                               softmax({moves[1]: 0, moves[2]: -120}))
    # the engine plays its second line: the eval is that line's, the policy relative to it
    assert label("MultiPV=3;Best=1") == (moves[1], pytest.approx(winrate(50, EVAL_COEF)),
                                         softmax({moves[0]: 50, moves[1]: 0, moves[2]: -50}))
    # a bestmove without a line of its own: the eval of the first line, the move at its weight
    assert label("MultiPV=3;Best=5") == (moves[5], pytest.approx(winrate(100, EVAL_COEF)),
                                         softmax({moves[0]: 0, moves[1]: -50, moves[2]: -100, moves[5]: 0}))
    assert label("MultiPV=1;Best=5") == (moves[5], pytest.approx(winrate(100, EVAL_COEF)), {moves[5]: 1.0})


def test_final_lines_of_stockfish_and_gps_shogi_searches():
    """Shapes of real output: Fairy-Stockfish's MultiPV blocks with a fail-high and a stop mid-depth (index 1
    at the new depth, the others at the one before), and GPS Shogi's MultiPVWidth lines (no multipv token,
    a line per root move, depth 4 printed in two passes)."""
    stockfish = ["info depth 8 seldepth 10 multipv 1 score cp 37 nodes 15508 pv 7g7f 3c3d",
                 "info depth 8 seldepth 10 multipv 2 score cp -62 nodes 15508 pv 2g2f 8c8d",
                 "info depth 8 seldepth 10 multipv 3 score cp -107 nodes 15508 pv 5g5f 3c3d",
                 "info depth 9 seldepth 11 multipv 1 score cp 95 lowerbound nodes 17000 pv 2g2f",
                 "info depth 9 currmove 7g7f currmovenumber 1",
                 "info depth 9 seldepth 11 multipv 1 score mate 3 nodes 20021 pv 6i7h 4a3b",
                 "info depth 8 seldepth 10 multipv 2 score cp -62 nodes 20021 pv 2g2f 8c8d",
                 "info depth 8 seldepth 10 multipv 3 score cp -107 nodes 20021 pv 5g5f 3c3d"]
    assert final_lines(stockfish) == [("6i7h", MAX_CP - 300), ("2g2f", -62), ("5g5f", -107)]
    assert final_lines(stockfish[:4]) == [("7g7f", 37), ("2g2f", -62), ("5g5f", -107)]
    # an engine that prints each line as it finishes it: index 2 of depth 8 names index 1's move of depth 9
    assert final_lines(stockfish[:3] + ["info depth 9 multipv 1 score cp 20 pv 2g2f"]) == [("2g2f", 20),
                                                                                           ("5g5f", -107)]
    # seen at go nodes 20000: index 2, left at depth 8, scored above index 1 of depth 9 (it failed low
    # there): capped at index 1's score, so the engine's move keeps the top weight
    inverted = ["info depth 8 multipv 1 score cp -150 pv 8d8e", "info depth 8 multipv 2 score cp -187 pv 7a6b",
                "info depth 9 multipv 1 score cp -200 pv 8d8e", "info depth 8 multipv 2 score cp -187 pv 7a6b"]
    assert final_lines(inverted) == [("8d8e", -200), ("7a6b", -200)]
    gps = ["info depth 4 seldepth 6 time 513 score cp -99 nodes 155366 pv 9g9f 2b3c",
           "info depth 4 seldepth 6 time 528 score cp -385 nodes 159020 pv 2h6h B*2g",
           "info depth 4",
           "info depth 4 seldepth 7 time 767 score cp -43 nodes 251191 pv 7i8h 7a6b",
           "info depth 4 seldepth 7 time 776 score cp -77 nodes 254616 pv 9g9f 2b3c",
           "info time 1146 nodes 396486 nps 345908",
           "info depth 5 seldepth 8 time 1608 score cp -26 nodes 548950 pv 7i8h 7a6b",
           "info depth 5 seldepth 8 time 1638 score cp -114 nodes 560186 pv 3i4h B*3c",
           "info depth 5 seldepth 8 time 1674 score cp -49 nodes 570912 pv 2f2e 2b3c"]
    assert final_lines(gps) == [("7i8h", -26), ("2f2e", -49), ("3i4h", -114)]
    assert final_lines(gps[:5]) == [("7i8h", -43), ("9g9f", -77), ("2h6h", -385)]
    assert final_lines(["info depth 1 score cp 10 upperbound pv 7g7f", "info string no score here"]) == []


def test_teach_self_play_writes_known_labels_and_resumes(engine, tmp_path):
    openings = tmp_path / "openings.txt"
    openings.write_text("startpos moves 7g7f 3c3d\nstartpos moves 2g2f 8c8d\n")
    out = tmp_path / "t.hcpe3"
    settings = TeachSettings(teacher=f"{engine};MultiPV=3;ResignPly=16", positions=20, out=out, workers=2,
                             openings=str(openings), play=PlaySettings(sample_plies=0), part_games=2, seed=5)
    report = teach(settings, progress=False)
    games = read_hcpe3(out)
    assert report.positions >= 20 and report.games == len(games) and report.reused_parts == 0
    labelled = 0
    for game in games:
        assert [cshogi.move_to_usi(game.start_board().move_from_move16(game.moves[0].move16))] in (["7g7f"], ["2g2f"])
        assert not len(game.moves[0].candidates) and not len(game.moves[1].candidates)  # the suite's plies
        labelled += check_label_plies(game, 3, 100)
        board = game.start_board()
        for move in game.moves:
            board.push_move16(move.move16)
        assert board.move_number == 17  # the teacher resigned at move 17: the side to move lost
        assert game.result == (BLACK_WIN if board.turn == cshogi.WHITE else WHITE_WIN)
    assert labelled == report.positions == 14 * len(games)

    parts = sorted(parts_dir_of(out).glob("part-*.hcpe3"))
    before = {p: p.read_bytes() for p in parts}
    more = teach(TeachSettings(**{**vars(settings), "positions": 60}), progress=False)
    assert more.reused_parts == len(parts) and more.positions >= 60
    assert all(p.read_bytes() == data for p, data in before.items())  # a finished part is never redone
    assert read_hcpe3(out)[: len(games)] == games
    with pytest.raises(TeacherError, match="teacher"):
        teach(TeachSettings(**{**vars(settings), "teacher": f"{engine};MultiPV=2"}), progress=False)


def test_a_game_the_teacher_resigns_at_once_is_not_kept(engine):
    from dlzero.teacher.label import play_teacher_games

    lines = ["startpos moves 7g7f 3c3d"]
    with open_teacher(f"{engine};ResignPly=0") as teacher:
        games, positions = play_teacher_games(teacher, lines, 2, seed=1, settings=PlaySettings(sample_plies=0),
                                              report=lambda n: None)
    assert (games, positions) == ([], 0)  # the opening's plies alone carry no label
    with open_teacher(f"{engine};ResignPly=3") as teacher:
        games, positions = play_teacher_games(teacher, lines, 2, seed=1, settings=PlaySettings(sample_plies=0),
                                              report=lambda n: None)
    assert len(games) == 2 and positions == 2 * 1  # move 3 is labelled, move 4 resigned


def test_teach_relabels_games_keeping_moves_and_results(engine, tmp_path):
    source = tmp_path / "games.hcpe3"
    games = []
    for line, result in (("startpos moves 7g7f 3c3d 8h2b+ 3a2b", BLACK_WIN), ("startpos moves 2g2f", WHITE_WIN)):
        board = parse_position(line)
        game = Hcpe3Record.from_board(cshogi.Board())
        game.moves = [MoveRecord(m & 0xFFFF) for m in board.history]
        game.result = result
        games.append(game)
    write_hcpe3(source, games)
    csa = tmp_path / "records" / "g.csa"
    csa.parent.mkdir()
    csa.write_text("V2.2\nPI\n+\n+7776FU\n-3334FU\n+2726FU\n%TORYO\n")
    out = tmp_path / "r.hcpe3"
    report = teach(TeachSettings(teacher=f"{engine};MultiPV=2;Eval=40", positions=1000, out=out,
                                 sources=(str(source), str(csa.parent))), progress=False)
    relabelled = read_hcpe3(out)
    assert report.positions == 4 + 1 + 3  # every ply of the three games, though 1000 were asked for
    by_moves = {tuple(m.move16 for m in g.moves): g for g in relabelled}
    for game in games:
        new = by_moves[tuple(m.move16 for m in game.moves)]
        assert new.result == game.result
        assert check_label_plies(new, 2, 40) == len(game.moves)
    record = next(g for g in relabelled if len(g.moves) == 3)
    assert record.result == BLACK_WIN  # %TORYO with White to move
    assert check_label_plies(record, 2, 40) == 3


MATE_IN_1 = "sfen ln2kg1n1/r2s4l/1ppp1+B1sp/4pppp1/p7P/L2PP4/1PP2PPP1/2G1G3L/BNS1KRSN1 b Gp 47"  # G*6a, only
MATE_IN_3 = "sfen 1n2k2nb/lsgg1sr+B1/1pp2pp2/p2pP4/1NP5l/1P3G1p1/P2PSPPP1/L1GS2+p1p/4K2NL w Pr 64"  # R*3i


def test_a_mate_in_one_is_labelled_by_cshogi_not_asked(engine):
    board = parse_position(MATE_IN_1)
    with open_teacher(engine) as teacher:  # the fake engine would answer its first move by USI text
        (label,) = label_positions(teacher, [Query(start_position(board), board)])
    assert cshogi.move_to_usi(board.move_from_move16(label.move16)) == "G*6a"
    assert (label.winrate, label.proven, label.policy) == (1.0, True, ((label.move16, 1.0),))
    # in check, cshogi's mate search answers the illegal G*6h here: the teacher is asked instead
    board = parse_position("sfen 1ns1g2+Nl/l3kG1R1/p1pppp2p/7B1/6p2/4P1P2/P+rNPsP2P/9/L1PK1GSNL w BSPg3p 58")
    with open_teacher(engine) as teacher:
        (label,) = label_positions(teacher, [Query(start_position(board), board)])
    assert label.move16 == first_move(board) and not label.proven


@pytest.mark.skipif(not Path("/usr/games/gpsusi").exists(),
                    reason="GPS Shogi (/usr/games/gpsusi, Debian package gpsshogi) is not installed")
def test_gps_shogi_mates_then_recaptures():
    """GPS reads no more commands after answering a root mate: the teacher restarts it for the next one."""
    boards = [parse_position(line) for line in (MATE_IN_3, "startpos moves 7g7f 3c3d 8h2b+")]
    with open_teacher("usi:/usr/games/gpsusi;LimitDepth=4;timeout=30") as teacher:
        mate, recapture = teacher.label([Query(start_position(b), b) for b in boards])
    assert cshogi.move_to_usi(boards[0].move_from_move16(mate.move16)) == "R*3i" and mate.proven
    assert mate.winrate > 0.999
    assert cshogi.move_to_usi(boards[1].move_from_move16(recapture.move16)) == "3a2b" and not recapture.proven
    assert 0.3 < recapture.winrate < 0.7


def write_teacher_games(path: Path) -> None:
    """Six games of 30 random plies, each ply labelled with three candidates and a random eval."""
    rng = np.random.default_rng(0)
    games = []
    for _ in range(6):
        board = cshogi.Board()
        game = Hcpe3Record.from_board(board)
        for _ in range(30):
            legal = [m & 0xFFFF for m in board.legal_moves]
            picks = rng.choice(legal, size=min(3, len(legal)), replace=False)
            cands = np.array([[m, c] for m, c in zip(picks, (6000, 3000, 1000), strict=False)], np.uint16)
            game.moves.append(MoveRecord(int(picks[0]), int(rng.integers(-500, 500)), cands))
            board.push_move16(int(picks[0]))
        game.result = BLACK_WIN
        games.append(game)
    write_hcpe3(path, games)


def test_warm_start_makes_a_loadable_generation_zero(tmp_path):
    cfg = config_from_dict({"model": TINY_MODEL,
                            "train": {"batch_size": 16, "steps_per_generation": 3, "device": "cpu",
                                      "holdout_fraction": 0.2, "val_lambda": 1.0, "log_every": 1}})
    data = tmp_path / "teacher.hcpe3"
    write_teacher_games(data)

    rd = RunDir.create(tmp_path / "run", cfg)
    path = warm_start(rd, cfg, [data], steps=3, progress=False)
    model, meta = load_model_file(path)
    assert path == rd.model_path(0) and model.cfg == cfg.model and meta.generation == 0
    assert rd.best().generation == 0 and "warm start" in rd.best().reason
    report = (rd.train_dir / "warm-start" / "report.json").read_text()
    assert '"steps": 3' in report and "policy_acc" in report
    assert warm_start(rd, cfg, [data], steps=3, progress=False) is None  # the run has its best model now

    other = RunDir.create(tmp_path / "run2", cfg)
    source = tmp_path / "m.pt"
    save_model(new_model(cfg.model, seed=2), source)
    assert warm_start(other, cfg, [source], progress=False) == other.model_path(0)
    assert load_model_file(other.model_path(0))[0].state_dict().keys() == model.state_dict().keys()
    with pytest.raises(DlzeroError, match="not both"):
        warm_start(RunDir.create(tmp_path / "run3", cfg), cfg, [source, data], progress=False)


def test_the_warm_start_schedule_ends_with_the_warm_start(tmp_path, caplog):
    """The warm start trains on train.supervised_lr_schedule (cosine by default), the generations after it
    on the run's train.lr_schedule: a constant LR, not a cosine restarted at the top LR each generation."""
    from dlzero.runfiles import TRAIN_CSV
    from dlzero.train.generation import train_generation

    cfg = config_from_dict({"model": TINY_MODEL,
                            "train": {"batch_size": 16, "steps_per_generation": 6, "reuse": 0, "device": "cpu",
                                      "lr": 0.02, "holdout_fraction": 0.2, "log_every": 1,
                                      "validation_set": "", "validation_positions": 0}})
    assert (cfg.train.lr_schedule, cfg.train.supervised_lr_schedule) == ("constant", "cosine")
    data = tmp_path / "teacher.hcpe3"
    write_teacher_games(data)
    rd = RunDir.create(tmp_path / "run", cfg)
    with caplog.at_level("INFO", logger="dlzero.train"):
        warm_start(rd, cfg, [data], steps=6, progress=False)
        write_hcpe3(rd.data_dir_for(0) / "shard-000.hcpe3", selfplay_games(3, 20, seed=1))
        assert train_generation(rd, cfg, progress=False).generation == 1

    def lrs(metrics: Path) -> list[float]:
        return [float(row["lr"]) for row in csv.DictReader(metrics.open())]

    cosine = [0.02 * 0.5 * (1 + math.cos(math.pi * step / 6)) for step in range(6)]
    assert lrs(rd.train_dir / "warm-start" / TRAIN_CSV) == pytest.approx(cosine, rel=1e-4)
    assert lrs(rd.metrics_dir / TRAIN_CSV) == pytest.approx([0.02] * 6, rel=1e-4)
    assert json.loads((rd.train_dir / "warm-start" / "report.json").read_text())["lr_schedule"] == "cosine"
    messages = [r.getMessage() for r in caplog.records]
    assert "supervised training: LR schedule cosine from 0.02 (train.supervised_lr_schedule)" in messages
    assert "generation 1: LR schedule constant from 0.02 (train.lr_schedule)" in messages


# ---------------------------------------------------------------- train.relabel: the run's own games


def test_relabel_gives_each_shard_a_twin_and_training_reads_the_twins(engine, tmp_path):
    from dlzero.runfiles import VALIDATION_CSV
    from dlzero.teacher.relabel_run import relabel_shards
    from dlzero.train.dataset import count_positions
    from dlzero.train.generation import train_generation
    from dlzero.train.train_state import load_checkpoint
    from dlzero.train.validation import read_rows

    spec = f"{engine};Eval=40"
    cfg = config_from_dict({"model": TINY_MODEL,
                            "train": {"batch_size": 16, "steps_per_generation": 2, "min_steps": 1, "device": "cpu",
                                      "validation_set": "", "relabel": spec, "checkpoint_every": 2}})
    rd = RunDir.create(tmp_path / "run", cfg)
    first = rd.data_dir_for(0) / "shard-000.hcpe3"
    write_hcpe3(first, selfplay_games(3, 20, seed=1))
    report = relabel_shards(rd, spec)
    assert (report.shards, report.positions, report.kept) == (1, 60, 0)
    twin = rd.relabelled(first)
    assert twin == rd.root / "relabelled" / "gen-0000" / "shard-000.hcpe3"
    for old, new in zip(read_hcpe3(first), read_hcpe3(twin), strict=True):
        assert [m.move16 for m in new.moves] == [m.move16 for m in old.moves] and new.result == old.result
        assert check_label_plies(new, 1, 40) == 20  # every ply, the opening ones too, with the teacher's eval
    assert relabel_shards(rd, spec).kept == 1  # current: not asked again
    assert relabel_shards(rd, f"{engine};Eval=60").shards == 1  # another teacher: made again
    assert check_label_plies(read_hcpe3(twin)[0], 1, 60) == 20
    relabel_shards(rd, spec)

    save_model(new_model(cfg.model, seed=1), rd.model_path(0))
    rd.set_best(0)
    write_hcpe3(rd.data_dir_for(0) / "shard-001.hcpe3", selfplay_games(3, 20, seed=2))  # written after the relabelling
    res = train_generation(rd, cfg, progress=False)
    plan = load_checkpoint(rd.train_dir / "checkpoint.pt", cfg.model)["segment"]["plan"]
    assert plan["source"] == "relabelled" and [s for s, _ in plan["shards"]] == ["gen-0000/shard-000.hcpe3"]
    assert res.total_positions == count_positions(read_hcpe3(twin)) == 60  # self-play's own rows: 54
    rows = [r for r in read_rows(rd.metrics_dir / VALIDATION_CSV) if r["set"] == "next"]
    assert rows and all(r["positions"] == "108" for r in rows)  # held out: both self-play shards as played

    report = relabel_shards(rd, spec)  # the next generation's relabelling picks the late shard up
    assert (report.shards, report.kept) == (1, 1)
    assert train_generation(rd, cfg, progress=False).total_positions == 120


def test_loop_relabel_flag_and_a_bad_teacher(tmp_path):
    from dlzero.cli import build_parser
    from dlzero.commands import loop as loop_cmd
    from dlzero.commands.common import overrides
    from dlzero.config import load_config

    args = build_parser().parse_args(["loop", "--run", "r", "--relabel", "miniosl"])
    assert load_config(None, overrides(args, loop_cmd.FLAGS)).train.relabel == "miniosl"
    args = build_parser().parse_args(["loop", "--run", str(tmp_path / "r"), "--relabel", "stockfish", "--quiet"])
    with pytest.raises(TeacherError, match="expected usi:COMMAND"):
        loop_cmd.run(args)
    assert not (tmp_path / "r" / "models" / "gen-0000.pt").exists()  # refused before any model or game
