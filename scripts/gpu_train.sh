#!/usr/bin/env bash
# Train the next network on the lent GPU machine in one call (issue 39), from teacher labels carried from here.
#
# Here, once per session (nothing of it is committed: .gpu/ and .whl/ are listed in .git/info/exclude):
#   bash scripts/gpu_train.sh --prepare runs/NAME/teacher.hcpe3 [more.hcpe3 ...]
#     packs the labels as .gpu/labels-N.hcpe3.xz (about a quarter of their size: 1M positions ~ 50 MB; the device
#     takes at most 64 MiB a call with the tree) and fetches cshogi's wheel for the device's Python 3.12 into .whl/.
# There (device tool), checking `status` first:
#   run(command="bash scripts/gpu_train.sh", carry=[".whl", ".gpu"], timeout_s=600)
#     environment: MINUTES (training minutes, default 7), DEVICE (default cuda; cpu for a dry run here), INIT (a .pt to go on training; default the shipped
#     default network's weights; "none" for a fresh network), SET (extra `--set` overrides, space-separated, e.g.
#     "model.blocks=10 model.channels=128 train.batch_size=1024").
# Comes back under $OUT: student.pt, student.onnx, metrics/ (CSV, TensorBoard) and train.log; then, here, judge it with
# `dlzero match` as docs/networks.md says before it may replace the shipped network.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--prepare" ]]; then
  shift
  [[ $# -ge 1 ]] || { echo "gpu_train.sh --prepare LABELS.hcpe3 [...]" >&2; exit 2; }
  mkdir -p .gpu .whl .git/info
  for ignored in /.gpu/ /.whl/; do
    grep -qxF "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >>.git/info/exclude
  done
  rm -f .gpu/labels-*.hcpe3.xz
  i=0
  for f in "$@"; do
    xz -T0 -6 -c "$f" >".gpu/labels-$i.hcpe3.xz"
    i=$((i + 1))
  done
  cshogi_version=$(python3 -c "import importlib.metadata as m; print(m.version('cshogi'))" 2>/dev/null \
    || .venv/bin/python -c "import importlib.metadata as m; print(m.version('cshogi'))")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "cshogi==$cshogi_version"
  du -ch .gpu .whl | tail -1
  exit 0
fi

OUT=${OUT:-/tmp/gpu_train}
mkdir -p "$OUT"
source scripts/gpu_env.sh

labels=()
for f in .gpu/labels-*.hcpe3.xz; do
  [[ -f "$f" ]] || { echo "gpu_train: no .gpu/labels-*.hcpe3.xz: run --prepare here and carry .gpu" >&2; exit 2; }
  out=/tmp/$(basename "$f" .xz)
  xz -T0 -dc "$f" >"$out"
  labels+=("$out")
done
init=${INIT:-}
if [[ -z "$init" ]]; then
  init=$(python3 -c "from dlzero.networks import check_file, default_network, load_networks; \
n = default_network(load_networks()); print(check_file(n, 'weights') if n and 'weights' in n.files else '')")
fi
init_args=()
[[ -n "$init" && "$init" != none ]] && init_args=(--init "$init")
set_args=()
for kv in ${SET:-}; do set_args+=(--set "$kv"); done
python3 -m dlzero.cli train --hcpe "${labels[@]}" "${init_args[@]}" --config tiny --device "${DEVICE:-cuda}" \
  --minutes "${MINUTES:-7}" --out "$OUT/student.pt" --metrics "$OUT/metrics" --no-progress "${set_args[@]}" \
  2>&1 | tee "$OUT/train.log"
python3 -m dlzero.cli export "$OUT/student.pt" --out "$OUT/student.onnx" 2>&1 | tee -a "$OUT/train.log"
ls -la "$OUT"
