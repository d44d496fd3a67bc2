"""Training speed with each KataGo switch (not a test): optimiser steps per second on one fixed batch.

    python scripts/katago_switch_speed.py [--config tiny] [--steps 30] [--device cpu]

Builds one batch of real positions (random cshogi games with visit counts), then times `Trainer.step`
with the plain network and with `model.global_pool_blocks`, `train.aux_reply_weight` and
`train.surprise_weight` switched on one at a time and all together. Decoding is left out: it costs the
same with every switch. Prints samples/s per arm; run arms on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import random
import time

import cshogi
import numpy as np
import torch

from dlzero.config import load_config
from dlzero.data.hcpe3 import GameRecord, MoveRecord
from dlzero.model import count_parameters, new_model
from train.buffer import BatchDecoder
from train.dataset import buffer_from_games
from train.trainer import Trainer


def random_games(n: int, seed: int = 0) -> list[GameRecord]:
    """Random games whose every ply carries visit counts over up to 5 legal moves."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        board = cshogi.Board()
        game = GameRecord.from_board(board)
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
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pool-blocks", default="", help="blocks for the pooling arm (default: every other block)")
    args = ap.parse_args()
    base = load_config(f"configs/{args.config}.yaml" if "/" not in args.config else args.config)
    pool = args.pool_blocks or ",".join(str(i) for i in range(1, base.model.blocks, 2))
    arms = {"plain": [], "global_pool": [f"model.global_pool_blocks=[{pool}]"],
            "reply": ["train.aux_reply_weight=0.15"], "surprise": ["train.surprise_weight=0.5"]}
    arms["all"] = [o for v in arms.values() for o in v]
    device = torch.device(args.device)
    buf = buffer_from_games(random_games(12), 0.3)
    for name, overrides in arms.items():
        cfg = load_config(f"configs/{args.config}.yaml", [f"train.device={args.device}", *overrides])
        trainer = Trainer(new_model(cfg.model, seed=0), cfg.train, device)
        batch = BatchDecoder(cfg.train.batch_size).decode(buf, np.arange(cfg.train.batch_size) % len(buf))
        batch = batch.to(device)
        for _ in range(3):  # warm-up
            trainer.step(batch, 1e-3)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            trainer.step(batch, 1e-3)
        if device.type == "cuda":
            torch.cuda.synchronize()
        rate = args.steps * cfg.train.batch_size / (time.perf_counter() - t0)
        params = count_parameters(trainer.train_net)
        print(f"{name:12s} {rate:9.0f} samples/s  params {params:,}  ({' '.join(overrides) or 'defaults'})",
              flush=True)


if __name__ == "__main__":
    main()
