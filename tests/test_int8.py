"""int8 models: real onnxruntime quantization of a small model on real encoded positions, the
accuracy gate (accepting and rejecting), the search gate (real searches with fp32 and int8),
metadata round trip, run calibration, loader fallback."""

from __future__ import annotations

import json
import logging
import os
import random
from dataclasses import replace
from pathlib import Path

import cshogi
import numpy as np
import onnx
import pytest
import torch
from conftest import TINY_MODEL, TINY_MODEL_SETS

from dlzero.config import Config, InferenceConfig, ModelConfig, QuantizeConfig, SearchConfig
from dlzero.data.hcpe3 import Hcpe3Record, MoveRecord, write_hcpe3
from dlzero.encoding import Encoder, new_batch_buffer
from dlzero.errors import BackendError, DataError
from dlzero.inference import OnnxEvaluator, load_model
from dlzero.inference.int8 import calibration_for, ensure_int8, int8_path, make_int8, stored_report
from dlzero.model import ModelMetadata, new_model, save_model
from dlzero.model.calibration import from_random_games, from_shards
from dlzero.model.export import onnx_bytes
from dlzero.model.quantize import QUANT_KEY, QuantReport, layer_nodes, prepare, quantize_with_gate, read_report
from dlzero.rundir import RunDir

SMALL = ModelConfig(**TINY_MODEL)
FAST = QuantizeConfig(calibration="minmax", keep_fp32="auto", calibration_positions=64, holdout_positions=128)
IMPOSSIBLE = replace(FAST, min_top1=1.0, max_value_error=0.0, keep_fp32="none")
SEARCHED = replace(FAST, gate_positions=48, gate_playouts=16)  # the search gate, small enough for a test


def _confident_model(seed: int = 0):
    """A small net with a strong move prior, as trained nets have (random nets' near-tied logits are the
    hardest case for int8: any rounding flips their top move)."""
    model = new_model(SMALL, seed=seed).eval()
    with torch.no_grad():
        model.policy_bias.copy_(torch.randn(model.policy_bias.shape, generator=torch.Generator().manual_seed(seed)) * 4)
    return model


def _quant_nodes(path_or_bytes) -> int:
    proto = onnx.load_from_string(path_or_bytes) if isinstance(path_or_bytes, bytes) else onnx.load(str(path_or_bytes))
    return sum(n.op_type == "QuantizeLinear" for n in proto.graph.node)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("int8") / "net.pt"
    save_model(_confident_model(), path, ModelMetadata(generation=3, name="small"))
    return path


@pytest.fixture(scope="module")
def positions():
    return from_random_games(FAST.calibration_positions, FAST.holdout_positions, seed=5)


def _fp32_outputs(path: Path, planes: np.ndarray):
    return load_model(path, InferenceConfig(backend="onnx", device="cpu", precision="fp32")).evaluate(planes)


def test_gate_accepts_real_quantization_and_stores_figures(model_file, positions):
    fp32 = onnx_bytes(_confident_model(), ModelMetadata(generation=3, name="small"))
    payload, report = quantize_with_gate(fp32, positions, FAST)
    assert report.accepted, report.reason
    assert report.accuracy.top1 >= FAST.min_top1 and report.accuracy.value_mae <= FAST.max_value_error
    assert report.method == "minmax" and report.keep_fp32 in ("none", "heads", "stem", "stem+heads")
    assert report.accuracy.positions == len(positions.holdout) == FAST.holdout_positions
    assert _quant_nodes(payload) > 0  # a real int8 graph, not the fp32 one
    # the figures are real: recompute them from independent sessions
    ev_q = OnnxEvaluator(payload, InferenceConfig(device="cpu"))
    ev_f = OnnxEvaluator(fp32, InferenceConfig(device="cpu"))
    (pq, vq), (pf, vf) = ev_q.evaluate(positions.holdout), ev_f.evaluate(positions.holdout)
    legal = positions.holdout_legal
    top1 = float((np.where(legal, pq, -np.inf).argmax(1) == np.where(legal, pf, -np.inf).argmax(1)).mean())
    assert top1 == pytest.approx(report.accuracy.top1)
    assert float(np.abs(vq - vf).mean()) == pytest.approx(report.accuracy.value_mae, abs=1e-7)
    assert not np.array_equal(vq, vf)  # quantized arithmetic really ran
    assert ev_q.quant_report == report and "int8" in ev_q.describe()
    assert ev_q.metadata.generation == 3 and ev_q.metadata.name == "small"  # the dlzero header survives


@pytest.mark.parametrize("method", ["percentile", "entropy", "minmax"])
def test_every_calibration_method_takes_a_position_count_that_is_no_multiple_of_the_batch(method):
    """A young run has fewer calibration positions than asked for, in no round number: 70 positions once
    crashed onnxruntime's percentile collector (a short last batch cannot be stacked with the others)."""
    data = from_random_games(70, 64, seed=9)
    assert len(data.calibration) == 70
    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    payload, report = quantize_with_gate(fp32, data, replace(FAST, calibration=method, keep_fp32="none",
                                                             min_top1=0.0, max_value_error=1.0))
    assert report.accepted and report.method == method and _quant_nodes(payload) > 0


def test_gate_rejects_and_falls_back_to_fp32(positions):
    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    payload, report = quantize_with_gate(fp32, positions, IMPOSSIBLE)
    assert not report.accepted
    assert "mean |value difference|" in report.reason and report.attempts and not any(a.passed for a in report.attempts)
    assert _quant_nodes(payload) == 0
    ev = OnnxEvaluator(payload, InferenceConfig(device="cpu"))
    p, v = ev.evaluate(positions.holdout)
    p0, v0 = OnnxEvaluator(fp32, InferenceConfig(device="cpu")).evaluate(positions.holdout)
    np.testing.assert_array_equal(v, v0)
    np.testing.assert_array_equal(p, p0)
    assert ev.describe().endswith("fp32 (int8 rejected)")


def test_broken_calibration_is_rejected_at_default_thresholds(positions):
    """The model that passes with real positions fails when calibrated on absurd inputs (ranges far too wide)."""
    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    broken = replace(positions, calibration=positions.calibration * 1000.0)  # ranges ~1000x too wide
    _, report = quantize_with_gate(fp32, broken, replace(FAST, keep_fp32="none"))
    assert not report.accepted and report.reason.startswith("no recipe passed the accuracy gate")
    assert report.accuracy.top1 < FAST.min_top1 or report.accuracy.value_mae > FAST.max_value_error


def _judge(cfg: QuantizeConfig = SEARCHED):
    from dlzero.engine.int8_gate import SearchJudge

    return SearchJudge(SearchConfig(), cfg)


def test_search_gate_finds_fp32_plays_like_itself_and_another_network_not(positions):
    """Real searches: fp32 against itself plays the same move everywhere with the same win rate (the gate's
    searches are deterministic); a network with other weights plays other moves and fails the gate."""
    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    judge = _judge()
    judge.start(fp32, positions)
    assert len(judge.boards) == SEARCHED.gate_positions
    itself = judge.judge(fp32)
    assert (itself.agreement, itself.same_move, itself.winrate_mae, itself.winrate_max) == (1.0, 1.0, 0.0, 0.0)
    assert (itself.positions, itself.playouts) == (SEARCHED.gate_positions, SEARCHED.gate_playouts)
    other = judge.judge(onnx_bytes(_confident_model(seed=1), ModelMetadata()))
    assert other.same_move <= other.agreement < SEARCHED.min_play_agreement
    assert other.winrate_mae > 0.0


def test_search_gate_counts_a_move_fp32_searched_nearly_as_much(positions):
    """int8's move plays like fp32 when fp32's own search gave it at least gate_near of its choice's visits."""
    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    judge = _judge()
    judge.start(fp32, positions)

    def runner_up(ref):
        return max((s for s in ref.stats.values() if s.move != ref.move), key=lambda s: s.visits, default=None)

    ref = next(r for r in judge.reference if runner_up(r) is not None
               and 0 < runner_up(r).visits < r.stats[r.move].visits and all(s.proven is None for s in r.stats.values()))
    second = runner_up(ref)
    share = second.visits / ref.stats[ref.move].visits
    judge.cfg = replace(SEARCHED, gate_near=share)
    assert judge.plays_like(ref, ref.move) and judge.plays_like(ref, second.move)
    judge.cfg = replace(SEARCHED, gate_near=share + 1e-6)
    assert judge.plays_like(ref, ref.move) and not judge.plays_like(ref, second.move)


def test_search_gate_decides_and_the_report_holds_both_figures(positions):
    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    # the raw thresholds cannot be met, yet with a judge only the search's figures count
    cfg = replace(SEARCHED, min_top1=1.0, max_value_error=0.0)
    payload, report = quantize_with_gate(fp32, positions, cfg, judge=_judge(cfg))
    assert report.accepted and report.gate == "search" and "search gate" in report.reason, report.reason
    assert report.play.agreement >= cfg.min_play_agreement and report.play.winrate_mae <= cfg.max_winrate_error
    assert report.accuracy.positions == len(positions.holdout) and report.accuracy.top1 < 1.0  # raw: measured
    assert all(a.play is not None and a.play.positions == cfg.gate_positions for a in report.attempts)
    assert _quant_nodes(payload) > 0
    stored = read_report({p.key: p.value for p in onnx.load_from_string(payload).metadata_props})
    assert stored == report  # both figures in the file's metadata
    assert "plays like fp32 on" in report.summary() and "raw top-1" in report.summary()

    strict = replace(SEARCHED, min_play_agreement=1.0, max_winrate_error=0.0, min_top1=0.0, max_value_error=1.0)
    payload, report = quantize_with_gate(fp32, positions, strict, judge=_judge(strict))
    assert not report.accepted and _quant_nodes(payload) == 0
    assert report.reason.startswith("no recipe passed the search gate") and "win rate difference" in report.reason
    assert report.play is not None and "raw top-1" in report.summary()  # the raw figures still printed


def test_reports_made_before_the_search_gate_still_read():
    old = {"accepted": True, "reason": "passed the gate", "method": "minmax", "keep_fp32": "none",
           "accuracy": {"top1": 0.995, "value_mae": 0.004, "value_max": 0.02, "positions": 512},
           "attempts": [{"method": "minmax", "keep_fp32": "none", "passed": True,
                         "accuracy": {"top1": 0.995, "value_mae": 0.004, "value_max": 0.02, "positions": 512}}],
           "calibration": "random games", "calibration_positions": 1024, "holdout_positions": 512, "settings": {}}
    report = read_report({QUANT_KEY: json.dumps(old)})
    assert report.gate == "raw" and report.play is None and report.attempts[0].play is None
    assert QuantReport.from_json(report.to_json()) == report


def test_layer_nodes_split_stem_trunk_heads():
    graph = prepare(onnx_bytes(new_model(SMALL, seed=0), ModelMetadata())).graph
    layers = layer_nodes(graph)
    assert any("/stem/" in n for n in layers["stem"]) and not any("/tower" in n for n in layers["stem"])
    assert {n for n in layers["heads"] if "Conv" in n or "Gemm" in n} == {
        n.name for n in graph.node if n.op_type in ("Conv", "Gemm") and ("/policy" in n.name or "/value" in n.name)}
    assert layers["stem+heads"] == layers["stem"] | layers["heads"]


def test_metadata_round_trip_and_on_demand_freshness(model_file, caplog):
    target = int8_path(model_file)
    assert target.name == "net.int8.onnx" and target.parent == model_file.parent
    if target.exists():
        target.unlink()
    with caplog.at_level(logging.INFO, logger="dlzero.int8"):
        assert ensure_int8(model_file, FAST) == target  # made on demand
    assert any("int8 accepted" in r.getMessage() for r in caplog.records)
    report = stored_report(target)
    assert report.accepted and report.settings["calibration"] == "minmax"
    assert report.calibration.startswith("random games")  # a bare model file: the fallback positions
    stamp = target.stat().st_mtime_ns
    ensure_int8(model_file, FAST)
    assert target.stat().st_mtime_ns == stamp  # fresh: not remade
    ensure_int8(model_file, replace(FAST, calibration="percentile"))
    assert stored_report(target).settings["calibration"] == "percentile"  # other settings: remade
    older = model_file.stat().st_mtime - 10
    os.utime(target, (older, older))  # the model is now newer than its int8 file
    ensure_int8(model_file, replace(FAST, calibration="percentile"))
    assert target.stat().st_mtime >= model_file.stat().st_mtime  # remade


def test_a_raw_gate_file_is_remade_when_the_search_gate_is_given(model_file):
    """The loader's raw-gate file must not stand in for the search gate's (the loop and self-play give one):
    the raw gate rejects int8 where the search gate passes it, so the network would play fp32 for nothing."""
    from dlzero.engine.int8_gate import SearchJudge

    target = int8_path(model_file)
    ensure_int8(model_file, SEARCHED)
    raw = stored_report(target)
    assert raw.gate == "raw" and raw.play is None
    stamp = target.stat().st_mtime_ns
    ensure_int8(model_file, SEARCHED, SearchJudge(SearchConfig(), SEARCHED))
    searched = stored_report(target)
    assert searched.gate == "search" and searched.play.positions == SEARCHED.gate_positions
    assert target.stat().st_mtime_ns != stamp
    stamp = target.stat().st_mtime_ns
    ensure_int8(model_file, SEARCHED)  # a raw caller takes the search gate's file as it is
    ensure_int8(model_file, SEARCHED, SearchJudge(SearchConfig(), SEARCHED))  # and so does the next judge
    assert target.stat().st_mtime_ns == stamp and stored_report(target).gate == "search"


def test_loader_uses_int8_or_its_fp32_fallback(model_file, positions, caplog):
    cfg = InferenceConfig(backend="auto", device="cpu", precision="int8", quantize=FAST)
    ev = load_model(model_file, cfg)
    assert isinstance(ev, OnnxEvaluator) and ev.quant_report.accepted and ev.describe().endswith("int8")
    p0, v0 = _fp32_outputs(model_file, positions.holdout)
    p, v = ev.evaluate(positions.holdout)
    assert not np.array_equal(v, v0) and np.abs(v - v0).mean() <= FAST.max_value_error

    with caplog.at_level(logging.WARNING, logger="dlzero.int8"):
        fallback = load_model(model_file, replace(cfg, quantize=IMPOSSIBLE))
    assert not fallback.quant_report.accepted
    assert any("int8 rejected, running fp32" in r.getMessage() for r in caplog.records)
    p, v = fallback.evaluate(positions.holdout)
    np.testing.assert_allclose(v, v0, atol=1e-6)
    np.testing.assert_allclose(p, p0, atol=1e-5)


def test_int8_on_torch_is_a_clear_error(model_file):
    with pytest.raises(BackendError, match="int8 runs on onnxruntime"):
        load_model(model_file, InferenceConfig(backend="torch", device="cpu", precision="int8", quantize=FAST))


def _game_from_own_start(rng: random.Random) -> Hcpe3Record:
    """A random game from its own random start position, so no two games share a position."""
    board = cshogi.Board()
    for _ in range(12):
        board.push(rng.choice(list(board.legal_moves)))
    game = Hcpe3Record.from_board(board)
    for _ in range(30):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        game.moves.append(MoveRecord(move & 0xFFFF, 0, np.array([[move & 0xFFFF, 10]], np.uint16)))
        board.push(move)
    return game


def test_run_model_calibrates_on_its_own_selfplay_with_separate_games(tmp_path):
    cfg = Config()
    cfg.model = SMALL
    rd = RunDir.create(tmp_path / "run", cfg)
    save_model(_confident_model(), rd.model_path(0), ModelMetadata(generation=0))
    rng = random.Random(1)
    shards = []
    for i in range(2):
        shards.append(rd.data_dir_for(0) / f"shard-{i}.hcpe3")
        write_hcpe3(shards[-1], [_game_from_own_start(rng) for _ in range(6)])
    data = calibration_for(rd.model_path(0), FAST)
    assert data.source.startswith("self-play: 12 games in 2 shard(s)")
    assert len(data.calibration) == FAST.calibration_positions and len(data.holdout) == FAST.holdout_positions
    # the gate's positions come from other games: no hold-out position is a calibration position
    cal = {row.tobytes() for row in data.calibration}
    assert not any(row.tobytes() in cal for row in data.holdout)
    # the search gate's boards are the held-out positions, history and all
    again_planes = new_batch_buffer(len(data.holdout_boards))
    np.testing.assert_array_equal(Encoder().encode_batch(data.holdout_boards, again_planes), data.holdout)
    # same shards read directly give the same split (deterministic), and a lone game cannot be split
    again = from_shards(sorted(shards, key=lambda p: p.stat().st_mtime, reverse=True), 64, 128)
    assert {r.tobytes() for r in again.calibration} == cal
    target, report = make_int8(rd.model_path(0), FAST, data=data)
    assert target == rd.models_dir / "gen-0000.int8.onnx" and report.calibration == data.source
    assert rd.generations() == [0]  # the int8 file is not mistaken for a generation


def test_precision_switch_for_onnxruntime_providers():
    from dlzero.inference.onnx_backend import session_precision, with_device

    cpu, cuda = ["CPUExecutionProvider"], ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert session_precision("auto", cpu) == "fp32" and session_precision("auto", cuda) == "fp16"
    assert session_precision("int8", cpu) == "int8" and session_precision("fp16", cuda) == "fp16"
    with pytest.raises(BackendError, match="bf16 is for the torch backend"):
        session_precision("bf16", cuda)
    with pytest.raises(BackendError, match="fp16 is for CUDA"):
        session_precision("fp16", cpu)
    trt = ["TensorrtExecutionProvider", *cuda]
    assert with_device(trt, "cuda:1", "int8")[0] == (
        "TensorrtExecutionProvider", {"device_id": 1, "trt_fp16_enable": True, "trt_int8_enable": True})
    assert with_device(trt, "cuda", "fp16")[:2] == [
        ("TensorrtExecutionProvider", {"device_id": 0, "trt_fp16_enable": True}),
        ("CUDAExecutionProvider", {"device_id": 0})]


def test_fp16_graph_keeps_float32_interface_and_outputs(positions):
    from dlzero.model.export import fp16_onnx

    fp32 = onnx_bytes(_confident_model(), ModelMetadata())
    half = fp16_onnx(fp32)
    proto = onnx.load_from_string(half)
    assert {i.data_type for i in proto.graph.initializer if i.name.endswith("weight")} == {onnx.TensorProto.FLOAT16}
    cfg = InferenceConfig(device="cpu")
    p16, v16 = OnnxEvaluator(half, cfg).evaluate(positions.holdout)  # the CPU provider runs fp16 graphs too
    p32, v32 = OnnxEvaluator(fp32, cfg).evaluate(positions.holdout)
    assert p16.dtype == np.float32 and v16.shape == v32.shape
    np.testing.assert_allclose(v16, v32, atol=5e-3)
    np.testing.assert_allclose(p16, p32, atol=5e-2)
    assert not np.array_equal(p16, p32)  # really computed from half-precision weights


def test_export_int8_writes_both_models(model_file, tmp_path):
    from dlzero.cli import main

    out = tmp_path / "exported.onnx"
    q = "inference.quantize"
    rc = main(["export", str(model_file), "--out", str(out), "--int8", "--set", f"{q}.calibration=minmax",
               "--set", f"{q}.calibration_positions=48", "--set", f"{q}.holdout_positions=96"])
    assert rc == 0 and out.is_file()
    report = stored_report(tmp_path / "exported.int8.onnx")
    assert report.accepted and report.calibration_positions == 48 and report.holdout_positions == 96
    assert report.gate == "search" and report.play.positions == 96  # the search gate decided, on the whole hold-out
    assert stored_report(out) is None  # the fp32 export stays a plain model


def test_bench_infer_has_an_int8_row_beside_fp32():
    from dlzero.bench.infer import bench_inference

    cfg = Config()
    cfg.model = SMALL
    cfg.inference = InferenceConfig(device="cpu", threads=1, quantize=replace(FAST, calibration="minmax"))
    rows = {r["backend"]: r for r in bench_inference(["onnx", "onnx-int8"], [8], None, cfg, seconds=0.05)}
    int8 = rows["onnx-int8"]
    assert int8["vs_onnx_fp32"] > 0 and 0.0 <= int8["top1_vs_fp32"] <= 1.0 and int8["value_mae"] >= 0.0
    assert "vs_onnx_fp32" not in rows["onnx"]


def test_calibration_from_a_folder_of_records(tmp_path):
    from dlzero.model.calibration import from_path

    moves = ["+7776FU", "-3334FU", "+2726FU", "-8384FU", "+2625FU", "-8485FU", "+6978KI", "-4132KI"]
    (tmp_path / "game.csa").write_text("V2.2\nN+a\nN-b\nPI\n+\n" + "\n".join(moves) + "\n%TORYO\n")
    data = from_path(tmp_path, 4, 4)
    assert data.source.startswith("records: 8 positions from 1 file(s)")
    assert len(data.calibration) == 4 and len(data.holdout) == 4
    assert data.holdout_legal.any(axis=1).all()  # every held-out position has legal moves to compare
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no .hcpe3 shard and no CSA/KIF record"):
        from_path(tmp_path / "empty", 4, 4)


def test_bench_selfplay_compares_precisions_in_one_run():
    from dlzero.bench.selfplay import bench_selfplay

    cfg = Config()
    cfg.model = SMALL
    cfg.inference = InferenceConfig(device="cpu", threads=1, quantize=replace(FAST, calibration="minmax"))
    cfg.selfplay = replace(cfg.selfplay, playouts=4, cheap_playouts=2)
    rows = list(bench_selfplay(cfg, [2], moves=4, precisions=["fp32", "int8"], rounds=2))
    assert [(r["precision"], r["parallel"]) for r in rows] == [("fp32", 2), ("int8", 2)]
    assert "vs_first" not in rows[0] and rows[1]["vs_first"] > 0
    assert all(r["positions_per_s"] > 0 for r in rows)


def test_selfplay_command_plays_with_the_int8_model(tmp_path):
    from dlzero.cli import main
    from dlzero.data.hcpe3 import read_hcpe3

    q = "inference.quantize"
    sets = [*TINY_MODEL_SETS, "inference.backend=onnx",
            "inference.threads=1", "selfplay.playouts=4", "selfplay.cheap_playouts=2", "selfplay.max_moves=20",
            "selfplay.games_in_parallel=2", f"{q}.calibration=minmax", f"{q}.keep_fp32=none",
            f"{q}.calibration_positions=32", f"{q}.holdout_positions=64"]
    run = tmp_path / "run"
    rc = main(["selfplay", "--run", str(run), "--games", "2", "--workers", "1", "--precision", "int8", "--quiet",
               *[a for s in sets for a in ("--set", s)]])
    assert rc == 0
    rd = RunDir.open(run)
    report = stored_report(rd.models_dir / "gen-0000.int8.onnx")  # made once, before the workers started
    assert report is not None and report.settings["calibration"] == "minmax"
    assert report.gate == "search" and report.play is not None  # judged by what its search plays, as export does
    assert sum(len(read_hcpe3(p)) for p in rd.shards()) == 2
