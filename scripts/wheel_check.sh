#!/usr/bin/env bash
# The wheel installs anywhere: build dlzero's wheel from the checkout's files, install it into a clean venv, and
# run one generation of the tiny loop (self-play -> train -> held-out validation -> int8 -> gate -> promote) in an
# empty folder, with no checkout on the path. Every file dlzero reads at run time (configs, the gate's opening
# suite, the validation set, the dashboard's page, the shipped networks) must then come from the installed package,
# so a reader that looks for them beside the source fails here, not on a user's machine. Then `dlzero bestmove`
# with no --model plays the default shipped network from another empty folder. A few minutes, most of it pip.
#   bash scripts/wheel_check.sh [PYTHON]      (default python3; CI runs it from .ci/run)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH DLZERO_NETWORKS_DIR
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
start=$(date +%s)

# The wheel is built from a copy of the files git would ship (tracked and new, not ignored), so no build/ or
# stale compiled extension of the checkout can slip into it.
mkdir "$work/src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' f; do [ ! -f "$f" ] || cp --parents "$f" "$work/src"; done)  # a deleted file: skipped
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" wheel -q --no-deps -w "$work/wheel" "$work/src"
"$work/venv/bin/pip" install -q -c "$repo/constraints-cpu.txt" "$work"/wheel/dlzero-*.whl
echo "wheel_check: built and installed $(basename "$work"/wheel/dlzero-*.whl) in $(($(date +%s) - start)) s"

mkdir "$work/empty"
cd "$work/empty"
"$work/venv/bin/python" - <<'EOF'
"""The installed package is the one imported, and it carries every shipped file."""
from importlib import resources
from pathlib import Path

import dlzero
from dlzero.resources import configs_dir

package = Path(dlzero.__file__).resolve().parent
assert "site-packages" in package.parts, f"dlzero imported from {package}, not from the installed wheel"
assert configs_dir() == package / "configs", configs_dir()
shipped = ["configs/tiny.yaml", "configs/gpu-1.yaml", "configs/cluster.yaml", "configs/openings/gate.txt",
           "configs/openings/rating.txt", "configs/validation/fairy-stockfish-n20k.hcpe3",
           "configs/validation/fairy-stockfish-n20k.hcpe3.json", "configs/networks/README.md",
           "dashboard/static/index.html", "dashboard/static/dashboard.js", "dashboard/static/dashboard.css"]
missing = [name for name in shipped if not resources.files("dlzero").joinpath(name).is_file()]
assert not missing, f"the wheel lacks {missing}"
print(f"wheel_check: dlzero {package}: {len(shipped)} shipped files present")
EOF

# One generation, small enough for CI: a 1x16 network, 4 self-play games, 4 training steps, a 2-game gate that
# promotes at its cap (cap_pass_score 0), so the run ends with generation 1 as the best model.
"$work/venv/bin/dlzero" loop --config tiny --run x --generations 1 --quiet \
  --set model.blocks=1 --set model.channels=16 \
  --set selfplay.workers=1 --set selfplay.games_in_parallel=4 --set selfplay.games_per_generation=4 \
  --set selfplay.playouts=8 --set selfplay.cheap_playouts=4 --set selfplay.max_moves=48 \
  --set train.batch_size=32 --set train.min_steps=2 --set train.steps_per_generation=4 \
  --set train.validation_positions=256 \
  --set gate.mode=sprt --set gate.max_games=2 --set gate.playouts=4 --set gate.max_moves=32 \
  --set gate.cap_pass_score=0
# Record import parses in child processes that must import the installed dlzero too.
"$work/venv/bin/dlzero" import-records x/games --out gate-games.hcpe

"$work/venv/bin/python" - <<'EOF'
"""The generation went through every stage: validated on the shipped set, gated from the suite, promoted."""
import csv
import json
from pathlib import Path

run = Path("x")
assert json.loads((run / "models" / "best.json").read_text())["generation"] == 1, "generation 1 was not promoted"
sets = {row["set"] for row in csv.DictReader((run / "metrics" / "validation.csv").open())}
assert "fixed" in sets, f"no model was scored on the shipped validation set: {sets}"
games = sorted((run / "games").glob("gen-0001-vs-gen-0000/*.csa"))
assert len(games) == 2, games
assert Path("gate-games.hcpe").stat().st_size > 0, "import-records wrote nothing"
print("wheel_check: one generation self-played, trained, validated on the shipped set, gated and promoted")
EOF

# The shipped network plays from the installed wheel, given no model, in a folder of its own: its manifest and
# files verify, and `dlzero bestmove` with no --model answers a legal move.
mkdir "$work/play"
cd "$work/play"
"$work/venv/bin/dlzero" networks list
"$work/venv/bin/dlzero" networks verify
move="$("$work/venv/bin/dlzero" bestmove --position startpos --playouts 200)"
"$work/venv/bin/python" - "$move" <<'EOF'
"""The move the shipped network chose is legal in the starting position."""
import sys

import cshogi

board = cshogi.Board()
move = board.move_from_usi(sys.argv[1])
assert move and board.is_legal(move), f"dlzero bestmove answered {sys.argv[1]!r}, not a legal move"
print(f"wheel_check: the shipped network plays {sys.argv[1]} from startpos with no --model")
EOF
echo "wheel_check: ok in $(($(date +%s) - start)) s"
