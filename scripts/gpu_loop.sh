#!/usr/bin/env bash
# Grow the loop chain on the lent GPU machine in one call (issue 49): self-play and training on CUDA, from the
# chain committed in candidates/ (or the default shipped network), then the chain's next link back under $OUT.
#
# Here, once per session (nothing of it is committed: .whl/ is listed in .git/info/exclude):
#   bash scripts/gpu_loop.sh --prepare
#     fetches cshogi's wheel for the device's Python 3.12 into .whl/ (torch, numpy, onnx, onnxruntime, PyYAML, tqdm,
#     matplotlib and tensorboard are in the device's image).
# There (device tool), checking `status` first:
#   run(command="bash scripts/gpu_loop.sh", carry=[".whl"], timeout_s=600)
#     environment: MINUTES (loop minutes, default 7: the call's 10 minutes less start-up and the chain's save),
#     CHAIN (default candidates/loop-from-shipped; a folder that is not a chain: the default shipped network),
#     DEVICE (default cuda; cpu for a dry run here), SET (extra `--set` overrides, space-separated).
# Comes back under $OUT: chain/ (best.pt, replay/, chain.json with this link's CPU-hours, games and generations),
# loop.log and the run's metrics/. Here: copy chain/ over candidates/loop-from-shipped/ and commit it; a promoted
# generation is judged at equal time (docs/benchmarks/loop-from-shipped.md) before anything ships.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--prepare" ]]; then
  mkdir -p .whl .git/info
  grep -qxF /.whl/ .git/info/exclude 2>/dev/null || echo /.whl/ >>.git/info/exclude
  cshogi_version=$(python3 -c "import importlib.metadata as m; print(m.version('cshogi'))" 2>/dev/null \
    || .venv/bin/python -c "import importlib.metadata as m; print(m.version('cshogi'))")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "cshogi==$cshogi_version"
  du -ch .whl | tail -1
  exit 0
fi

OUT=${OUT:-/tmp/gpu_loop}
mkdir -p "$OUT"
source scripts/gpu_env.sh

device=${DEVICE:-cuda}
chain=${CHAIN:-candidates/loop-from-shipped}
start=(--init-from default)
if [[ -f "$chain/chain.json" ]]; then
  start=(--init-from "$chain")
  rm -rf "$OUT/chain" && cp -r "$chain" "$OUT/chain"  # its ledger goes on: this link is added to it
fi
set_args=()
for kv in ${SET:-}; do set_args+=(--set "$kv"); done
# On a GPU the network call is cheap and batches are wide: torch inference (onnxruntime on the device has no CUDA
# provider), many games in lockstep per worker, and the sequential loop (a generation trains in seconds there).
timeout -s INT "$((${MINUTES:-7} * 60))" python3 -m dlzero.cli loop --config tiny --run "$OUT/run" "${start[@]}" \
  --quiet --backend torch --device "$device" --set train.device="$device" --set loop.mode=sequential \
  --set selfplay.workers=4 --set selfplay.games_in_parallel=128 --set gate.games_in_parallel=50 \
  "${set_args[@]}" 2>&1 | tee "$OUT/loop.log" || true  # the timeout's ^C ends the loop where it stands
python3 -m dlzero.cli chain save --run "$OUT/run" --to "$OUT/chain" --games 4096 | tee -a "$OUT/loop.log"
cp -r "$OUT/run/metrics" "$OUT/metrics"
ls -la "$OUT" "$OUT/chain"
