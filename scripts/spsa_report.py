"""The path of a shogiarena SPSA run over dlzero's search options: a CSV row per update and a PNG.

shogiarena keeps its run in `RUN/spsa/` (events.jsonl: one `update` event per update with the
parameters after it; current.json: where it ended). This turns them into
`OUT-trajectory.csv` (update, games so far, each parameter in option units, the update's score
sum) and `OUT-trajectory.png` (one panel per parameter, its start value dashed), so a reader can
see whether a parameter moved steadily or only wandered with the noise.

    python scripts/spsa_report.py RUN_DIR --out docs/benchmarks/spsa
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def read_updates(run: Path) -> tuple[dict[str, float], list[dict]]:
    """(start values, the update events in order) of a shogiarena SPSA run directory."""
    meta = json.loads((run / "spsa" / "meta.json").read_text())
    updates = []
    with (run / "spsa" / "events.jsonl").open() as f:
        for line in f:
            event = json.loads(line)
            if event.get("event") == "update":
                updates.append(event)
    updates.sort(key=lambda e: e["update_idx"])
    return meta["initial_params"], updates


def write_csv(start: dict[str, float], updates: list[dict], path: Path) -> list[str]:
    """One row for the start and one per update; the parameter names, in column order."""
    names = sorted(start)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["update", "games", *names, "score_sum"])
        out.writerow([0, 0, *(f"{start[n]:.3f}" for n in names), ""])
        games = 0
        for e in updates:
            games += int(e.get("total_games", 0))
            out.writerow([e["update_idx"], games, *(f"{e['params'][n]:.3f}" for n in names), e.get("score_sum", "")])
    return names


def plot(start: dict[str, float], updates: list[dict], names: list[str], path: Path, title: str) -> None:
    """One small panel per parameter against the update index."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.0), squeeze=False)
    xs = [0] + [e["update_idx"] for e in updates]
    for ax, name in zip(axes[0], names, strict=True):
        ax.plot(xs, [start[name]] + [e["params"][name] for e in updates], color="tab:blue")
        ax.axhline(start[name], color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("update", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="the shogiarena SPSA run directory (holding spsa/)")
    ap.add_argument("--out", type=Path, required=True, help="prefix: writes OUT-trajectory.csv and .png")
    args = ap.parse_args()
    start, updates = read_updates(args.run)
    if not updates:
        raise SystemExit(f"{args.run}: no SPSA update recorded yet")
    csv_path = args.out.with_name(args.out.name + "-trajectory.csv")
    png_path = args.out.with_name(args.out.name + "-trajectory.png")
    names = write_csv(start, updates, csv_path)
    games = sum(int(e.get("total_games", 0)) for e in updates)
    plot(start, updates, names, png_path, f"SPSA over dlzero's search options: {len(updates)} updates, {games} games")
    last = updates[-1]["params"]
    for n in names:
        print(f"{n:>22}: {start[n]:10.2f} -> {last[n]:10.2f}")
    print(f"wrote {csv_path} and {png_path}")


if __name__ == "__main__":
    main()
