"""Progress plot of a run: training losses, and strength against generation and against wall time.

Strength comes from `metrics/elo.csv` when the run has anchored ratings (`dlzero rate`: games against
fixed anchors, an Elo only where informative pairings connect the players): each rated model with its
95 % interval as an error bar, against its generation and against the time since the run's first model,
and the anchors (alpha-beta rungs, outside engines) as labelled horizontal lines. One axis holds one
scale: the one most rated models are on (`relative_to`: random = 0 where connected to it), named with
its prior on the axis; players on another scale or with no Elo are left out (`dlzero rate` lists them).

Without ratings it falls back to the gate chain (`dlzero.gating.chain`, which the dashboard draws
too): Elo(new best) = Elo(the best it beat) + that gate's estimate, with generation 0 at 0;
rejected candidates are drawn at the Elo their gate measured. The chain sums noisy,
self-referential estimates and inflates; it is drawn only when nothing better exists.
All CSVs are read leniently (missing files, columns or cells are skipped): the plot must never
break a run.
"""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from dlzero.data.atomic import atomic_write_png  # noqa: E402
from dlzero.gating.chain import Gate, gate_chain, optional_number, read_gates  # noqa: E402
from dlzero.gating.elo_fit import main_reference, scale_label  # noqa: E402
from dlzero.rundir import RunDir  # noqa: E402


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def loss_series(rows: list[dict[str, str]]) -> tuple[str, dict[str, tuple[list[float], list[float]]]]:
    """(x label, {column: (x, y)}) for each column named "...loss"; x is step, generation or row number."""
    columns = list(rows[0]) if rows else []
    x_key = next((k for k in ("step", "generation") if k in columns), None)
    series: dict[str, tuple[list[float], list[float]]] = {}
    for name in (c for c in columns if c and c.endswith("loss")):
        xs, ys = [], []
        for i, row in enumerate(rows):
            x = optional_number(row.get(x_key)) if x_key else float(i)
            y = optional_number(row.get(name))
            if x is not None and y is not None:
                xs.append(x)
                ys.append(y)
        if ys:
            series[name] = (xs, ys)
    return x_key or "row", series


def _zero(row: dict[str, str]) -> str:
    """The player at 0 of a row's scale; files from before `relative_to` was written are random = 0."""
    return row["relative_to"].strip() if "relative_to" in row else "random"


def anchored_scale(rows: list[dict[str, str]]) -> tuple[str | None, str]:
    """(the zero of the scale a chart of these elo.csv rows draws, the axis label naming it and its prior):
    the zero most rated models are measured from (`main_reference`), else most rated players."""
    rated = [r for r in rows if optional_number(r.get("elo")) is not None]
    models = [_zero(r) for r in rated if optional_number(r.get("generation")) is not None]
    zero = main_reference(models) or main_reference(_zero(r) for r in rated)
    prior = next((optional_number(r.get("prior_draws")) for r in rated if r.get("prior_draws")), None)
    return zero, scale_label(zero or "random", prior)


def anchored_series(rows: list[dict[str, str]]) -> tuple[list[tuple[int, float | None, float, float, float]],
                                                         list[tuple[str, float]]]:
    """From elo.csv rows on `anchored_scale`'s scale: ([(generation, wall seconds or None, elo, low, high)]
    by generation, [(anchor name, elo)] for the players that are not models of the run)."""
    zero, _ = anchored_scale(rows)
    models, anchors = [], []
    for row in rows:
        elo, low, high = (optional_number(row.get(k)) for k in ("elo", "elo_low", "elo_high"))
        if elo is None or _zero(row) != zero:
            continue
        gen = optional_number(row.get("generation"))
        if gen is None:
            anchors.append((row.get("player", "?"), elo))
        else:
            models.append((int(gen), optional_number(row.get("wall_seconds")), elo, low if low is not None else elo,
                           high if high is not None else elo))
    return sorted(models), anchors


def _draw_anchored(ax, xs: list[float], models: list, anchors: list[tuple[str, float]], x_label: str,
                   y_label: str) -> None:
    elos = [m[2] for m in models]
    yerr = [[m[2] - m[3] for m in models], [m[4] - m[2] for m in models]]
    ax.errorbar(xs, elos, yerr=yerr, fmt="o-", capsize=3, label="model (95 %)")
    for name, elo in anchors:
        ax.axhline(elo, color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(name, (0.01, elo), xycoords=("axes fraction", "data"), fontsize=7, color="grey",
                    va="bottom")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.legend(loc="lower right")


def chain_series(gates: list[Gate]) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """([(generation, Elo vs generation 0)] of generation 0 and the promoted ones, by generation,
    [(rejected generation, the Elo its gate measured)]); gates the chain cannot place are left out."""
    best: dict[int, float] = {}
    rejected: list[tuple[int, float]] = []
    for gate, place in zip(gates, gate_chain(gates), strict=True):
        if place is None:
            continue
        best.setdefault(0, 0.0)  # the chain's origin
        if gate.promoted:
            best[gate.generation] = place.elo
        else:
            rejected.append((gate.generation, place.elo))
    return sorted(best.items()), rejected


def _draw_gate_chain(ax, gates: list[Gate]) -> None:
    best, rejected = chain_series(gates)
    if best:
        gens, elos = zip(*best, strict=True)
        ax.plot(gens, elos, "o-", label="promoted")
    if rejected:
        gens, elos = zip(*rejected, strict=True)
        ax.plot(gens, elos, "x", color="tab:red", label="rejected")
    if best or rejected:
        ax.legend()
    else:  # gates whose opponents were promoted without a match (gate.mode every-N) have no place on it
        text = "no gates yet" if not gates else "no gate can be chained:\nsee the anchored ratings (dlzero rate)"
        ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("generation")
    ax.set_ylabel("Elo vs generation 0 (gate chain)")
    ax.set_title("strength (gate chain, not anchored)")


def plot_progress(rd: RunDir) -> Path:
    """Write metrics/progress.png (atomically) from metrics.csv, elo.csv (or ratings.csv); returns its path."""
    x_label, losses = loss_series(_rows(rd.train_csv))
    elo_rows = _rows(rd.elo_csv)
    models, anchors = anchored_series(elo_rows)
    y_label = anchored_scale(elo_rows)[1]
    fig, (ax_loss, ax_elo, ax_time) = plt.subplots(1, 3, figsize=(16, 4.5))
    for name, (xs, ys) in losses.items():
        ax_loss.plot(xs, ys, label=name)
    ax_loss.set_xlabel(x_label)
    ax_loss.set_title("training loss")
    if losses:
        ax_loss.legend()
    else:
        ax_loss.text(0.5, 0.5, "no metrics yet", ha="center", va="center", transform=ax_loss.transAxes)
    if models:
        _draw_anchored(ax_elo, [m[0] for m in models], models, anchors, "generation", y_label)
        ax_elo.set_title("anchored strength by generation")
        timed = [m for m in models if m[1] is not None]
        if timed:
            hours = max(m[1] for m in timed) >= 7200
            scale, unit = (3600.0, "hours") if hours else (60.0, "minutes")
            _draw_anchored(ax_time, [m[1] / scale for m in timed], timed, anchors, f"{unit} since generation 0",
                           y_label)
        ax_time.set_title("anchored strength by wall time")
    else:
        _draw_gate_chain(ax_elo, read_gates(rd.ratings_csv))
        ax_time.text(0.5, 0.5, "no anchored ratings yet\n(dlzero rate --run ...)", ha="center", va="center",
                     transform=ax_time.transAxes)
        ax_time.set_title("anchored strength by wall time")
    fig.tight_layout()
    rd.metrics_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_png(rd.progress_png, fig)
    return rd.progress_png


def plot_anchored_curve(elo_csv: str | Path, out: str | Path, title: str = "anchored Elo against time") -> Path:
    """One panel, anchored Elo of each rated model against minutes since generation 0 (with its 95 %
    interval) and the anchors as lines, from an elo.csv; written atomically as PNG (for docs/benchmarks)."""
    rows = _rows(Path(elo_csv))
    models, anchors = anchored_series(rows)
    timed = [m for m in models if m[1] is not None]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if timed:
        _draw_anchored(ax, [m[1] / 60.0 for m in timed], timed, anchors, "minutes since generation 0",
                       anchored_scale(rows)[1])
        for gen, wall, elo, _, _ in timed:
            ax.annotate(str(gen), (wall / 60.0, elo), textcoords="offset points", xytext=(3, 3), fontsize=7)
    else:
        ax.text(0.5, 0.5, "no rated models", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_png(path, fig)
    return path
