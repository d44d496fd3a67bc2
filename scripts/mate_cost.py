"""What deeper mate searches and the mate guard cost a search (a benchmark, not a test).

    python scripts/mate_cost.py --model runs/NAME/run/models/gen-0000.pt --config runs/NAME/run/config.yaml \
        --games runs/NAME/run/rating/*.json --settings 3/5,5/9,7/9,7/9/30000 --playouts 400

Positions come from stored rating games (`dlzero rate`'s batch files: real middle games and endgames,
where checks and mates are; the start position has none), every `--every` plies from ply 30. Each
position is searched once per setting LEAF/ROOT[/GUARD] (`search.leaf_mate_depth` /
`search.root_mate_depth` / `search.mate_guard_nodes`, 0 when left out), the settings interleaved in
one process so that a busy machine slows them alike; prints the mean milliseconds per search and the
CPU's speed flags. Strength at equal playouts is measured by `dlzero rate`.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dlzero import Engine  # noqa: E402
from dlzero.config import load_config  # noqa: E402
from dlzero.cpu import cpu_flags  # noqa: E402


def positions_from(paths: list[Path], every: int, per_file: int) -> list[str]:
    """`sfen ... moves ...` strings every `every` plies of the first `per_file` games of each file."""
    out = []
    for path in paths:
        for game in json.loads(path.read_text(encoding="utf-8"))["games"][:per_file]:
            moves = game["moves"].split()
            for ply in range(30, len(moves) - 4, every):
                out.append(f"sfen {game['start_sfen']} moves {' '.join(moves[:ply])}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--config", required=True, help="YAML config (the run's config.yaml)")
    ap.add_argument("--games", required=True, nargs="+", type=Path, help="rating batch files (JSON)")
    ap.add_argument("--settings", default="3/5,5/9,7/9",
                    help="comma-separated LEAF/ROOT mate depths, each with an optional /GUARD (mate guard nodes)")
    ap.add_argument("--playouts", type=int, default=400)
    ap.add_argument("--every", type=int, default=20, help="plies between sampled positions")
    ap.add_argument("--per-file", type=int, default=12, help="games read from each file")
    args = ap.parse_args()

    base = load_config(args.config)
    engines = {}
    for setting in args.settings.split(","):
        leaf, root, guard = ([int(x) for x in setting.split("/")] + [0])[:3]
        cfg = copy.deepcopy(base)
        cfg.search.leaf_mate_depth, cfg.search.root_mate_depth, cfg.search.mate_guard_nodes = leaf, root, guard
        engines[setting] = Engine.load(args.model, config=cfg)
    positions = positions_from(args.games, args.every, args.per_file)
    if not positions:
        sys.exit("mate_cost.py: no positions in the games given")
    total = dict.fromkeys(engines, 0.0)
    for position in positions:
        for setting, engine in engines.items():
            t0 = time.perf_counter()
            engine.analyze(position, playouts=args.playouts)
            total[setting] += time.perf_counter() - t0
    print(f"cpu: {cpu_flags()}; {len(positions)} positions, {args.playouts} playouts a search")
    for setting, seconds in total.items():
        print(f"leaf/root mate depth[/guard nodes] {setting}: {seconds / len(positions) * 1000:.0f} ms a search")
    return 0


if __name__ == "__main__":
    sys.exit(main())
