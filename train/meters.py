"""Training meters: running sums between log rows, then rows to metrics.csv and TensorBoard.

metrics.csv gets its header once and one row per logged step. A resumed run replays the steps after
its last checkpoint, so rows are written only for steps after the last one already in the file, and
TensorBoard's writer purges its events after the resume point; either way nothing is duplicated.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import torch

from dlzero.data.atomic import atomic_write_text
from dlzero.runfiles import TENSORBOARD_DIR, TRAIN_COLUMNS, TRAIN_CSV

_SUMS = ("policy_loss", "value_loss", "policy_correct", "samples", "value_correct", "decisive", "reply_loss",
         "replies", "policies", "values")


class Meter:
    """Sums over the steps since the last row, kept on the training device (no sync per step)."""

    def __init__(self, device: torch.device) -> None:
        self.sums = torch.zeros(len(_SUMS), dtype=torch.float64, device=device)

    def add(self, policy_loss: torch.Tensor, value_loss: torch.Tensor, policy_correct: torch.Tensor,
            samples: int, value_correct: torch.Tensor, decisive: torch.Tensor,
            reply_loss: torch.Tensor | None = None, replies: torch.Tensor | None = None,
            policies: torch.Tensor | None = None, values: torch.Tensor | None = None) -> None:
        """Per-batch sums: losses summed over samples, counts of correct predictions; the reply head's
        cross-entropy summed over the samples that have a reply (`replies` of them), when it is trained;
        `policies`: the samples with a policy target (default: all; train.value_plies adds value-only ones);
        `values`: those with a value target (default: all; a move-capped game's have none)."""
        zero = torch.zeros((), dtype=torch.float64, device=self.sums.device)
        every = torch.tensor(float(samples), dtype=torch.float64, device=self.sums.device)
        part = torch.stack([policy_loss.detach().double(), value_loss.detach().double(),
                            policy_correct.double(), every,
                            value_correct.double(), decisive.double(),
                            zero if reply_loss is None else reply_loss.detach().double(),
                            zero if replies is None else replies.double(),
                            every if policies is None else policies.double(),
                            every if values is None else values.double()])
        self.sums += part

    def totals(self) -> dict[str, float]:
        return dict(zip(_SUMS, self.sums.tolist(), strict=True))

    def reset(self) -> None:
        self.sums.zero_()

    def load(self, values: list[float]) -> None:
        """Sums from a checkpoint; one written before a sum existed has fewer, the rest start at 0."""
        full = list(values)[: len(_SUMS)] + [0.0] * max(len(_SUMS) - len(values), 0)
        if len(values) <= _SUMS.index("policies"):  # before value-only samples every sample had a policy
            full[_SUMS.index("policies")] = full[_SUMS.index("samples")]
        if len(values) <= _SUMS.index("values"):  # before move-capped games were dropped every sample had a value
            full[_SUMS.index("values")] = full[_SUMS.index("samples")]
        self.sums.copy_(torch.tensor(full, dtype=torch.float64))


def summarise(totals: dict[str, float]) -> dict[str, float]:
    """Means from sums: value loss per sample with a value target, policy loss and top-1 per sample with a
    policy target, value sign accuracy on decisive games."""
    n_policy = max(totals["policies"], 1.0)
    return {
        "policy_loss": totals["policy_loss"] / n_policy,
        "value_loss": totals["value_loss"] / totals["values"] if totals["values"] else float("nan"),
        "policy_acc": totals["policy_correct"] / n_policy,
        "value_acc": totals["value_correct"] / totals["decisive"] if totals["decisive"] else float("nan"),
        "samples": totals["samples"],
        "reply_loss": totals["reply_loss"] / totals["replies"] if totals.get("replies") else float("nan"),
    }


class MetricsLog:
    """metrics.csv (append, no duplicate steps) plus TensorBoard events in `metrics_dir/tb`."""

    def __init__(self, metrics_dir: Path, resume_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter  # slow import: only the writing rank pays it

        metrics_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path = metrics_dir / TRAIN_CSV
        self.last_step = self._repair_and_last_step()
        self.tb = SummaryWriter(str(metrics_dir / TENSORBOARD_DIR), purge_step=resume_step + 1 if resume_step else None)

    def _repair_and_last_step(self) -> int:
        """Last step in metrics.csv; a torn last line (a kill mid-write) is cut off first."""
        if not self.csv_path.is_file():
            return -1
        text = self.csv_path.read_text()
        if text and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
            atomic_write_text(self.csv_path, text)
        last = -1
        for row in csv.DictReader(io.StringIO(text)):
            try:
                last = max(last, int(row.get("step") or -1))
            except ValueError:
                continue
        return last

    def write(self, row: dict[str, float]) -> None:
        step = int(row["step"])
        if step <= self.last_step:
            return
        new = not self.csv_path.is_file() or self.csv_path.stat().st_size == 0
        with self.csv_path.open("a", newline="") as fh:
            # a file begun by an older dlzero keeps its header: new columns are left out, not misaligned
            w = csv.DictWriter(fh, fieldnames=TRAIN_COLUMNS if new else self._header(), extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
        self.last_step = step
        for key in ("policy_loss", "value_loss", "policy_acc", "value_acc", "lr", "samples_per_s", "reply_loss"):
            if key in row and row[key] == row[key]:  # NaN (no reply head) is left out
                self.tb.add_scalar(f"train/{key}", row[key], step)
        self.tb.flush()

    def _header(self) -> list[str]:
        with self.csv_path.open(newline="") as fh:
            return next(csv.reader(fh), None) or list(TRAIN_COLUMNS)

    def close(self) -> None:
        self.tb.close()
