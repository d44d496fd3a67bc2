"""Training speed with each KataGo switch (not a test): optimiser steps per second on one fixed batch.

    python scripts/katago_switch_speed.py [--config tiny] [--steps 10] [--batch 64] [--repeats 3] [--device cpu]

Builds one batch of real positions (random cshogi games with visit counts), then times `Trainer.step`
with the plain network and with `model.global_pool_blocks`, `train.aux_reply_weight` and
`train.surprise_weight` switched on one at a time and all together. Decoding is left out: it costs the
same with every switch. Arms take turns `--repeats` times and each reports its best rate, so a busy
machine slows every arm alike rather than the one that happened to run during a spike.
"""

from __future__ import annotations

import argparse
import random
import time

import cshogi
import numpy as np
import torch

from dlzero.config import load_config
from dlzero.data.hcpe3 import Hcpe3Record, MoveRecord
from dlzero.model import count_parameters, new_model
from dlzero.train.buffer import BatchDecoder
from dlzero.train.dataset import buffer_from_games
from dlzero.train.trainer import Trainer


def random_games(n: int, seed: int = 0) -> list[Hcpe3Record]:
    """Random games whose every ply carries visit counts over up to 5 legal moves."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        board = cshogi.Board()
        game = Hcpe3Record.from_board(board)
        for _ply in range(80):
            legal = list(board.legal_moves)
            if not legal:
                break
            picked = rng.sample(legal, min(len(legal), 5))
            cands = np.array([[m & 0xFFFF, rng.randint(1, 50)] for m in picked], np.uint16)
            move = rng.choice(picked)
            game.moves.append(MoveRecord(move & 0xFFFF, 0, cands))
            board.push(move)
        out.append(game)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per turn")
    ap.add_argument("--batch", type=int, default=0, help="batch size (0: the config's train.batch_size)")
    ap.add_argument("--repeats", type=int, default=3, help="turns per arm; the best is reported")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pool-blocks", default="", help="blocks for the pooling arm (default: every other block)")
    args = ap.parse_args()
    base = load_config(f"configs/{args.config}.yaml")
    pool = args.pool_blocks or ",".join(str(i) for i in range(1, base.model.blocks, 2))
    arms = {"plain": [], "global_pool": [f"model.global_pool_blocks=[{pool}]"],
            "reply": ["train.aux_reply_weight=0.15"], "surprise": ["train.surprise_weight=0.5"]}
    arms["all"] = [o for v in arms.values() for o in v]
    device = torch.device(args.device)
    buf = buffer_from_games(random_games(12), 0.3)
    trainers, best = {}, dict.fromkeys(arms, 0.0)
    for name, overrides in arms.items():
        extra = [f"train.batch_size={args.batch}"] if args.batch else []
        cfg = load_config(f"configs/{args.config}.yaml", [f"train.device={args.device}", *extra, *overrides])
        trainer = Trainer(new_model(cfg.model, seed=0), cfg.train, device)
        batch = BatchDecoder(cfg.train.batch_size).decode(buf, np.arange(cfg.train.batch_size) % len(buf))
        trainers[name] = (trainer, batch.to(device), cfg.train.batch_size)
        for _ in range(2):  # warm-up
            trainer.step(trainers[name][1], 1e-3)
    for _ in range(args.repeats):
        for name, (trainer, batch, size) in trainers.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                trainer.step(batch, 1e-3)
            if device.type == "cuda":
                torch.cuda.synchronize()
            best[name] = max(best[name], args.steps * size / (time.perf_counter() - t0))
    for name, overrides in arms.items():
        params = count_parameters(trainers[name][0].train_net)
        print(f"{name:12s} {best[name]:9.0f} samples/s  params {params:,}  ({' '.join(overrides) or 'defaults'})")

if __name__ == "__main__":
    main()
