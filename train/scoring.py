"""Scoring model files on held-out games, after the fact: `dlzero score`.

`dlzero train --hcpe` prints the held-out figures of the model it wrote, once. Comparing two networks needs
both scored on one set of positions: when a third teacher file joined the training files, the hold-out grew
with it, and the older network's figures no longer compared with the newer one's. `held_out` rebuilds the
split a training run made from its files and settings (`train.holdout_fraction`, `train.seed`; the split is a
seeded hash of each game, train.holdout, so the same files give the same games whatever their order), or
takes `train.val_files` whole, and `score_model` scores any model file on it with the trainer's own
`evaluate`, so the figures are those training printed.

The value diagnosis (`dlzero score --value-diagnosis`, issue 49) asks why a student's held-out value loss
stopped falling. hcpe3 data keeps, per position, the teacher's eval (cp = 756 * logit(p)) beside the game's
result, so three figures can be read off one hold-out: the teacher's own value loss against the results (the
loss a perfect copy of the teacher would score: the ceiling of distillation), each model's loss against the
teacher's win rate (how far the copy is from it; its KL, the loss less the teacher's own entropy, is 0 for a
perfect copy), and each loss by ply bucket (where the loss is: openings are near even whoever plays them).
The positions and the loss are the trainer's (`value_loss` against the result, sigmoid(2x) of the value
logit x, draws as 1/2, no figure on move-capped games under `train.value_of_capped_games: drop`), so the
"all plies" figure of a model against the result is `evaluate`'s `value_loss`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from dlzero.config import TrainConfig
from dlzero.errors import ConfigError, DataError
from dlzero.model import load_model_file
from dlzero.train.buffer import BatchDecoder, PositionBuffer
from dlzero.train.holdout import HoldoutReport
from dlzero.train.supervised import load_val_files, split_supervised
from dlzero.train.trainer import evaluate

FIGURES = ("policy_loss", "policy_acc", "value_loss", "value_acc", "value_loss_target")
DEFAULT_PLY_EDGES = (30, 60, 90, 120)  # buckets 0-29, 30-59, 60-89, 90-119, 120+
LOG_FLOOR = -100.0  # torch's binary_cross_entropy clamps log(p) here: a proven mate (+-30000 cp) is p = 1 in float32


def held_out(hcpe: Sequence[str | Path], train: TrainConfig) -> tuple[PositionBuffer, HoldoutReport]:
    """The positions a supervised run on `hcpe` with these settings held out, and what they are.

    With `train.val_files` and no training files, every position of the validation files is scored (nothing
    is known to have trained on them); with both, those that are also training positions are left out, as
    training leaves them out."""
    if not hcpe and not train.val_files:
        raise ConfigError("nothing to score on: give the training files (--hcpe) whose held-out games to rebuild, "
                          "or held-out files (--val)")
    if hcpe:
        _, hold, report = split_supervised(hcpe, train)
    else:
        hold, games = load_val_files(train)
        report = HoldoutReport(", ".join(train.val_files), games, games, len(hold), 0)
    if not len(hold):
        raise DataError(", ".join(map(str, hcpe or train.val_files)), None, f"no held-out positions ({report})")
    return hold, report


def score_model(path: str | Path, hold: PositionBuffer, batch_size: int, device: torch.device) -> dict[str, float]:
    """`evaluate`'s figures for the `.pt` model file `path` on `hold`: whatever its architecture, since a
    model file carries its own."""
    model, _ = load_model_file(path)
    return evaluate(model, hold, batch_size, device)


def held_out_with_teacher(hcpe: Sequence[str | Path], train: TrainConfig) -> tuple[PositionBuffer, np.ndarray,
                                                                                      HoldoutReport]:
    """`held_out`'s positions (their value target blended by `train.val_lambda`, as training had it), and the
    teacher's win rate sigmoid(eval / 756) of each (NaN where the position has no value target).

    The hold-out is loaded once at val_lambda 1, where the value target is the teacher's win rate alone, and
    the blend is made from it: the split does not depend on val_lambda."""
    hold, report = held_out(hcpe, dataclasses.replace(train, val_lambda=1.0))
    teacher = hold.value
    lam = train.val_lambda
    blended = ((1.0 - lam) * hold.result.astype(np.float64) + lam * teacher.astype(np.float64)).astype(np.float32)
    return hold.with_value(blended), teacher, report


@torch.no_grad()
def value_logits(path: str | Path, hold: PositionBuffer, batch_size: int, device: torch.device) -> np.ndarray:
    """The value logit x (win rate sigmoid(2x)) of the `.pt` model `path` at every position of `hold`, in eval
    mode and fp32 as `evaluate` runs it, so the diagnosis can cut the loss by ply without another pass."""
    model, _ = load_model_file(path)
    model = model.to(device).eval()
    decoder = BatchDecoder(batch_size)
    out = np.empty(len(hold), np.float64)
    for start in range(0, len(hold), batch_size):
        idx = np.arange(start, min(start + batch_size, len(hold)))
        batch = decoder.decode(hold, idx)
        _, value = model(batch.planes.to(device), value_logit=True)
        out[idx] = value.float().cpu().numpy().reshape(-1)
    return out


def bce_of_logit(logit: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-position BCE of the win rate sigmoid(logit) against a win-rate target, as torch's
    binary_cross_entropy_with_logits computes it (stable at any logit)."""
    return np.logaddexp(0.0, logit) - target * logit


def bce_of_rate(rate: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-position BCE of a win rate against a win-rate target, log clamped at LOG_FLOOR as torch clamps it: a
    stored eval of a proven result is a win rate of exactly 0 or 1, which would make an infinite figure of a
    single position (and 0 * log 0 a NaN)."""
    with np.errstate(divide="ignore"):
        log_p = np.maximum(np.log(rate), LOG_FLOOR)
        log_q = np.maximum(np.log1p(-rate), LOG_FLOOR)
    return -(target * log_p + (1.0 - target) * log_q)


def ply_buckets(edges: Sequence[int]) -> list[tuple[str, int, int | None]]:
    """(label, first ply, first ply past the bucket or None) of the buckets ascending `edges` cut plies into:
    (30, 60) gives 0-29, 30-59 and 60+. A ply counts the moves played before the position since the game's
    start (the start position, for `dlzero teach`'s games: their opening-suite moves are replayed plies)."""
    bounds = [0, *edges]
    buckets = [(f"{lo}-{hi - 1}", lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    return [*buckets, (f"{bounds[-1]}+", bounds[-1], None)]


def parse_ply_edges(text: str) -> tuple[int, ...]:
    """`--ply-buckets`' comma list of bucket edges: positive plies, strictly ascending."""
    try:
        edges = tuple(int(x) for x in text.split(","))
    except ValueError:
        edges = ()
    if not edges or edges[0] < 1 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ConfigError(f"--ply-buckets {text!r}: give ascending plies above 0, e.g. 30,60,90,120")
    return edges


def value_diagnosis(ply: np.ndarray, result: np.ndarray, teacher: np.ndarray, logits: dict[str, np.ndarray],
                    edges: Sequence[int] = DEFAULT_PLY_EDGES) -> list[dict]:
    """The value diagnosis's figures (module docstring), one dict per figure and bucket ("all" first):
    `who` (constant, teacher, or a model's label), `figure` (vs_result, vs_teacher, kl_teacher), `plies`,
    `positions` and `draws` (share of the bucket's positions from drawn games), `value` (mean per position; NaN
    for an empty bucket).

    Scored: the positions with a value target (`teacher` not NaN). `constant` predicts the bucket's mean result
    everywhere: the best a model that ignores the board can do there, the scale a bucket's figures read on.
    `ply`, `result` and `teacher` are per position (result 1, 0, 1/2 for the side to move); `logits` maps a
    model's label to its value logits (`value_logits`)."""
    has = ~np.isnan(teacher)
    ply, z, p = ply[has].astype(np.int64), result[has].astype(np.float64), teacher[has].astype(np.float64)
    logits = {who: 2.0 * x[has] for who, x in logits.items()}  # the model's win rate is sigmoid(2x)
    teacher_entropy = bce_of_rate(p, p)
    rows = []
    for label, lo, hi in [("all", 0, None), *ply_buckets(edges)]:
        sel = (ply >= lo) & (ply < (hi if hi is not None else np.iinfo(np.int64).max))
        constant = np.full(len(z), _mean(z, sel))
        figures = [("constant", "vs_result", bce_of_rate(constant, z)), ("teacher", "vs_result", bce_of_rate(p, z))]
        for who, x in logits.items():
            to_teacher = bce_of_logit(x, p)
            figures += [(who, "vs_result", bce_of_logit(x, z)), (who, "vs_teacher", to_teacher),
                        (who, "kl_teacher", to_teacher - teacher_entropy)]
        base = {"plies": label, "positions": int(sel.sum()), "draws": _mean((z == 0.5).astype(np.float64), sel)}
        rows += [{"who": who, "figure": figure, **base, "value": _mean(values, sel)} for who, figure, values in figures]
    return rows


def _mean(values: np.ndarray, sel: np.ndarray) -> float:
    """The mean of `values` where `sel`; NaN for an empty selection (an empty bucket has no figure, not 0)."""
    return float(values[sel].mean()) if sel.any() else float("nan")


DIAGNOSIS_NAMES = {"vs_result": "vs result", "vs_teacher": "vs teacher", "kl_teacher": "KL to teacher"}


def diagnosis_table(rows: list[dict]) -> str:
    """`value_diagnosis`'s rows as a table: a line per figure, a column per ply bucket."""
    buckets = list(dict.fromkeys(r["plies"] for r in rows))
    lines = {}
    counts: dict[str, dict] = {}
    for r in rows:
        counts.setdefault(r["plies"], r)
        lines.setdefault(f"{r['who']} {DIAGNOSIS_NAMES[r['figure']]}", {})[r["plies"]] = r["value"]
    width = max(len(k) for k in [*lines, "drawn (share)"])
    out = [f"{'value loss by ply':<{width}}  " + "  ".join(f"{b:>8}" for b in buckets),
           f"{'positions':<{width}}  " + "  ".join(f"{counts[b]['positions']:>8}" for b in buckets),
           f"{'drawn (share)':<{width}}  " + "  ".join(f"{counts[b]['draws']:>8.4f}" for b in buckets)]
    out += [f"{name:<{width}}  " + "  ".join(f"{v[b]:>8.4f}" for b in buckets) for name, v in lines.items()]
    return "\n".join(out)
