"""One-call GPU check: CUDA inference parity and speed, search and self-play rates.

Run on a machine with CUDA (`bash scripts/gpu_check.sh`). It prints:
1. parity: torch CUDA fp32 / fp16 / bf16 (and CUDA graphs) against torch CPU fp32 on real positions;
   onnxruntime's CUDA provider too when this onnxruntime build has it;
2. inference positions/s for 5x64, 10x192 and 20x256 at several batch sizes, fp16 and CUDA graphs;
3. search simulations/s (one tree, 256 leaves per call; 256 trees in lockstep) for 10x192;
4. self-play positions/s for 10x192 with G = 64 and 256 games in lockstep;
5. inference server (configs/gpu-1.yaml, 10x192 fp16) with 4, 8 and 14 self-play workers:
   evaluations/s, mean batch, busy share (the issue's goal: >= 50k evaluations/s on an H200).
Everything should stay under 5 minutes on one H200.
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch

from dlzero.bench.infer import encoded_sample
from dlzero.bench.timing import rate
from dlzero.config import Config, InferenceConfig, ModelConfig
from dlzero.inference import TorchEvaluator
from dlzero.model import ModelMetadata, new_model


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def parity() -> None:
    model = new_model(ModelConfig(blocks=10, channels=192), seed=0).eval()
    x = encoded_sample(256)
    ref_p, ref_v = TorchEvaluator(model, InferenceConfig(device="cpu", optimize="none")).evaluate(x)
    for precision, optimize in (("fp32", "none"), ("fp16", "none"), ("bf16", "none"), ("fp16", "cuda_graphs")):
        ev = TorchEvaluator(new_model(ModelConfig(blocks=10, channels=192), seed=0).eval(),
                            InferenceConfig(device="cuda", precision=precision, optimize=optimize))
        p, v = ev.evaluate(x)
        agree = float((p.argmax(1) == ref_p.argmax(1)).mean())
        emit(check="parity", backend="torch", precision=precision, optimize=optimize,
             max_abs_policy=float(np.abs(p - ref_p).max()), max_abs_value=float(np.abs(v - ref_v).max()),
             top1_agreement=agree)
    try:
        import onnxruntime as ort

        if "CUDAExecutionProvider" in ort.get_available_providers():
            from dlzero.inference import OnnxEvaluator
            from dlzero.model.export import onnx_bytes

            ev = OnnxEvaluator(onnx_bytes(model, ModelMetadata()), InferenceConfig(device="cuda"))
            p, v = ev.evaluate(x)
            emit(check="parity", backend="onnx-cuda", max_abs_policy=float(np.abs(p - ref_p).max()),
                 max_abs_value=float(np.abs(v - ref_v).max()))
        else:
            emit(check="parity", backend="onnx-cuda", skipped="no CUDAExecutionProvider in this onnxruntime")
    except ImportError:
        emit(check="parity", backend="onnx-cuda", skipped="onnxruntime not installed")


def inference_speed() -> None:
    for blocks, channels in ((5, 64), (10, 192), (20, 256)):
        for optimize in ("none", "cuda_graphs"):
            ev = TorchEvaluator(new_model(ModelConfig(blocks=blocks, channels=channels), seed=0).eval(),
                                InferenceConfig(device="cuda", precision="fp16", optimize=optimize, max_batch=1024))
            for batch in (64, 256, 1024):
                x = encoded_sample(batch)
                pos_s = rate(lambda x=x, ev=ev: (ev.evaluate(x), len(x))[1], 1.0)
                emit(check="inference", model=f"b{blocks}c{channels}", optimize=optimize, batch=batch,
                     positions_per_s=round(pos_s))


def search_and_selfplay() -> None:
    from dlzero.bench.search import bench_search
    from dlzero.bench.selfplay import bench_selfplay

    cfg = Config()
    cfg.model = ModelConfig(blocks=10, channels=192)
    cfg.inference = InferenceConfig(device="cuda", precision="fp16", optimize="cuda_graphs", max_batch=1024)
    for row in bench_search(["torch"], [256], None, cfg, playouts=4096):
        emit(check="search", **row)
    for row in bench_selfplay(cfg, [64, 256], moves=8, backend="torch"):
        emit(check="selfplay", **row)


def server() -> None:
    from pathlib import Path

    from dlzero.bench.server import bench_server
    from dlzero.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "gpu-1.yaml")
    for row in bench_server(cfg, [4, 8, 14], seconds=8.0):
        emit(check="server", **row)


if __name__ == "__main__":
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device visible to torch")
    emit(check="device", name=torch.cuda.get_device_name(0), torch=torch.__version__)
    start = time.perf_counter()
    for step in (parity, inference_speed, server, search_and_selfplay):
        t0 = time.perf_counter()
        step()
        emit(check="timing", step=step.__name__, seconds=round(time.perf_counter() - t0, 1))
    emit(check="done", seconds=round(time.perf_counter() - start, 1))
