"""Score models on labelled games they never trained on (not a test; for benchmark write-ups).

    python scripts/score_games.py runs/s22/run/models/gen-0000.pt --games unseen.hcpe3 --train teacher.hcpe3

`--games`: hcpe3/hcpe files of games the models never saw (e.g. `dlzero teach --seed 99`, another seed than
the training labels'), scored whole; `--train` (optional): the training files, to print the same figures on
them beside (a large gap between the two is memorisation). The figures are `dlzero.train.trainer.evaluate`'s:
policy loss and top-1 against the teacher's move, value loss and sign accuracy against the game result alone (a
constant 0.5 scores 0.693), and the value loss against the training target (result blended with the teacher's
eval by `train.val_lambda`), labelled apart. Positions of `--games` that are also positions of `--train` (same
position, same last move: shared opening lines, the start position) are left out and counted.
One CSV row per model and file with `--csv`.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.commands.common import resolve_config_path  # noqa: E402
from dlzero.config import load_config  # noqa: E402
from dlzero.model.checkpoint import load_model_file  # noqa: E402
from dlzero.train.holdout import unseen  # noqa: E402
from dlzero.train.supervised import load_supervised  # noqa: E402
from dlzero.train.trainer import evaluate  # noqa: E402

FIGURES = ("policy_loss", "policy_acc", "value_loss", "value_acc", "value_loss_target")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", type=Path, help="model files (.pt)")
    parser.add_argument("--games", nargs="+", required=True, type=Path, help="games never trained on")
    parser.add_argument("--train", nargs="*", default=[], type=Path, help="the training files, for comparison")
    parser.add_argument("--config", default="tiny", help="config whose train.val_lambda builds the targets")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--csv", type=Path, help="write the rows here too")
    args = parser.parse_args()
    cfg = load_config(resolve_config_path(args.config))
    lam = cfg.train.val_lambda
    unseen_buf = load_supervised(args.games, lam, cfg.train.value_of_capped_games)
    sets = []
    if args.train:
        train_buf = load_supervised(args.train, lam, cfg.train.value_of_capped_games)
        keep = unseen(unseen_buf, train_buf)
        print(f"{int((~keep).sum()):,} of {len(unseen_buf):,} positions of the unseen games are also training "
              "positions: left out")
        unseen_buf = unseen_buf.subset(np.flatnonzero(keep))
        sample = np.random.default_rng(0).choice(len(train_buf), min(len(train_buf), len(unseen_buf)), replace=False)
        sets.append(("training games (sample)", train_buf.subset(np.sort(sample))))
    sets.insert(0, ("unseen games", unseen_buf))
    device = torch.device("cpu")
    rows = []
    print(f"{'model':<28} {'set':<24} {'positions':>9} " + " ".join(f"{f:>17}" for f in FIGURES))
    for path in args.models:
        model, _ = load_model_file(path)
        for name, buf in sets:
            figures = evaluate(model, buf, args.batch, device)
            rows.append({"model": str(path), "set": name, "positions": len(buf),
                         **{f: f"{figures[f]:.4f}" for f in FIGURES}})
            print(f"{path.name:<28} {name:<24} {len(buf):>9,} " + " ".join(f"{figures[f]:>17.4f}" for f in FIGURES))
    if args.csv:
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
