"""Held-out validation: every model is scored on positions it never trained on.

Training-batch figures say how well a network fits its window, not how well it plays: the tiny loop's
value head reached 0.97 sign accuracy on its batches and 0.54 on the next generation's games. So
each model is also scored on two held-out sets, and those figures are the ones to judge learning by:

- **next**: the self-play games that arrived since the last generation was trained, scored before they
  enter the replay window. The newest model and the current best (when they differ) are scored on
  them; neither has seen these games. `data` names the generation that trains on them first.
- **fixed**: a shipped set of games no run trains on (`configs/validation/`, a real engine playing
  itself; see scripts/make_validation_set.py), so curves of different runs compare. Every model is
  scored on it once.

Figures per (model, set): policy cross-entropy and top-1 against the targets (visit counts for self-play,
the engine's move for the fixed set), value loss (BCE of the win rate against the game's result, so a
constant 0.5 scores ln 2 = 0.693 on any set) and value sign accuracy on decisive games. Value targets are
the result alone (val_lambda 0): a held-out figure must not reward agreeing with one's own search. A game
that hit the move cap has no result: under `train.value_of_capped_games: drop` (the default, as training)
its positions count in the policy figures only.

Rows go to `metrics/validation.csv` (one per model, set and data; a row already there is never
written twice, so a resumed generation does not duplicate it) and to TensorBoard as
`heldout/<set>/<figure>`.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dlzero.data.atomic import atomic_write_text
from dlzero.data.hcpe3 import Hcpe3Record, read_hcpe3
from dlzero.errors import DlzeroError
from dlzero.model import PolicyValueNet, load_model_file
from dlzero.resources import config_path
from dlzero.runfiles import TENSORBOARD_DIR, VALIDATION_COLUMNS, VALIDATION_CSV, VALIDATION_FIGURES
from dlzero.train.buffer import PositionBuffer
from dlzero.train.dataset import buffer_from_games
from dlzero.train.trainer import evaluate

log = logging.getLogger(__name__)

CONSTANT_VALUE_LOSS = math.log(2.0)  # BCE of always predicting a win rate of 1/2, whatever the results
VALIDATION_DIR = config_path("validation")


@dataclass
class HeldOut:
    """A held-out set ready to score: its positions (value target = the result) and where they came from."""

    name: str  # "next" or "fixed"
    data: str  # which data: "+gen-0004" (games gen-0004 trains on first) or the fixed set's file name
    games: int
    buf: PositionBuffer


def read_games(paths: Iterable[Path]) -> list[Hcpe3Record]:
    """The games of `paths`; an unreadable shard is skipped with a warning (validation is never fatal)."""
    games: list[Hcpe3Record] = []
    for path in paths:
        try:
            games.extend(read_hcpe3(path))
        except (OSError, DlzeroError) as exc:
            log.warning("validation skips %s: %s", path, exc)
    return games


def held_out(name: str, data: str, games: list[Hcpe3Record], max_positions: int, seed: int = 0,
             capped: str = "drop") -> HeldOut:
    """The targets of `games` as a held-out set, at most `max_positions` of them (an even, seeded sample);
    `capped`: `train.value_of_capped_games`."""
    buf = buffer_from_games(games, 0.0, capped=capped)
    if len(buf) > max_positions > 0:
        keep = np.sort(np.random.default_rng(seed).choice(len(buf), max_positions, replace=False))
        buf = buf.subset(keep)
    return HeldOut(name, data, len(games), buf)


def fixed_set_path(spec: str) -> Path | None:
    """`train.validation_set`: '' for none, a file name in configs/validation/, or a path."""
    if not spec:
        return None
    path = Path(spec)
    if not path.is_file() and (VALIDATION_DIR / spec).is_file():
        path = VALIDATION_DIR / spec
    if not path.is_file():
        raise DlzeroError(f"train.validation_set: {spec!r} is neither a file nor one of "
                          f"{sorted(p.name for p in VALIDATION_DIR.glob('*.hcpe3'))} in {VALIDATION_DIR}")
    return path


def fixed_set(spec: str, max_positions: int, capped: str = "drop") -> HeldOut | None:
    """The fixed validation set named by `train.validation_set` (None when it is empty)."""
    path = fixed_set_path(spec)
    if path is None:
        return None
    return held_out("fixed", path.name, read_games([path]), max_positions, capped=capped)


def score(model: PolicyValueNet, held: HeldOut, device: torch.device, batch_size: int = 256) -> dict[str, float]:
    """The held-out figures of `model` on `held` (eval mode, fp32)."""
    figures = evaluate(model, held.buf, batch_size, device)
    return {k: figures[k] for k in VALIDATION_FIGURES}


class ValidationLog:
    """`metrics/validation.csv` (one row per model, set and data) plus TensorBoard scalars."""

    def __init__(self, metrics_dir: Path) -> None:
        metrics_dir.mkdir(parents=True, exist_ok=True)
        self.path = metrics_dir / VALIDATION_CSV
        self.tb_dir = metrics_dir / TENSORBOARD_DIR
        self.rows = read_rows(self.path)

    def has(self, model: str, held: HeldOut) -> bool:
        return any(r["model"] == model and r["set"] == held.name and r["data"] == held.data for r in self.rows)

    def add(self, model: str, step: int, held: HeldOut, figures: dict[str, float]) -> dict[str, str]:
        """Append one row (rewritten whole and atomically: the file is small, and a kill never tears it)."""
        row = {"time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "step": str(step),
               "model": model, "set": held.name, "data": held.data, "games": str(held.games),
               "positions": str(len(held.buf)), **{k: f"{figures[k]:.6g}" for k in VALIDATION_FIGURES}}
        self.rows.append(row)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=VALIDATION_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        atomic_write_text(self.path, out.getvalue())
        from torch.utils.tensorboard import SummaryWriter  # slow import: only when a row is written

        with SummaryWriter(str(self.tb_dir)) as tb:
            for key in VALIDATION_FIGURES:
                if figures[key] == figures[key]:  # NaN (no decisive game) is left out
                    tb.add_scalar(f"heldout/{held.name}/{key}", figures[key], step)
        return row


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a validation.csv (none when it is missing)."""
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return [dict(r) for r in csv.DictReader(fh)]


def validate_models(models: list[tuple[str, Path]], sets: list[HeldOut], log_: ValidationLog, step: int,
                    device: torch.device, batch_size: int = 256) -> list[dict[str, str]]:
    """Score each (name, path) model on each set it has no row for yet; returns the new rows."""
    rows = []
    for name, path in models:
        todo = [h for h in sets if len(h.buf) and not log_.has(name, h)]
        if not todo:
            continue
        model, _ = load_model_file(path)
        for held in todo:
            row = log_.add(name, step, held, score(model, held, device, batch_size))
            rows.append(row)
            log.info("held-out %s (%s, %s positions) %s: policy %.3f nats, top-1 %.3f; value loss %.3f "
                     "(constant 0.693), sign accuracy %.3f", held.name, held.data, row["positions"], name,
                     float(row["policy_loss"]), float(row["policy_acc"]), float(row["value_loss"]),
                     float(row["value_acc"]))
    return rows
