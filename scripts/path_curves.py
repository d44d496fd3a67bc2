"""Elo against CPU-hours for the two roads to a stronger network: copying the teacher, and self-play (issue 49).

    python scripts/path_curves.py [--csv docs/benchmarks/path-curves.csv] [--png docs/benchmarks/path-curves.png]

Each row of the CSV is one step of a road: a network, the network it was made from, what the step cost in
CPU-hours (labelling and training for the teacher's road; self-play, training and gating for the loop), and its
match against that parent at byoyomi 1 s on one core from the rating suite (the way every figure here is
measured). A road's Elo is the sum of its steps' Elo over their parents, so each point's interval widens
with the steps behind it (the steps' variances add: they are independent matches). The same roads start from
the same network where they meet (the self-play road branches off the shipped network), so the picture shows
what a CPU-hour bought on each.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero.gating.sprt import elo_from_score  # noqa: E402

Z95 = 1.96


@dataclass
class Step:
    path: str
    network: str
    parent: str
    cpu_hours: float
    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def elo(self) -> tuple[float, float]:
        """Elo over the parent and its variance, by the delta method on the score (per-game outcomes 1, 1/2,
        0); a score of 0 or 1 is moved half a game inwards so that a sweep has a finite, wide figure."""
        n = self.games
        score = (self.wins + 0.5 * self.draws) / n
        score = min(max(score, 0.5 / n), 1 - 0.5 / n)
        var_game = (self.wins * (1 - score) ** 2 + self.draws * (0.5 - score) ** 2 + self.losses * score ** 2) / n
        var_score = max(var_game, 0.25 / n) / n  # never narrower than one game's worth of doubt
        slope = 400 / (math.log(10) * score * (1 - score))
        return elo_from_score(score), slope ** 2 * var_score


def read_steps(path: Path) -> list[Step]:
    with path.open(newline="", encoding="utf-8") as f:
        return [Step(r["path"], r["network"], r["parent"], float(r["cpu_hours"]), int(r["wins"]), int(r["draws"]),
                     int(r["losses"])) for r in csv.DictReader(f)]


def road(steps: list[Step], start: str) -> list[tuple[str, float, float, float]]:
    """(network, cumulative CPU-hours, Elo over `start`, half-width of its 95 % interval) for each network on
    the chain of parents from `start` (the start itself first, at 0)."""
    by_parent: dict[str, list[Step]] = {}
    for step in steps:
        by_parent.setdefault(step.parent, []).append(step)
    points = [(start, 0.0, 0.0, 0.0)]
    frontier = [(start, 0.0, 0.0, 0.0)]
    while frontier:
        name, hours, elo, var = frontier.pop()
        for step in by_parent.get(name, []):
            d, v = step.elo()
            point = (step.network, hours + step.cpu_hours, elo + d, var + v)
            points.append((point[0], point[1], point[2], Z95 * math.sqrt(point[3])))
            frontier.append(point)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=ROOT / "docs" / "benchmarks" / "path-curves.csv")
    parser.add_argument("--png", type=Path, help="draw the roads into this PNG")
    args = parser.parse_args()
    steps = read_steps(args.csv)
    roots = [s.parent for s in steps if s.parent not in {t.network for t in steps}]
    start = roots[0]
    points = road(steps, start)
    kind = {s.network: s.path for s in steps}
    print(f"from {start}: network, road, CPU-hours, Elo over the start [95 %], the step over its parent [95 %]")
    step_of = {s.network: s for s in steps}
    for name, hours, elo, half in points:
        low, high = elo - half, elo + half
        line = f"{name:45s} {kind.get(name, 'start'):9s} {hours:6.2f} {elo:+6.0f} [{low:+.0f}, {high:+.0f}]"
        if name in step_of:
            d, v = step_of[name].elo()
            half_step = Z95 * math.sqrt(v)
            line += f"   {d:+5.0f} [{d - half_step:+.0f}, {d + half_step:+.0f}] over {step_of[name].parent}"
        print(line)
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 5))
        parent = {s.network: s.parent for s in steps}
        where = {name: (hours, elo) for name, hours, elo, _ in points}
        colours = {"teacher": "tab:blue", "selfplay": "tab:red"}
        for name, hours, elo, half in points[1:]:
            colour = colours.get(kind[name], "grey")
            x0, y0 = where[parent[name]]
            ax.plot([x0, hours], [y0, elo], color=colour, lw=1.5)
            ax.errorbar(hours, elo, yerr=half, fmt="o", color=colour, capsize=3, ms=4)
            ax.annotate(name.replace("b5c64-miniosl", ""), (hours, elo), fontsize=7, xytext=(4, -10),
                        textcoords="offset points")
        for label, colour in colours.items():
            ax.plot([], [], color=colour, label={"teacher": "copying the teacher (miniosl 0.1.9)",
                                                 "selfplay": "self-play from the shipped network"}[label])
        ax.set_xlim(right=ax.get_xlim()[1] + 1.5)  # room for the last point's name
        ax.set_xlabel("CPU-hours (cumulative, 2-core machines)")
        ax.set_ylabel(f"Elo over {start} (chained 1 s matches)")
        ax.set_title("What a CPU-hour bought: byoyomi 1 s, one core, rating suite")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left")
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
