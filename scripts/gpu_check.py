"""One-call GPU check: CUDA inference parity and speed, each precision, search and self-play rates.

Run on a machine with CUDA (`bash scripts/gpu_check.sh`); `--dry-run` runs only the CPU-safe rows
(and says which CUDA rows it skipped), so the script can be checked anywhere. It prints:
1. parity: torch CUDA fp32 / fp16 / bf16 (and CUDA graphs) against torch CPU fp32 on real positions;
   onnxruntime's CUDA provider too when this onnxruntime build has it;
1b. precision table (5x64 and 10x128, random weights): positions/s, top-1 agreement and max |dv| against
   onnxruntime CPU fp32 for onnx CPU fp32/int8 (one thread), torch CUDA fp32/fp16/bf16, onnxruntime
   CUDA fp32/fp16, TensorRT fp16/int8 (int8: the QDQ model calibrated as `inference.precision: int8`
   does, percentile calibration); rows whose provider is missing say so;
2. inference positions/s for 5x64, 10x192 and 20x256 at several batch sizes, fp16 and CUDA graphs;
3. search simulations/s (one tree, 256 leaves per call; 256 trees in lockstep) for 10x192;
4. self-play positions/s for 10x192 with G = 64 and 256 games in lockstep;
5. inference server (configs/gpu-1.yaml, 10x192 fp16) with 4, 8 and 14 self-play workers:
   evaluations/s, mean batch, busy share (the issue's goal: >= 50k evaluations/s on an H200);
6. training ms per step for 10x192 at batch 1024: fp32 and bf16, standard and channels-last layout.
Everything should stay under 5 minutes on one H200.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

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


def _row_for(make: Callable, x: np.ndarray, legal: np.ndarray, ref: tuple, batch: int,
             seconds: float) -> dict:
    ev = make()
    try:
        p, v = ev.evaluate(x)
        top1 = float((np.where(legal, p, -np.inf).argmax(1) == np.where(legal, ref[0], -np.inf).argmax(1)).mean())
        xb = x[:batch]
        pos_s = rate(lambda: (ev.evaluate(xb), len(xb))[1], seconds)
        return {"positions_per_s": round(pos_s), "batch": batch, "top1_vs_cpu_fp32": round(top1, 4),
                "max_abs_value": round(float(np.abs(v - ref[1]).max()), 5), "describe": ev.describe()}
    finally:
        ev.close()


def _candidates(model: torch.nn.Module, calibration: np.ndarray) -> list[tuple[str, str, str | None, Callable]]:
    """(backend, precision, what it needs, evaluator factory) for one model."""
    from dlzero.inference import OnnxEvaluator
    from dlzero.model.export import onnx_bytes
    from dlzero.model.quantize import prepare, quantize

    fp32 = onnx_bytes(model, ModelMetadata())
    int8 = quantize(prepare(fp32), calibration, "percentile")
    cpu1 = InferenceConfig(device="cpu", threads=1)
    cuda_ort = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    trt = ["TensorrtExecutionProvider", *cuda_ort]

    def torch_cuda(precision: str) -> Callable:
        return lambda: TorchEvaluator(model, InferenceConfig(device="cuda", precision=precision, optimize="none",
                                                             max_batch=1024))

    def onnx_gpu(graph: bytes, precision: str, providers: list[str]) -> Callable:
        return lambda: OnnxEvaluator(graph, InferenceConfig(device="cuda", precision=precision, providers=providers,
                                                            max_batch=1024))

    return [
        ("onnx cpu", "fp32", None, lambda: OnnxEvaluator(fp32, cpu1)),
        ("onnx cpu", "int8", None, lambda: OnnxEvaluator(int8, cpu1)),
        *[("torch cuda", p, "torch", torch_cuda(p)) for p in ("fp32", "fp16", "bf16")],
        *[("onnx cuda", p, "CUDAExecutionProvider", onnx_gpu(fp32, p, cuda_ort)) for p in ("fp32", "fp16")],
        ("onnx tensorrt", "fp16", "TensorrtExecutionProvider", onnx_gpu(fp32, "fp16", trt)),
        ("onnx tensorrt", "int8", "TensorrtExecutionProvider", onnx_gpu(int8, "int8", trt)),
    ]


def precision_table(cuda: bool = True, seconds: float = 1.0) -> list[dict]:
    """Each precision and backend on the same positions: speed and agreement with CPU fp32."""
    import onnxruntime as ort

    from dlzero.model.calibration import from_random_games

    available = ort.get_available_providers()
    data = from_random_games(256, 256, seed=3)
    x, legal = data.holdout, data.holdout_legal
    rows = []
    for blocks, channels in ((5, 64), (10, 128)):
        model = new_model(ModelConfig(blocks=blocks, channels=channels), seed=0).eval()
        candidates = _candidates(model, data.calibration)
        ref = candidates[0][3]().evaluate(x)  # onnxruntime CPU fp32
        for backend, precision, needs, make in candidates:
            row = {"check": "precision", "model": f"b{blocks}c{channels}", "backend": backend, "precision": precision}
            if needs and not cuda:
                row["skipped"] = "dry run" if torch.cuda.is_available() else "no CUDA device (dry run)"
            elif needs and needs != "torch" and needs not in available:
                row["skipped"] = f"this onnxruntime has no {needs} ({', '.join(available)})"
            else:
                try:
                    row.update(_row_for(make, x, legal, ref, 64 if needs is None else 256, seconds))
                except Exception as exc:  # one backend failing must not hide the others' figures
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            emit(**row)
            rows.append(row)
    _print_table(rows)
    return rows


def _print_table(rows: list[dict]) -> None:
    """The precision rows as a table on stderr (stdout stays JSON lines)."""
    print(f"{'model':>8} {'backend':>14} {'prec':>5} {'batch':>5} {'pos/s':>9} {'top1':>7} {'max|dv|':>8}  note",
          file=sys.stderr)
    for r in rows:
        note = r.get("skipped") or r.get("error") or r.get("describe", "")
        print(f"{r['model']:>8} {r['backend']:>14} {r['precision']:>5} {r.get('batch', ''):>5} "
              f"{r.get('positions_per_s', ''):>9} {r.get('top1_vs_cpu_fp32', ''):>7} {r.get('max_abs_value', ''):>8}"
              f"  {note}", file=sys.stderr, flush=True)


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
    # one batch in flight, and two (search.eval_streams: the tree collects while the GPU works)
    from dlzero.encoding.features import COMPILED_PLANES
    from dlzero.search.arena import COMPILED as COMPILED_TREE

    for row in bench_search(["torch"], [256], None, cfg, playouts=4096, layouts=[(0, 1), (0, 2)]):
        emit(check="search", compiled_tree=COMPILED_TREE, compiled_planes=COMPILED_PLANES, **row)
    for row in bench_selfplay(cfg, [64, 256], moves=8, backend="torch"):
        emit(check="selfplay", **row)


def training_speed(device: str = "cuda", blocks: int = 10, channels: int = 192, batch: int = 1024,
                   steps: int = 5) -> None:
    """Training ms per step and samples/s per precision and memory layout (`dlzero bench train`)."""
    import dataclasses

    from dlzero.bench.train import VARIANTS, bench_train

    cfg = Config()
    cfg.model = ModelConfig(blocks=blocks, channels=channels)
    cfg.train = dataclasses.replace(cfg.train, device=device, batch_size=batch)
    for row in bench_train(cfg, list(VARIANTS), steps=steps, rounds=2):
        emit(check="train", model=f"b{blocks}c{channels}", **row)


def server() -> None:
    from pathlib import Path

    from dlzero.bench.server import bench_server
    from dlzero.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "gpu-1.yaml")
    for row in bench_server(cfg, [4, 8, 14], seconds=8.0):
        emit(check="server", **row)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="only the CPU-safe rows of the precision table (CUDA rows are listed as skipped)")
    args = parser.parse_args()
    if args.dry_run:
        emit(check="dry-run", cuda=torch.cuda.is_available())
        precision_table(cuda=False, seconds=0.3)
        training_speed("cpu", blocks=1, channels=8, batch=8, steps=1)
        raise SystemExit(0)
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device visible to torch (use --dry-run to check the script on a CPU)")
    emit(check="device", name=torch.cuda.get_device_name(0), torch=torch.__version__)
    start = time.perf_counter()
    for step in (parity, precision_table, inference_speed, training_speed, server, search_and_selfplay):
        t0 = time.perf_counter()
        step()
        emit(check="timing", step=step.__name__, seconds=round(time.perf_counter() - t0, 1))
    emit(check="done", seconds=round(time.perf_counter() - start, 1))
