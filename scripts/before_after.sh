#!/usr/bin/env bash
# Search and self-play speed of an earlier commit against this checkout, interleaved in the same minutes.
#
#   bash scripts/before_after.sh REV MODEL.pt [ROUNDS]
#
# REV is checked out into a worktree under /tmp with a venv of its own (the CPU torch of
# constraints-cpu.txt); this checkout's .venv is the after side. Every round runs each benchmark on
# both sides, alternating which goes first: this machine's speed drifts by a third from one minute to
# the next, so only figures from the same rounds compare. MODEL.pt is a trained network (a run's
# models/gen-XXXX.pt): a random one gives shallow, wide trees that are not what the engine searches.
# Prints the CPU's vector flags first; quote them with any figure.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: before_after.sh REV MODEL.pt [ROUNDS]}
model=$(realpath "${2:?usage: before_after.sh REV MODEL.pt [ROUNDS]}")
rounds=${3:-2}
before=/tmp/dlzero-before-$(git rev-parse --short "$rev")
if [ ! -d "$before" ]; then
  git worktree add -q --detach "$before" "$rev"
fi
if [ ! -x "$before/.venv/bin/dlzero" ]; then
  (cd "$before" && python3 -m venv .venv && .venv/bin/pip install -q -c constraints-cpu.txt -e . 2>&1 | grep -v "^WARNING: Location" || true)
  [ -x "$before/.venv/bin/dlzero" ] || { echo "before_after.sh: installing $rev into $before failed" >&2; exit 1; }
fi
echo "cpu: $(grep -o -w -E 'avx2|avx512f|avx512_vnni|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')cores: $(nproc)"
echo "before: $(git -C "$before" log -1 --format='%h %s' | cut -c1-90)"
echo "after:  $(git log -1 --format='%h %s' | cut -c1-90) (+ uncommitted changes: $(git status --porcelain | wc -l) files)"
side() {  # side DIR LABEL COMMAND...
  local dir=$1 label=$2
  shift 2
  echo "== $label: $*"
  (cd "$dir" && "$dir/.venv/bin/dlzero" "$@" 2>&1 | grep -v -E ' INFO |^cpu flags' || true)
}
for ((r = 1; r <= rounds; r++)); do
  order=("$before before" "$PWD after")
  ((r % 2 == 0)) && order=("$PWD after" "$before before")
  for entry in "${order[@]}"; do
    read -r dir label <<<"$entry"
    side "$dir" "round $r $label" bench search --config tiny --evaluators null --batch 1,32 --playouts 3000
    for precision in int8 fp32; do
      evaluator=onnx
      [ "$precision" = int8 ] && evaluator=onnx-int8
      side "$dir" "round $r $label" bench search --config tiny --precision "$precision" --model "$model" \
        --evaluators "$evaluator" --batch 32 --playouts 3000 --layouts 2x1,1x2,1x3
    done
    side "$dir" "round $r $label" bench selfplay --config tiny --precisions fp32,int8
  done
done
