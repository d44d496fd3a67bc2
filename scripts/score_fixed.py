"""Score every model of some runs on the shipped fixed validation set (not a test; for benchmarks).

    python scripts/score_fixed.py runs/ab/before-s1 runs/ab/after-s1 --out fixed.csv

A run made by older code has no held-out figures of its own; this gives both arms of a before/after the
same figures on the same positions (the set `train.validation_set` names, `train.validation_positions`
of them), one row per model: run, generation, minutes since generation 0, policy loss and top-1 against
the engine's moves, value loss (a constant 0.5 scores 0.693) and value sign accuracy.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

from dlzero.config import load_config
from dlzero.model.checkpoint import load_model_file
from dlzero.resources import config_path
from dlzero.rundir import RunDir
from dlzero.runfiles import VALIDATION_FIGURES
from dlzero.train.validation import fixed_set, score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories")
    parser.add_argument("--out", required=True, help="CSV to write")
    args = parser.parse_args()
    cfg = load_config(config_path("tiny.yaml"))
    held = fixed_set(cfg.train.validation_set, cfg.train.validation_positions)
    if held is None:
        raise SystemExit("tiny.yaml names no fixed validation set")
    rows = []
    for run in map(Path, args.runs):
        rd = RunDir.open(run)
        gens = rd.generations()
        start = rd.model_path(0).stat().st_mtime
        for gen in gens:
            path = rd.model_path(gen)
            model, _ = load_model_file(path)
            figures = score(model, held, torch.device("cpu"))
            rows.append({"run": run.name, "generation": gen, "minutes": f"{(path.stat().st_mtime - start) / 60:.1f}",
                         **{k: f"{figures[k]:.4f}" for k in VALIDATION_FIGURES}})
            print(", ".join(f"{k} {v}" for k, v in rows[-1].items()), flush=True)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
