"""Held-out curves that choose tiny's training volume: how many passes over new data, which value weight.

    python scripts/reuse_curve.py --run runs/curve --out docs/benchmarks/reuse-curve \
        [--weights 1,0.5,0.25] [--max-passes 8] [--value-plies full,searched]

Takes a run's self-play games, trains a fresh copy of its generation-0 model on about half of the games
(split by game, so no game is on both sides: train.holdout's split) and scores it on the other half every few steps:
held-out policy cross-entropy and top-1 against the search targets, value loss against the results
(a constant 1/2 scores 0.693). One curve per value-loss weight (`train.value_weight`); the x axis
is passes over the training half (samples / positions), which is what `train.reuse` sets for each
new position over its life in the window. Also scores on the fixed validation set when there is one.
`--value-plies full,searched` adds curves per `train.value_plies` rule at equal steps: passes count the
full-search positions under either rule (the searched rule samples value-only rows besides them), and the
held-out sets are scored by the full rule, so every curve is scored on the same positions and targets.
Writes OUT.csv (one row per weight, rule and checkpoint) and OUT.png.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
from pathlib import Path

import torch

from dlzero.config import load_config
from dlzero.errors import DlzeroError
from dlzero.model import load_model_file
from dlzero.rundir import RunDir
from dlzero.train.buffer import BatchDecoder
from dlzero.train.dataset import buffer_from_games
from dlzero.train.holdout import game_keys, split_games
from dlzero.train.sampler import EpochSampler
from dlzero.train.trainer import Trainer, evaluate
from dlzero.train.validation import fixed_set, held_out, read_games


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, help="run directory with self-play shards and models/gen-0000.pt")
    p.add_argument("--out", required=True, help="output prefix: OUT.csv and OUT.png")
    p.add_argument("--weights", default="1,0.5,0.25", help="value-loss weights to compare")
    p.add_argument("--value-plies", default="full", help="train.value_plies rules to compare (full, searched)")
    p.add_argument("--max-passes", type=float, default=8.0)
    p.add_argument("--every", type=float, default=0.5, help="passes between held-out scores")
    p.add_argument("--val-lambda", type=float, default=None, help="train.val_lambda (default: the run's)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rd = RunDir.open(args.run)
    cfg = rd.config()
    if args.val_lambda is not None:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, val_lambda=args.val_lambda))
    games = read_games(sorted(rd.shards()))
    held = split_games(game_keys(games), 0.5, seed=0).held  # whole games, as supervised training holds them out
    train_games = [g for g, h in zip(games, held, strict=True) if not h]
    test_games = [g for g, h in zip(games, held, strict=True) if h]
    rules = args.value_plies.split(",")
    train_bufs = {rule: buffer_from_games(train_games, cfg.train.val_lambda, value_plies=rule) for rule in rules}
    sets = {"next": held_out("next", "other half", test_games, 4096).buf}
    try:
        fixed = fixed_set(cfg.train.validation_set or load_config(None).train.validation_set, 4096)
    except DlzeroError as exc:
        print(f"no fixed validation set: {exc}", file=sys.stderr)
        fixed = None
    if fixed is not None:
        sets["fixed"] = fixed.buf
    n = len(buffer_from_games(train_games, cfg.train.val_lambda))  # full-search positions: a pass
    bs = cfg.train.batch_size
    every = max(1, round(args.every * n / bs))
    total = round(args.max_passes * n / bs)
    print(f"{len(games)} games: {n} training positions ({len(train_games)} games), "
          f"{len(sets['next'])} held out; a pass is {n / bs:.1f} steps of {bs}; rows by rule: "
          + ", ".join(f"{r} {len(b)}" for r, b in train_bufs.items()), file=sys.stderr)
    device = torch.device("cpu")
    rows = []
    for weight, rule in [(float(w), r) for w in args.weights.split(",") for r in rules]:
        model, _ = load_model_file(rd.model_path(0))
        tcfg = dataclasses.replace(cfg.train, value_weight=weight, value_plies=rule)
        trainer = Trainer(model, tcfg, device)
        train_buf = train_bufs[rule]
        sampler = EpochSampler(len(train_buf), 1)
        decoder = BatchDecoder(bs)
        t0 = time.perf_counter()
        for step in range(total + 1):
            if step % every == 0 or step == total:
                row = {"value_weight": weight, "value_plies": rule, "steps": step,
                       "passes": round(step * bs / n, 3)}
                for name, buf in sets.items():
                    fig = evaluate(trainer.export_model(), buf, 256, device)
                    row.update({f"{name}_{k}": round(fig[k], 5) for k in
                                ("policy_loss", "policy_acc", "value_loss", "value_acc")})
                rows.append(row)
                print(f"w={weight} {rule} step {step} ({row['passes']} passes, {time.perf_counter() - t0:.0f} s): "
                      + ", ".join(f"{k} {v}" for k, v in row.items() if k.startswith(("next", "fixed"))),
                      file=sys.stderr, flush=True)
            if step < total:
                trainer.step(decoder.decode(train_buf, sampler.batch(step * bs, bs)).to(device), tcfg.lr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    _plot(rows, list(sets), out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')}", file=sys.stderr)
    return 0


def _plot(rows: list[dict], sets: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [(s, k) for s in sets for k in ("value_loss", "policy_loss", "policy_acc")]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.6))
    for ax, (s, k) in zip(axes, keys, strict=True):
        for weight, rule in sorted({(r["value_weight"], r["value_plies"]) for r in rows}, reverse=True):
            pts = [r for r in rows if (r["value_weight"], r["value_plies"]) == (weight, rule)]
            ax.plot([r["passes"] for r in pts], [r[f"{s}_{k}"] for r in pts], marker=".",
                    label=f"value weight {weight}" + ("" if rule == "full" else f", {rule} plies"))
        if k == "value_loss":
            ax.axhline(0.693, color="grey", linestyle="--", linewidth=0.8, label="constant 1/2")
        ax.set_title(f"held-out {s}: {k.replace('_', ' ')}")
        ax.set_xlabel("passes over the training half")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
