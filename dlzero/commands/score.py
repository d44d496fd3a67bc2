"""`dlzero score`: model files scored on the same held-out games, side by side.

    dlzero score A.pt B.pt --hcpe t1.hcpe3 t2.hcpe3          the games `dlzero train --hcpe t1 t2` held out
    dlzero score default A.pt --hcpe t1.hcpe3 --csv s.csv    the shipped default network beside A.pt
    dlzero score A.pt --val test.hcpe3                       every position of test.hcpe3
    dlzero score default A.pt --val t.hcpe3 --value-diagnosis   and where the value loss is (below)
    dlzero score A.pt --hcpe teacher.hcpe3 --val unseen.hcpe3 --train-sample   unseen games beside trained ones

A training run prints its model's held-out figures once, on the games it held out of its own files; a model
trained on more files was scored on a larger hold-out, and its figures no longer compare with its parent's.
This rebuilds the hold-out of a set of training files (the same `train.holdout_fraction` and `train.seed`
give the same games: give the config and `--set` the training run had) and scores every model on it:
policy loss and top-1 agreement with the recorded (teacher's) move; value loss and sign accuracy against
the game's result; value_loss_target against the training target (the result blended with the teacher's
eval). Models are `.pt` files or shipped networks (a name, or `default`: their `.pt` weights; an ONNX or
int8 file's agreement with its weights is the int8 gate's business, `dlzero export --int8`).

`--train-sample` also scores each model on as many of the training positions (of `--hcpe`, drawn with a fixed
seed) as the hold-out holds, a row per model and set (`held out`, `training sample`): a large gap between the
two is memorisation. With `--val` files of games played apart (another teacher seed), positions of them that are
also training positions (shared opening lines, the start position) are left out of the hold-out and counted.

`--value-diagnosis` adds a table of the value loss (the trainer's BCE, on the positions with a value target)
by ply bucket (`--ply-buckets`, default 30,60,90,120: plies 0-29, ..., 120+): the teacher's own value (the eval
the data records, as a win rate) against the results, each model against the results, against the teacher's
win rate, and its KL to it (that loss less the teacher's entropy: 0 for a perfect copy), each model's loss
against the results less the teacher's, and a constant (the bucket's mean result) for scale; then each figure's
standard error by game (a game's positions share its result). When a student's loss against the results is the
teacher's, more labels from that teacher cannot lower it; when its KL is large, a better copy can.
`--diagnosis-csv` keeps the figures.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from dlzero.commands.common import add_config_args, config_from_args

if TYPE_CHECKING:
    from dlzero.config import Config

FLAG_KEYS = {"device": "train.device", "val": "train.val_files", "batch": "train.batch_size",
             "threads": "train.threads"}


def register(sub) -> None:
    p = sub.add_parser("score", help="score model files on the held-out games of hcpe/hcpe3 files",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="a .pt model file, a shipped network's name, or 'default' (its .pt weights)")
    p.add_argument("--hcpe", nargs="+", metavar="FILE", default=[],
                   help="the training files whose held-out games to score on (as given to `dlzero train --hcpe`)")
    p.add_argument("--val", action="append", metavar="FILE",
                   help="hcpe3/hcpe file to score on instead (repeatable, or a comma list; train.val_files)")
    p.add_argument("--csv", metavar="FILE", help="also write the table to this CSV file")
    p.add_argument("--train-sample", action="store_true",
                   help="also score on a sample of the training positions (--hcpe) as large as the hold-out: the "
                        "gap between the two is memorisation")
    p.add_argument("--value-diagnosis", action="store_true",
                   help="also the value loss by ply: the teacher's own against the results, each model's against "
                        "the results and against the teacher's win rate (see above)")
    p.add_argument("--ply-buckets", metavar="EDGES",
                   help="with --value-diagnosis: ascending plies where buckets start (default 30,60,90,120)")
    p.add_argument("--diagnosis-csv", metavar="FILE",
                   help="with --value-diagnosis: also write its figures to this CSV file, a row per figure and "
                        "bucket")
    p.add_argument("--device", help="auto, cpu, cuda or cuda:N (train.device)")
    p.add_argument("--batch", type=int, help="positions a forward pass (train.batch_size)")
    p.add_argument("--threads", type=int, help="CPU compute threads (train.threads; 0: one a core)")
    add_config_args(p)
    p.set_defaults(func=run)


def model_file(spec: str, cfg: Config) -> tuple[str, Path]:
    """(label, `.pt` path) of a MODEL argument: a file as given, else a shipped network's checked weights
    (the file the torch backend plays)."""
    from dlzero.engine.shipped import require_model
    from dlzero.errors import ModelFileError

    torch_cfg = dataclasses.replace(cfg, inference=dataclasses.replace(cfg.inference, backend="torch"))
    choice = require_model(spec, torch_cfg, "MODEL")
    if not choice.path.is_file():
        raise ModelFileError(f"{spec}: no such model file")
    if choice.path.suffix.lower() != ".pt":
        raise ModelFileError(f"{spec}: dlzero score takes .pt model files (the weights an ONNX file was exported "
                             "from)")
    return choice.label(), choice.path


def distinct_labels(specs: list[str], models: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """`models` with a label each of its own: two files of one name (`runs/a/models/gen-0001.pt` and
    `runs/b/...`) are labelled by the paths given, so that neither row nor the diagnosis (keyed by label)
    hides the other; the same argument twice gets a count."""
    counts = Counter(label for label, _ in models)
    labels = [spec if counts[label] > 1 else label for spec, (label, _) in zip(specs, models, strict=True)]
    seen: Counter[str] = Counter()
    out = []
    for label, (_, path) in zip(labels, models, strict=True):
        seen[label] += 1
        out.append((label if seen[label] == 1 else f"{label} ({seen[label]})", path))
    return out


def _csv_text(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _table(rows: list[dict], figures: tuple[str, ...]) -> str:
    """The score rows as the printed table: a line per model (and set, with --train-sample)."""
    columns = [c for c in ("model", "set") if c in rows[0]]
    widths = {c: max(len(r[c]) for r in rows) for c in columns}
    lines = ["  ".join(f"{c:<{widths[c]}}" for c in columns) + "  " + "  ".join(f"{k:>17}" for k in figures)]
    lines += ["  ".join(f"{r[c]:<{widths[c]}}" for c in columns) + "  " + "  ".join(f"{r[k]:>17.4f}" for k in figures)
              for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from dlzero.data.atomic import atomic_write_text
    from dlzero.errors import ConfigError
    from dlzero.train.distributed import DistInfo, set_threads, train_device
    from dlzero.train.scoring import (
        DEFAULT_PLY_EDGES,
        FIGURES,
        diagnosis_table,
        held_out,
        held_out_with_teacher,
        parse_ply_edges,
        score_model,
        training_sample,
        value_diagnosis,
        value_logits,
    )

    if args.val:
        args.val = ",".join(args.val)
    if (args.ply_buckets or args.diagnosis_csv) and not args.value_diagnosis:
        raise ConfigError("--ply-buckets and --diagnosis-csv go with --value-diagnosis")
    if args.train_sample and not args.hcpe:
        raise ConfigError("--train-sample needs the training files (--hcpe) to sample")
    edges = parse_ply_edges(args.ply_buckets) if args.ply_buckets else DEFAULT_PLY_EDGES
    cfg = config_from_args(args, FLAG_KEYS)
    models = distinct_labels(args.models, [model_file(spec, cfg) for spec in args.models])  # checked before the data
    if args.value_diagnosis:
        hold, teacher, games, report, training = held_out_with_teacher(args.hcpe, cfg.train)
    else:
        hold, _, report, training = held_out(args.hcpe, cfg.train)
    print(report, file=sys.stderr)
    # without --train-sample the rows (and the CSV) name no set: there is only the hold-out
    sets = {"held out": hold, "training sample": training_sample(training, len(hold))} if args.train_sample \
        else {"": hold}
    set_threads(cfg.train.threads)
    device = train_device(cfg.train.device, DistInfo())
    rows = []
    for label, path in models:
        for name, positions in sets.items():
            figures = score_model(path, positions, cfg.train.batch_size, device)
            named = {"set": name} if name else {}
            rows.append({"model": label, **named, "positions": len(positions), **{k: figures[k] for k in FIGURES}})
            print(f"{label}{f' ({name})' if name else ''}: " + ", ".join(f"{k} {figures[k]:.4f}" for k in FIGURES),
                  file=sys.stderr)
    print(_table(rows, FIGURES))
    if args.csv:
        atomic_write_text(args.csv, _csv_text(rows))
    if args.value_diagnosis:
        logits = {label: value_logits(path, hold, cfg.train.batch_size, device) for label, path in models}
        diagnosis = value_diagnosis(hold.ply, hold.result, teacher, logits, games, edges)
        print()
        print(diagnosis_table(diagnosis))
        if args.diagnosis_csv:
            atomic_write_text(args.diagnosis_csv, _csv_text(diagnosis))
    return 0
