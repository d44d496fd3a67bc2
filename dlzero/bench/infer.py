"""Inference throughput per backend and batch size, plus the encoder's rate."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import cshogi
import numpy as np

from dlzero.bench.timing import rate
from dlzero.config import Config, InferenceConfig
from dlzero.encoding import Encoder, new_batch_buffer
from dlzero.inference import Evaluator, OnnxEvaluator, TorchEvaluator, load_model
from dlzero.model import ModelMetadata, load_model_file, new_model
from dlzero.model.export import onnx_bytes


def sample_boards(n: int, seed: int = 0, min_ply: int = 10, max_ply: int = 80) -> list[cshogi.Board]:
    """Positions from random play, with their move history (as search would see them)."""
    rng = random.Random(seed)
    boards = []
    while len(boards) < n:
        board = cshogi.Board()
        for _ in range(rng.randint(min_ply, max_ply)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if not board.is_game_over():
            boards.append(board)
    return boards


def make_evaluator(backend: str, model_path: str | None, cfg: Config) -> Evaluator:
    """`torch` (configured optimisation), `torch-eager`, or `onnx` on the given or a random model."""
    inf: InferenceConfig = cfg.inference
    if model_path and Path(model_path).suffix == ".onnx":
        return load_model(model_path, replace(inf, backend="onnx"))
    if model_path:
        model, meta = load_model_file(model_path)
    else:
        model, meta = new_model(cfg.model, seed=0).eval(), ModelMetadata()
    if backend == "onnx":
        return OnnxEvaluator(onnx_bytes(model, meta), replace(inf, backend="onnx"), meta, source="bench")
    if backend == "torch-eager":
        return TorchEvaluator(model, replace(inf, optimize="none"), meta)
    if backend == "torch":
        return TorchEvaluator(model, inf, meta)
    raise ValueError(f"unknown backend '{backend}' (torch, torch-eager, onnx)")


def bench_encoder(n_positions: int = 256, seconds: float = 1.0) -> float:
    """Positions per second of `Encoder.encode_batch` on mid-game positions."""
    boards = sample_boards(n_positions)
    enc = Encoder()
    buf = new_batch_buffer(n_positions)
    return rate(lambda: len(enc.encode_batch(boards, buf)), seconds)


def bench_inference(backends: list[str], batches: list[int], model_path: str | None, cfg: Config,
                    seconds: float = 1.5) -> Iterator[dict]:
    """One row per (backend, batch): positions/s of `Evaluator.evaluate` on encoded real positions."""
    boards = sample_boards(max(batches))
    planes = new_batch_buffer(max(batches))
    Encoder().encode_batch(boards, planes)
    for backend in backends:
        ev = make_evaluator(backend, model_path, cfg)
        for b in batches:
            x = planes[:b]
            pos_s = rate(lambda x=x, ev=ev: (ev.evaluate(x), len(x))[1], seconds)
            yield {"backend": backend, "batch": b, "positions_per_s": round(pos_s, 1),
                   "ms_per_batch": round(1000.0 * b / pos_s, 3), "describe": ev.describe()}
        ev.close()


def encoded_sample(n: int, seed: int = 0) -> np.ndarray:
    """`n` encoded random-play positions (for parity checks)."""
    buf = new_batch_buffer(n)
    Encoder().encode_batch(sample_boards(n, seed), buf)
    return buf
