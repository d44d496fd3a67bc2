"""Arguments shared by several commands: config file, overrides, inference flags.

Every flag is a shorthand for a config key, so `--device cuda` is `--set inference.device=cuda`;
`overrides(args)` turns the flags a user gave into the `section.key=value` list `load_config` takes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dlzero.config import MAX_THREADS, Config, load_config
from dlzero.resources import configs_dir

if TYPE_CHECKING:
    from dlzero.engine.shipped import ModelChoice

CONFIG_DIR = configs_dir()

# flag dest -> config key
FLAG_KEYS: dict[str, str] = {
    "backend": "inference.backend",
    "device": "inference.device",
    "precision": "inference.precision",
    "threads": "inference.threads",
}


def int_range(lo: int, hi: int):
    """An argparse type: an integer from `lo` to `hi`, the range the USI option of the same key offers,
    so a flag cannot ask for what the engine refuses in a GUI (--threads 2000 never answered)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be from {lo} to {hi}, got {value}")
        return value
    return parse


def add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file, or the name of one in configs/ (tiny, gpu-1, cluster, "
                   "...); default: built-in defaults (a 5x64 network)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override any config key, e.g. --set model.blocks=6 (repeatable)")


def add_inference_args(p: argparse.ArgumentParser, backend: bool = True) -> None:
    if backend:
        p.add_argument("--backend", choices=["auto", "torch", "onnx"],
                       help="inference backend (inference.backend)")
    p.add_argument("--device", help="auto, cpu, cuda or cuda:N (inference.device)")
    p.add_argument("--precision", choices=["auto", "fp32", "fp16", "bf16", "int8"],
                   help="inference.precision; int8: a calibrated quantized ONNX model on onnxruntime")
    p.add_argument("--threads", type=int_range(0, MAX_THREADS),
                   help=f"compute threads per process, 0 to {MAX_THREADS} (inference.threads)")


def error_status(command: str, exc: BaseException) -> int | None:
    """Print the one line that ends `dlzero <command>` for `exc` and return its exit status: 2 for bad
    input (DlzeroError) and for a disk that refuses a write (ENOSPC, EDQUOT, EROFS), 130 for ^C; None for
    anything else, a bug, whose traceback is its report. `dlzero.cli` reports every command's errors so;
    a torchrun rank reports its own, since it must end through `dlzero.train.distributed.exit_rank`."""
    from dlzero.data.hcpe3 import storage_error
    from dlzero.errors import DlzeroError

    if isinstance(exc, KeyboardInterrupt):
        print(f"dlzero {command}: interrupted", file=sys.stderr)
        return 130
    error = exc if isinstance(exc, DlzeroError) else storage_error(exc)
    if error is None:
        return None
    print(f"dlzero {command}: error: {error}", file=sys.stderr)
    return 2


def overrides(args: argparse.Namespace, keys: dict[str, str] | None = None) -> list[str]:
    """`--set` overrides followed by those implied by flags the user actually gave."""
    out = list(getattr(args, "set", []) or [])
    for dest, key in {**FLAG_KEYS, **(keys or {})}.items():
        value = getattr(args, dest, None)
        if value is not None:
            out.append(f"{key}={value}")
    return out


def resolve_config_path(name: str | None) -> str | None:
    """A path as given, or a bare name like `tiny` looked up among the shipped configs (checkout or wheel)."""
    if not name or Path(name).exists() or name.endswith((".yaml", ".yml")):
        return name
    bundled = CONFIG_DIR / f"{name}.yaml"
    return str(bundled) if bundled.is_file() else name


MODEL_HELP = ("model file (.pt or .onnx), a run directory (its best generation), or a network's name "
              "(`dlzero networks list`); default: the default network")


def model_choice(spec: str | None, cfg: Config, command: str) -> ModelChoice:
    """The model a command loads (`dlzero.engine.shipped`): `--model` as given, else the default network, which
    is named on stderr (stdout carries the command's answer)."""
    from dlzero.engine.shipped import require_model

    choice = require_model(spec, cfg)
    if choice.network is not None:
        print(f"dlzero {command}: {choice.note('--model')}", file=sys.stderr)
    return choice


def config_from_args(args: argparse.Namespace, keys: dict[str, str] | None = None) -> Config:
    """Defaults <- config file <- --set <- flags."""
    return load_config(resolve_config_path(getattr(args, "config", None)), overrides(args, keys))


def run_from_args(args: argparse.Namespace, keys: dict[str, str] | None = None, command: str = "dlzero",
                  create: bool = True):
    """(RunDir, Config) for `--run`, by the one rule every command that takes `--run` follows:

    - a new run (only where `create`) gets the CLI's config: defaults <- `--config` <- `--set` <- flags;
    - an existing run's config.yaml is the base; `--set` and flags apply on top, and the result is
      saved back (atomically), so the run directory always says what its last command used.
      `--config` is ignored for an existing run, with a warning: a run keeps its own settings.
    """
    import sys

    from dlzero.config import apply_overrides, config_from_dict, config_to_dict
    from dlzero.rundir import RunDir

    rd = RunDir(args.run)
    if not rd.info_path.exists() and create:
        cfg = config_from_args(args, keys)
        return RunDir.create(args.run, cfg), cfg
    rd = RunDir.open(args.run)
    if getattr(args, "config", None):
        print(f"{command}: {args.run} exists; using its config.yaml, not {args.config} (change keys with --set)",
              file=sys.stderr)
    cfg = config_from_dict(apply_overrides(config_to_dict(rd.config()), overrides(args, keys)))
    rd.save_config(cfg)
    return rd, cfg
