#!/usr/bin/env bash
# GPU verification in one call (see scripts/gpu_check.py; `--dry-run` checks its CPU-safe parts anywhere). On the lent device machine, cshogi is
# not installed: carry it as a wheel in .whl/ (see the device tool's README) and it is installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
# The search's compiled tree walk and the encoder's compiled planes (pip builds them on install; here the tree is
# used in place). Optional: without a compiler the search rows run the numpy code, and their `compiled_select`
# and `compiled_planes` fields say so.
read -r inc suffix < <(python3 -c "import sysconfig as s; print(s.get_paths()['include'], s.get_config_var('EXT_SUFFIX'))")
for ext in search/_puct encoding/_planes; do
  cc -O2 -ffp-contract=off -shared -fPIC -I"$inc" "dlzero/$ext.c" -o "dlzero/$ext$suffix" \
    || echo "gpu_check: dlzero/$ext.c did not build; the search rows use the numpy code" >&2
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
timeout 540 python3 scripts/gpu_check.py "$@" | tee "${OUT:-/tmp}/gpu_check.jsonl"
