"""Inference throughput per backend and batch size, plus the encoder's rate."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import cshogi
import numpy as np

from dlzero.bench.timing import paired_rates, rate
from dlzero.config import Config, InferenceConfig
from dlzero.encoding import Encoder, new_batch_buffer
from dlzero.inference import Evaluator, OnnxEvaluator, TorchEvaluator, load_model
from dlzero.inference.int8 import calibration_for, fp32_bytes, ungated_int8
from dlzero.model import ModelMetadata, load_model_file, new_model
from dlzero.model.calibration import from_random_games, random_boards
from dlzero.model.export import onnx_bytes
from dlzero.model.quantize import Accuracy


def sample_boards(n: int, seed: int = 0, min_ply: int = 10, max_ply: int = 80) -> list[cshogi.Board]:
    """Positions from random play, with their move history (as search would see them)."""
    return random_boards(n, seed, min_ply, max_ply)


def int8_evaluator(model_path: str | None, cfg: Config) -> tuple[OnnxEvaluator, Accuracy]:
    """The int8 model of the given or a random model, quantized whatever the gate says (a benchmark
    measures speed), with its accuracy against fp32 on held-out positions.

    Recipe: the gate's first (`dlzero.inference.int8.ungated_int8`).
    """
    q = cfg.inference.quantize
    if model_path:
        fp32, data = fp32_bytes(model_path), calibration_for(model_path, q)
    else:
        model = new_model(cfg.model, seed=0).eval()
        fp32 = onnx_bytes(model, ModelMetadata())
        data = from_random_games(q.calibration_positions, q.holdout_positions)
    int8, recipe, acc = ungated_int8(fp32, data, q)
    inf = replace(cfg.inference, backend="onnx", precision="auto")
    return OnnxEvaluator(int8, inf, source=f"bench int8 ({recipe})"), acc


def make_evaluator(backend: str, model_path: str | None, cfg: Config) -> Evaluator:
    """`torch` (configured optimisation), `torch-eager`, `onnx` or `onnx-int8` on the given or a random
    model; `onnx` with `inference.precision: int8` is `onnx-int8`."""
    inf: InferenceConfig = cfg.inference
    if backend == "onnx-int8" or (backend == "onnx" and inf.precision == "int8"):
        return int8_evaluator(model_path, cfg)[0]
    if inf.precision == "int8":
        inf = replace(inf, precision="auto")  # int8 applies to the onnx rows only
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
    raise ValueError(f"unknown backend '{backend}' (torch, torch-eager, onnx, onnx-int8)")


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
    fp32_onnx: Evaluator | None = None  # kept for the int8 rows' interleaved comparison
    for backend in backends:
        extra: dict = {}
        if backend == "onnx-int8":
            ev, acc = int8_evaluator(model_path, cfg)
            extra = {"top1_vs_fp32": round(acc.top1, 4), "value_mae": round(acc.value_mae, 5)}
        else:
            ev = make_evaluator(backend, model_path, cfg)
        for b in batches:
            x = planes[:b]
            pos_s = rate(lambda x=x, ev=ev: (ev.evaluate(x), len(x))[1], seconds)
            ratio = {}
            if backend == "onnx-int8" and fp32_onnx is not None:
                fp, q = paired_rates(lambda x=x, ref=fp32_onnx: (ref.evaluate(x), len(x))[1],
                                     lambda x=x, ev=ev: (ev.evaluate(x), len(x))[1], seconds)
                ratio = {"vs_onnx_fp32": round(q / fp, 2)}
            yield {"backend": backend, "batch": b, "positions_per_s": round(pos_s, 1),
                   "ms_per_batch": round(1000.0 * b / pos_s, 3), "describe": ev.describe(), **extra, **ratio}
        if backend == "onnx" and fp32_onnx is None:
            fp32_onnx = ev
        else:
            ev.close()
    if fp32_onnx is not None:
        fp32_onnx.close()


def encoded_sample(n: int, seed: int = 0) -> np.ndarray:
    """`n` encoded random-play positions (for parity checks)."""
    buf = new_batch_buffer(n)
    Encoder().encode_batch(sample_boards(n, seed), buf)
    return buf
