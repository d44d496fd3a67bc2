"""Inference server throughput with W self-play worker processes.

For each W: one server (the config's inference and server settings) and W spawned workers playing
real lockstep self-play through it. After all W have connected and warmed up, the server's
counters are read over `seconds`. Figures:
- evals_per_s and mean_batch: what the server evaluated, and in batches of what size;
- busy: share of the server's wall time spent in network calls (near 1: the device is the
  bottleneck, which is the aim on a GPU node; low: the workers cannot feed it);
- inference_only_per_s: the same Evaluator, in this process, on batches of the observed mean
  size, right after; `server_vs_inference` is the ratio, measured in the same run;
- positions_per_s: self-play plies per second summed over the workers.
"""

from __future__ import annotations

import multiprocessing as mp
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dlzero.bench.infer import sample_boards
from dlzero.bench.timing import rate
from dlzero.config import Config, config_from_dict, config_to_dict
from dlzero.encoding import Encoder, new_batch_buffer
from dlzero.inference import load_model
from dlzero.inference.server import ModelSource, ServerAddress, start_server
from dlzero.model import ModelMetadata, model_name, new_model, save_model


def _worker(address: ServerAddress, cfg_data: dict, seed: int, stop: Any, out: Any) -> None:
    """Self-play through the server until `stop` is set; put (plies, seconds) on `out`."""
    from dlzero.inference.remote import RemoteEvaluator
    from dlzero.selfplay.games import play_selfplay_games  # the CLI layer may import selfplay; bench is called from it

    cfg = config_from_dict(cfg_data)
    ev = RemoteEvaluator(address, min(cfg.inference.max_batch, cfg.server.max_batch), cfg.server.timeout_s)
    try:
        stats = play_selfplay_games(ev, cfg, 1 << 30, lambda _game: None, np.random.default_rng(seed),
                                    should_stop=stop.is_set)

        out.put((stats.moves, stats.seconds))
    finally:
        ev.close()


def _inference_rate(path: Path, cfg: Config, batch: int, seconds: float) -> float:
    evaluator = load_model(path, replace(cfg.inference, max_batch=cfg.server.max_batch))
    buf = new_batch_buffer(batch)
    Encoder().encode_batch(sample_boards(batch), buf)
    try:
        return rate(lambda: len(evaluator.evaluate(buf)[1]), seconds)
    finally:
        evaluator.close()


def bench_server(cfg: Config, worker_counts: list[int], seconds: float, model: str | None = None,
                 warmup: float = 3.0) -> Iterator[dict]:
    """One row per worker count W."""
    with tempfile.TemporaryDirectory(prefix="dlzero-bench-") as tmp:
        path = Path(model) if model else save_model(new_model(cfg.model, seed=0), Path(tmp) / "bench.pt",
                                                    ModelMetadata(name=model_name(cfg.model)))
        srv = start_server(ModelSource.file(path), cfg.inference, cfg.server, verbose=False)
        ctx = mp.get_context("spawn")
        try:
            for w in worker_counts:
                stop, out = ctx.Event(), ctx.Queue()
                procs = [ctx.Process(target=_worker, args=(srv.address, config_to_dict(cfg), i, stop, out))
                         for i in range(w)]
                for p in procs:
                    p.start()
                deadline = time.monotonic() + 120
                while srv.stats()["clients"] < w and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(warmup)
                s0 = srv.stats()
                time.sleep(seconds)
                s1 = srv.stats()
                stop.set()
                plies = [out.get(timeout=120) for _ in procs]
                for p in procs:
                    p.join(30)
                wall = s1["seconds"] - s0["seconds"]
                evals = s1["positions"] - s0["positions"]
                batches = max(1, s1["batches"] - s0["batches"])
                mean_batch = evals / batches
                pure = _inference_rate(path, cfg, max(1, round(mean_batch)), min(seconds, 3.0))
                evals_s = evals / wall
                yield {"config": model_name(cfg.model), "device": s1["device"], "workers": w,
                       "evals_per_s": round(evals_s, 1), "mean_batch": round(mean_batch, 1),
                       "busy": round((s1["eval_seconds"] - s0["eval_seconds"]) / wall, 3),
                       "inference_only_per_s": round(pure, 1), "server_vs_inference": round(evals_s / pure, 3),
                       "positions_per_s": round(sum(m / s for m, s in plies if s > 0), 1)}
        finally:
            srv.stop()
