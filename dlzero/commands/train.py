"""`dlzero train`: one generation on a run's self-play data, or supervised training on hcpe/hcpe3 files.

    dlzero train --run runs/NAME [--steps N]          next candidate -> runs/NAME/models/gen-NNNN.pt
    dlzero train --hcpe a.hcpe b.hcpe --out m.pt      supervised; prints held-out accuracies
    dlzero train --hcpe teacher.hcpe3 --out m.pt      the same on teacher data from `dlzero teach`
    dlzero train --hcpe new.hcpe3 --init m.pt --out m2.pt   go on training m.pt (fine-tuning)
    dlzero train --hcpe teacher.hcpe3 --out m.pt --minutes 30   as many steps as fit in 30 minutes
    dlzero train --hcpe a.hcpe --val test.hcpe --out m.pt   scored on test.hcpe; nothing held out of a.hcpe
    dlzero train --records my-games/ --init default --out mine.pt   the shipped network fine-tuned on your games

`--hcpe` takes hcpe files (game records from `dlzero import-records`: one-hot policy) and hcpe3 files
(told apart by the `.hcpe3` suffix: soft policy from visit counts, history planes from the games).
Whole games are held out of them (`train.holdout_fraction`; an hcpe file's games are its runs of
consecutive records), or `--val FILE` names the held-out set; the log says which. Held-out value
figures are against the game result (value_loss, value_acc) and, labelled value_loss_target, against
the training target that blends in the teacher's eval.

With `--run`, the run's config.yaml is the base config, then `--set` and flags, saved back to the
run (the rule of every command that takes `--run`, see `run_from_args`), except `--steps`: it is this
generation's alone, and saved it would cap every later generation of the loop. For several processes or
GPUs launch it with torchrun, which this command detects:

    torchrun --nproc_per_node=K -m dlzero.cli train --run-dir runs/NAME

(`--run-dir` is `--run` by another name: torchrun's own parser scans every argument and would take
`--run` for an abbreviation of its `--run-path`.)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from dlzero.commands.common import add_config_args, config_from_args, error_status, run_from_args

if TYPE_CHECKING:
    from dlzero.rundir import RunDir
    from dlzero.train.distributed import DistInfo

FLAG_KEYS = {"steps": "train.steps_per_generation", "device": "train.device", "reuse": "train.reuse",
             "val": "train.val_files", "threads": "train.threads"}


def register(sub) -> None:
    p = sub.add_parser("train", help="train the next generation of a run, or a model from hcpe/hcpe3 files",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--run", "--run-dir", dest="run",
                     help="run directory: train on its shards, resuming train/checkpoint.pt if present "
                          "(under torchrun spell it --run-dir: torchrun reads --run as its own --run-path)")
    src.add_argument("--hcpe", nargs="+", metavar="FILE",
                     help="supervised mode: hcpe files (game records) or hcpe3 files (teacher data from "
                          "`dlzero teach`) to train on")
    src.add_argument("--records", nargs="+", metavar="DIR_OR_FILE",
                     help="supervised mode on game records (CSA/KIF/KI2 files or folders): imported into "
                          "OUT's .records.hcpe beside --out, then trained on as --hcpe (whole games held out); "
                          "with --init default, the shipped network fine-tuned on your games")
    p.add_argument("--out", help="supervised mode: output model file (.pt)")
    p.add_argument("--metrics", help="supervised mode: folder for metrics.csv and TensorBoard events")
    p.add_argument("--val", action="append", metavar="FILE",
                   help="supervised mode: hcpe3/hcpe file to score the model on (repeatable, or a comma list; "
                        "train.val_files) instead of holding games out of the --hcpe files")
    p.add_argument("--init", metavar="MODEL", help="supervised mode: go on training this model instead of a "
                   "fresh network: a .pt file of the config's architecture, or a shipped network's name or "
                   "'default' (its architecture and weights); held-out figures are then printed before and after")
    p.add_argument("--steps", type=int, help="training steps: with --run exactly this many for this generation, "
                   "not saved to the run's config.yaml (set train.steps_per_generation with --set for that); "
                   "with --hcpe train.steps_per_generation")
    p.add_argument("--minutes", type=float, help="supervised mode: train for this many minutes instead of a "
                   "step count (the steps are fixed from the speed of the first 50, so that the cosine "
                   "schedule fits the time; loading and the held-out evaluation come on top)")
    p.add_argument("--reuse", type=float, help="--run: samples per new training position (train.reuse)")
    p.add_argument("--device", help="auto, cpu, cuda or cuda:N (train.device)")
    p.add_argument("--threads", type=int, help="CPU compute threads (train.threads; 0: one a core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.errors import ConfigError
    from dlzero.runlock import hold
    from dlzero.train import distributed

    if (args.hcpe or args.records) and not args.out:
        raise ConfigError("--hcpe and --records need --out (the model file to write)")
    if args.run and (args.out or args.metrics or args.init or args.minutes or args.val):
        raise ConfigError("--out, --metrics, --init, --minutes and --val are for --hcpe mode; --run trains on from "
                          "the run's own checkpoint and writes into the run directory")
    if args.val:
        args.val = ",".join(args.val)  # one comma list: the form train.val_files takes on the command line
    if args.minutes is not None and args.steps is not None:
        raise ConfigError("--minutes and --steps both say how long to train: give one")
    # one trainer per run (rank 0 of a torchrun, the rank that writes); --hcpe writes no run
    writes_run = args.run and (not distributed.launched_by_torchrun() or os.environ["RANK"] == "0")
    torchrun = distributed.joined_by_torchrun()
    code = 1  # a rank's status after a bug (its traceback printed)
    try:
        with hold(args.run, ("train",)) if writes_run else contextlib.nullcontext():
            code = _train(args)
    except (Exception, KeyboardInterrupt) as exc:
        if not torchrun:
            raise  # `dlzero.cli` reports it
        status = error_status("train", exc)
        if status is None:
            traceback.print_exc()
        else:
            code = status
    finally:
        if torchrun:  # on every path: not through teardown, where gloo's threads can abort a finished rank
            distributed.exit_rank(code)
    return code


def _train(args: argparse.Namespace) -> int:
    from dlzero.train import distributed, train_generation, train_supervised

    if args.run:  # --steps is this command's alone: saved, it would cap every later generation of the loop
        rd, cfg = run_from_args(args, {k: v for k, v in FLAG_KEYS.items() if k != "steps"}, "dlzero train",
                                create=False)
    else:
        rd, cfg = None, _supervised_config(args)
        if args.records:
            args.hcpe = [_import_records(args.records, Path(args.out), progress=not args.no_progress)]
    distributed.set_threads(cfg.train.threads)
    info = distributed.init_from_env(cfg.train.device)[0] if distributed.launched_by_torchrun() else None
    done = False
    try:
        if rd is not None:
            if cfg.train.relabel:
                _relabel(rd, cfg.train.relabel, info, progress=not args.no_progress)
            res = train_generation(rd, cfg, steps=args.steps, progress=not args.no_progress)
            if info is None or info.is_main:
                print(f"wrote {res.model_path}: generation {res.generation}, {res.steps} steps on "
                      f"{res.positions:,} of the run's {res.total_positions:,} positions; "
                      f"{_fmt(res.metrics)}", file=sys.stderr)
        else:
            metrics_dir = Path(args.metrics) if args.metrics else None
            sres = train_supervised(args.hcpe, cfg, args.out, metrics_dir=metrics_dir,
                                    progress=not args.no_progress, init=args.init, minutes=args.minutes)
            if info is None or info.is_main:
                print(f"wrote {sres.model_path}: {sres.steps} steps on {sres.train_positions:,} positions; "
                      f"{sres.split}: {_fmt_holdout(sres.holdout)}", file=sys.stderr)
                if sres.holdout_before:
                    print(f"before training, the --init model on the same held-out positions: "
                          f"{_fmt_holdout(sres.holdout_before)}", file=sys.stderr)
        done = True
    finally:
        if info is not None:
            distributed.shutdown(done)
    return 0


def _supervised_config(args: argparse.Namespace):
    """The --hcpe/--records config; `--init NETWORK` brings the network's architecture (before --set and flags)
    and becomes its `.pt` weights."""
    from dlzero.commands.common import overrides, resolve_config_path
    from dlzero.config import load_config
    from dlzero.loop_start import arch_overrides, named_network, network_weights

    network = named_network(args.init) if args.init else None
    if network is None:
        return config_from_args(args, FLAG_KEYS)
    print(f"dlzero train: --init {args.init} is the shipped network {network.describe()} (its .pt weights)",
          file=sys.stderr)
    args.init = str(network_weights(network))
    return load_config(resolve_config_path(args.config),
                       [*arch_overrides(network.architecture), *overrides(args, FLAG_KEYS)])


def _import_records(sources: list[str], out: Path, progress: bool) -> Path:
    """`dlzero import-records SOURCES` into OUT.records.hcpe (whole games as runs of records), with its report."""
    from dlzero.data.record_import import import_records
    from dlzero.errors import DataError

    target = out.with_name(f"{out.stem}.records.hcpe")
    report = import_records(sources, target, progress=progress)
    for path, reason in report.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    if not report.imported:
        raise DataError(", ".join(sources), None, "no game record could be read (CSA, KIF or KI2 files)")
    print(f"imported {len(report.imported)} record files, {report.positions:,} positions, into {target}",
          file=sys.stderr)
    return target


def _fmt_holdout(metrics: dict[str, float]) -> str:
    """Held-out figures: the value against the game result first, then against the blended training target."""
    if not metrics:
        return "no positions to score"
    by_result = _fmt(metrics, ("policy_loss", "policy_acc", "value_loss", "value_acc"))
    return (f"{by_result} (value against the result); value_loss_target {metrics['value_loss_target']:.4f} "
            "(against the training target: the result blended with the eval)")


def _fmt(metrics: dict[str, float], keys: tuple[str, ...] = ("policy_loss", "value_loss", "policy_acc",
                                                             "value_acc")) -> str:
    return ", ".join(f"{k} {metrics[k]:.4f}" for k in keys if k in metrics) or "no metrics"


def _relabel(rd: RunDir, spec: str, info: DistInfo | None, progress: bool) -> None:
    """`train.relabel` before the generation trains: under torchrun every rank relabels its own slice of
    the shards rank 0 listed (each with its own teacher), then all meet, so the work is split K ways and
    no rank idles at the first collective for the whole relabelling (gloo's 30-minute timeout)."""
    from pathlib import Path

    import torch.distributed as dist

    from dlzero.teacher.relabel_run import relabel_shards
    from dlzero.train import distributed

    if info is None or not info.enabled:
        relabel_shards(rd, spec, progress=progress)
        return
    listed = distributed.broadcast([str(p) for p in rd.shards()] if info.is_main else None, info)
    relabel_shards(rd, spec, shards=[Path(p) for p in listed[info.rank::info.world]],
                   progress=progress and info.is_main)
    dist.barrier()
