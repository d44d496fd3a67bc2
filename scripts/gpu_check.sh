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
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
timeout 540 python3 scripts/gpu_check.py "$@" | tee "${OUT:-/tmp}/gpu_check.jsonl"
