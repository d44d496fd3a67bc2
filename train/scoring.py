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
from dlzero.train.supervised import load_val_files, split_supervised_keyed
from dlzero.train.trainer import evaluate

FIGURES = ("policy_loss", "policy_acc", "value_loss", "value_acc", "value_loss_target")
DEFAULT_PLY_EDGES = (30, 60, 90, 120)  # buckets 0-29, 30-59, 60-89, 90-119, 120+
LOG_FLOOR = -100.0  # torch's binary_cross_entropy clamps log(p) here: a proven mate (+-30000 cp) is p = 1 in float32


def held_out(hcpe: Sequence[str | Path], train: TrainConfig) -> tuple[PositionBuffer, np.ndarray, HoldoutReport,
                                                                   PositionBuffer]:
    """The positions a supervised run on `hcpe` with these settings held out, the key of each one's game
    (train.holdout), what they are, and the positions it trained on (none without `hcpe`: `training_sample`
    scores a sample of them beside the hold-out).

    With `train.val_files` and no training files, every position of the validation files is scored (nothing
    is known to have trained on them); with both, those that are also training positions are left out, as
    training leaves them out."""
    if not hcpe and not train.val_files:
        raise ConfigError("nothing to score on: give the training files (--hcpe) whose held-out games to rebuild, "
                          "or held-out files (--val)")
    if hcpe:
        training, hold, keys, report = split_supervised_keyed(hcpe, train)
    else:
        hold, keys = load_val_files(train)
        training = PositionBuffer.empty()
        games = len(np.unique(keys))
        report = HoldoutReport(", ".join(train.val_files), games, games, len(hold), 0)
    if not len(hold):
        raise DataError(", ".join(map(str, hcpe or train.val_files)), None, f"no held-out positions ({report})")
    return hold, keys, report, training


def training_sample(training: PositionBuffer, n: int, seed: int = 0) -> PositionBuffer:
    """`n` training positions (all of them if fewer) drawn without replacement, in their order: scored beside
    a hold-out of `n` positions (`dlzero score --train-sample`), a large gap between the two figures is
    memorisation."""
    pick = np.random.default_rng(seed).choice(len(training), min(len(training), n), replace=False)
    return training.subset(np.sort(pick))


def score_model(path: str | Path, hold: PositionBuffer, batch_size: int, device: torch.device) -> dict[str, float]:
    """`evaluate`'s figures for the `.pt` model file `path` on `hold`: whatever its architecture, since a
    model file carries its own."""
    model, _ = load_model_file(path)
    return evaluate(model, hold, batch_size, device)


def held_out_with_teacher(hcpe: Sequence[str | Path], train: TrainConfig) -> tuple[PositionBuffer, np.ndarray,
                                                                                      np.ndarray, HoldoutReport,
                                                                                      PositionBuffer]:
    """`held_out`'s positions (their value target blended by `train.val_lambda`, as training had it), the
    teacher's win rate sigmoid(eval / 756) of each (NaN where the position has no value target), their games'
    keys, the report and the training positions (blended alike).

    The hold-out is loaded once at val_lambda 1, where the value target is the teacher's win rate alone, and
    the blend is made from it: the split does not depend on val_lambda."""
    hold, keys, report, training = held_out(hcpe, dataclasses.replace(train, val_lambda=1.0))
    return _blended(hold, train.val_lambda), hold.value, keys, report, _blended(training, train.val_lambda)


def _blended(buf: PositionBuffer, lam: float) -> PositionBuffer:
    """`buf`, loaded with the teacher's win rate as its value target, with the target training had: the result
    blended with that win rate by `lam` (train.val_lambda)."""
    teacher = buf.value.astype(np.float64)
    return buf.with_value(((1.0 - lam) * buf.result.astype(np.float64) + lam * teacher).astype(np.float32))


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
                    games: np.ndarray, edges: Sequence[int] = DEFAULT_PLY_EDGES) -> list[dict]:
    """The value diagnosis's figures (module docstring), one dict per figure and bucket ("all" first):
    `who` (constant, teacher, or a model's label), `figure` (vs_result; a model's also minus_teacher, its loss
    against the result less the teacher's on the same positions, vs_teacher and kl_teacher), `plies`,
    `positions`, `games` and `draws` (share of the bucket's positions from drawn games), `value` (mean per
    position) and `se` (its standard error with each game's positions as one sample: they share the game's
    result, so positions are not independent); NaN where a bucket is empty (and `se` with fewer than 2 games).

    Scored: the positions with a value target (`teacher` not NaN). `constant` predicts the bucket's mean result
    everywhere: the best a model that ignores the board can do there, the scale a bucket's figures read on.
    `ply`, `result`, `teacher` and `games` (any id of the position's game) are per position (result 1, 0, 1/2
    for the side to move); `logits` maps a model's label to its value logits (`value_logits`)."""
    has = ~np.isnan(teacher)
    ply, z, p = ply[has].astype(np.int64), result[has].astype(np.float64), teacher[has].astype(np.float64)
    game = np.unique(games[has], return_inverse=True)[1]
    logits = {who: 2.0 * x[has] for who, x in logits.items()}  # the model's win rate is sigmoid(2x)
    teacher_loss, teacher_entropy = bce_of_rate(p, z), bce_of_rate(p, p)
    rows = []
    for label, lo, hi in [("all", 0, None), *ply_buckets(edges)]:
        sel = (ply >= lo) & (ply < (hi if hi is not None else np.iinfo(np.int64).max))
        constant = np.full(len(z), _mean(z, sel)[0])
        figures = [("constant", "vs_result", bce_of_rate(constant, z)), ("teacher", "vs_result", teacher_loss)]
        for who, x in logits.items():
            to_result, to_teacher = bce_of_logit(x, z), bce_of_logit(x, p)
            figures += [(who, "vs_result", to_result), (who, "minus_teacher", to_result - teacher_loss),
                        (who, "vs_teacher", to_teacher), (who, "kl_teacher", to_teacher - teacher_entropy)]
        base = {"plies": label, "positions": int(sel.sum()), "games": len(np.unique(game[sel])),
                "draws": _mean((z == 0.5).astype(np.float64), sel)[0]}
        for who, figure, values in figures:
            value, se = _mean(values, sel, game)
            rows.append({"who": who, "figure": figure, **base, "value": value, "se": se})
    return rows


def _mean(values: np.ndarray, sel: np.ndarray, game: np.ndarray | None = None) -> tuple[float, float]:
    """(the mean of `values` where `sel`, its standard error by game): the ratio estimator's, from each game's sum
    and count, sqrt(G / (G - 1) * sum_g (s_g - mean * n_g)^2) / N over the G games with a selected position. NaN
    for an empty selection (an empty bucket has no figure, not 0); the error also NaN without `game` or with one
    game."""
    if not sel.any():
        return float("nan"), float("nan")
    mean = float(values[sel].mean())
    if game is None:
        return mean, float("nan")
    ids, per_game = np.unique(game[sel], return_inverse=True)
    if len(ids) < 2:
        return mean, float("nan")
    sums, counts = np.bincount(per_game, values[sel]), np.bincount(per_game).astype(np.float64)
    spread = ((sums - mean * counts) ** 2).sum() * len(ids) / (len(ids) - 1)
    return mean, float(np.sqrt(spread) / counts.sum())


DIAGNOSIS_NAMES = {"vs_result": "vs result", "minus_teacher": "minus teacher", "vs_teacher": "vs teacher",
                   "kl_teacher": "KL to teacher"}


def diagnosis_table(rows: list[dict]) -> str:
    """`value_diagnosis`'s rows as two tables, the figures and their standard errors by game: a line per figure,
    a column per ply bucket."""
    buckets = list(dict.fromkeys(r["plies"] for r in rows))
    counts = {r["plies"]: r for r in rows}
    names = list(dict.fromkeys(f"{r['who']} {DIAGNOSIS_NAMES[r['figure']]}" for r in rows))
    cells = {(f"{r['who']} {DIAGNOSIS_NAMES[r['figure']]}", r["plies"]): r for r in rows}
    width = max(len(k) for k in [*names, "drawn (share)"])

    def line(name: str, texts: list[str]) -> str:
        return f"{name:<{width}}  " + "  ".join(f"{t:>8}" for t in texts)

    out = [line("value loss by ply", buckets),
           line("positions", [str(counts[b]["positions"]) for b in buckets]),
           line("games", [str(counts[b]["games"]) for b in buckets]),
           line("drawn (share)", [f"{counts[b]['draws']:.4f}" for b in buckets])]
    out += [line(name, [f"{cells[name, b]['value']:.4f}" for b in buckets]) for name in names]
    out += ["", line("standard error by game", buckets)]
    out += [line(name, [f"{cells[name, b]['se']:.4f}" for b in buckets]) for name in names]
    return "\n".join(out)
