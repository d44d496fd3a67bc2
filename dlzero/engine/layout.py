"""How the engine spends the machine's cores on its one game: threads per network call, calls in flight.

`search.eval_streams: 0` (the default) asks for this layout. It applies where one game has the
machine (the USI engine, `bestmove`, `analyze`, `review`, `Engine`, `bench search`); self-play and
gating share the cores among many games and worker processes and run one stream where it says 0.

On a CPU the tree (one Python thread) and the network compete for the same cores. One network call
split over every core (inference.threads = cores, one stream) leaves the cores idle while the tree
collects the next batch; calls of one thread each, one per core, keep the cores busy while the tree
works beside them. Measured on a 2-core machine with a trained 5x64 int8 network, batch 32, one tree
(`dlzero bench search --layouts 2x1,1x2,1x3`, docs/search.md): 2x1 kept 0.50-0.64 of the
machine's inference rate, 1x2 and 1x3 0.53-0.79, and over eight interleaved comparisons neither of
those two was ahead (means 6.6k and 6.4k simulations/s; fp32 2.25k and 2.28k), so the layout takes the
one with fewer threads. On a GPU two calls in flight let the tree fill one batch while the GPU works on
the other (the torch backend runs its CUDA calls one at a time anyway).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from dlzero.config import Config
from dlzero.inference import load_model
from dlzero.inference.base import Evaluator

GPU_STREAMS = 2


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, as `taskset` sets it), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def engine_inference(cfg: Config) -> Config:
    """`cfg` with the engine's compute threads per network call: 1 where the layout is automatic
    (`search.eval_streams: 0`) and `inference.threads` is left at 0; as configured otherwise, but
    never more than the usable cores. More threads than cores only wait on each other: USI Threads
    256 on 2 cores made a 1 s byoyomi move take 4-6 s."""
    threads = cfg.inference.threads
    if not (cfg.search.eval_streams or threads):
        threads = 1
    threads = min(threads, usable_cores())
    if threads == cfg.inference.threads:
        return cfg
    return dataclasses.replace(cfg, inference=dataclasses.replace(cfg.inference, threads=threads))


def load_engine_model(path: str | Path, cfg: Config) -> Evaluator:
    """The network of one game's engine: `load_model` with the layout's threads (`engine_inference`)."""
    return load_model(path, engine_inference(cfg).inference)


def engine_streams(cfg: Config, evaluator: Evaluator, cores: int | None = None) -> int:
    """Network calls in flight for one game: `search.eval_streams` when set; automatic (0): two on a GPU,
    on a CPU one per `evaluator.threads` cores (threads 0: one call over every core)."""
    if cfg.search.eval_streams:
        return cfg.search.eval_streams
    if evaluator.on_gpu:
        return GPU_STREAMS
    cores = cores or usable_cores()
    per_call = min(evaluator.threads, cores) or cores
    return max(1, cores // per_call)


def engine_config(cfg: Config, evaluator: Evaluator) -> Config:
    """`cfg` as one game's search runs it on `evaluator`: the automatic layout resolved."""
    streams = engine_streams(cfg, evaluator)
    return dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, eval_streams=streams))
