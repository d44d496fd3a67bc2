"""Training speed: ms per step and samples/s of the config's network, per precision and memory layout.

Why random batches: the decoder costs ~8 ms of a ~250 ms step (5x64, batch 256, 2 cores), and a
step's arithmetic does not depend on what the planes hold, so the figures time the network alone.
The variants are timed in turns, round after round, so a busy machine slows them all alike; the
row gives each one's median and its speed against the first variant.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Iterator

import torch

from dlzero.config import Config
from dlzero.encoding import NUM_LABELS, NUM_PLANES
from dlzero.errors import ConfigError
from dlzero.inference.devices import resolve_device
from dlzero.model import new_model
from dlzero.train.buffer import TrainingBatch
from dlzero.train.trainer import Trainer, amp_dtype

VARIANTS = ("off/contiguous", "off/channels_last", "bf16/contiguous", "bf16/channels_last")


def random_batch(size: int, seed: int = 0) -> TrainingBatch:
    """A batch of the trainer's shapes: 0/1 planes, one-hot policies, random values."""
    g = torch.Generator().manual_seed(seed)
    policy = torch.zeros(size, NUM_LABELS)
    policy[torch.arange(size), torch.randint(0, NUM_LABELS, (size,), generator=g)] = 1.0
    result = torch.randint(0, 2, (size,), generator=g).float()
    return TrainingBatch(planes=(torch.rand(size, NUM_PLANES, 9, 9, generator=g) < 0.1).float(), policy=policy,
                         value=torch.rand(size, generator=g), result=result, reply=torch.full((size,), -1))



def parse_variant(name: str) -> tuple[str, bool]:
    """'bf16/channels_last' -> ('bf16', True): train.amp and train.channels_last."""
    amp, _, layout = name.partition("/")
    if amp not in ("off", "bf16", "fp16", "auto") or layout not in ("contiguous", "channels_last"):
        raise ConfigError(f"--variants: '{name}' is not AMP/LAYOUT (AMP off, bf16, fp16 or auto; LAYOUT "
                          "contiguous or channels_last), e.g. bf16/channels_last")
    return amp, layout == "channels_last"


def bench_train(cfg: Config, variants: list[str], steps: int, rounds: int) -> Iterator[dict]:
    """One row per variant: median ms per step over `rounds` turns of `steps` steps each."""
    device = resolve_device(cfg.train.device)
    batch = random_batch(cfg.train.batch_size).to(device)
    trainers = {}
    parsed = {name: parse_variant(name) for name in variants}  # every name checked before any timing
    if steps < 1 or rounds < 1:
        raise ConfigError("--steps and --rounds must be at least 1")
    for name, (amp, channels_last) in parsed.items():
        tcfg = dataclasses.replace(cfg.train, amp=amp, channels_last=channels_last)
        trainers[name] = Trainer(new_model(cfg.model, seed=0), tcfg, device)
        for _ in range(2):  # warm-up: oneDNN/cuDNN pick their kernels on the first calls
            trainers[name].step(batch, 1e-3)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, trainer in trainers.items():
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            for _ in range(steps):
                trainer.step(batch, 1e-3)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[name].append((time.perf_counter() - t0) / steps)
    first = statistics.median(times[variants[0]])
    for name in variants:
        per_step = statistics.median(times[name])
        dtype = amp_dtype(parsed[name][0], device)
        yield {"variant": name, "device": str(device), "computes_in": str(dtype or torch.float32).replace("torch.", ""),
               "batch": cfg.train.batch_size, "ms_per_step": round(per_step * 1000, 1),
               "samples_per_s": round(cfg.train.batch_size / per_step, 1), "vs_first": round(first / per_step, 2),
               "threads": torch.get_num_threads()}
