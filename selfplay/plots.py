"""Progress plot of a run: training losses, and the Elo of each promoted best relative to generation 0.

Gates only ever compare a candidate with the best of the moment, so absolute strength is the chain
of accepted gates: Elo(new best) = Elo(the best it beat) + that gate's estimate, with generation 0
at 0. Rejected candidates are drawn at the Elo their gate measured, so one sees how close they came.
Both CSVs are read leniently (missing files, columns or cells are skipped): the plot must never
break a run.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from dlzero.data.atomic import atomic_write_bytes  # noqa: E402
from dlzero.rundir import RunDir  # noqa: E402


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def loss_series(rows: list[dict[str, str]]) -> tuple[str, dict[str, tuple[list[float], list[float]]]]:
    """(x label, {column: (x, y)}) for each column named "...loss"; x is step, generation or row number."""
    columns = list(rows[0]) if rows else []
    x_key = next((k for k in ("step", "generation") if k in columns), None)
    series: dict[str, tuple[list[float], list[float]]] = {}
    for name in (c for c in columns if c and c.endswith("loss")):
        xs, ys = [], []
        for i, row in enumerate(rows):
            x = _num(row.get(x_key)) if x_key else float(i)
            y = _num(row.get(name))
            if x is not None and y is not None:
                xs.append(x)
                ys.append(y)
        if ys:
            series[name] = (xs, ys)
    return x_key or "row", series


def elo_chain(rows: list[dict[str, str]]) -> tuple[dict[int, float], list[tuple[int, float]]]:
    """({promoted generation: Elo vs generation 0}, [(rejected generation, measured Elo)]).

    A row counts as promoted by its `promoted` column, or, in files without one, decision "accept".
    """
    best: dict[int, float] = {}
    rejected: list[tuple[int, float]] = []
    for row in rows:
        gen, opp, elo = _num(row.get("generation")), _num(row.get("opponent")), _num(row.get("elo"))
        if gen is None or elo is None:
            continue
        base = best.setdefault(int(opp), 0.0) if opp is not None else 0.0
        flag = row.get("promoted")
        # files written before the `promoted` column existed only say whether SPRT accepted
        promoted = row.get("decision") == "accept" if flag in (None, "") else flag not in ("0", "False", "false")
        if promoted:
            best[int(gen)] = base + elo
        else:
            rejected.append((int(gen), base + elo))
    return best, rejected


def plot_progress(rd: RunDir) -> Path:
    """Write metrics/progress.png (atomically) from metrics.csv and ratings.csv; returns its path."""
    x_label, losses = loss_series(_rows(rd.metrics_dir / "metrics.csv"))
    best, rejected = elo_chain(_rows(rd.metrics_dir / "ratings.csv"))
    fig, (ax_loss, ax_elo) = plt.subplots(1, 2, figsize=(11, 4))
    for name, (xs, ys) in losses.items():
        ax_loss.plot(xs, ys, label=name)
    ax_loss.set_xlabel(x_label)
    ax_loss.set_title("training loss")
    if losses:
        ax_loss.legend()
    else:
        ax_loss.text(0.5, 0.5, "no metrics yet", ha="center", va="center", transform=ax_loss.transAxes)
    if best:
        gens = sorted(best)
        ax_elo.plot(gens, [best[g] for g in gens], "o-", label="promoted")
    if rejected:
        gens, elos = zip(*rejected, strict=True)
        ax_elo.plot(gens, elos, "x", color="tab:red", label="rejected")
    if best or rejected:
        ax_elo.legend()
    else:
        ax_elo.text(0.5, 0.5, "no gates yet", ha="center", va="center", transform=ax_elo.transAxes)
    ax_elo.set_xlabel("generation")
    ax_elo.set_ylabel("Elo vs generation 0")
    ax_elo.set_title("strength")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    out = rd.metrics_dir / "progress.png"
    rd.metrics_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, buf.getvalue())
    return out
