#!/usr/bin/env bash
# GPU verification in one call (see scripts/gpu_check.py; `--dry-run` checks its CPU-safe parts anywhere). On the lent device machine, cshogi is
# not installed: carry it as a wheel in .whl/ (see the device tool's README) and it is installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh
timeout 540 python3 scripts/gpu_check.py "$@" | tee "${OUT:-/tmp}/gpu_check.jsonl"
