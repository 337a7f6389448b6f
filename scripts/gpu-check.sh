#!/usr/bin/env bash
# The gpu checks of ezpz-cuda on this machine: everything that ran live on the NVIDIA H200 (docs/hardware-validation.md).
#   bash scripts/gpu-check.sh                 # with the Python on PATH (ezpz and ezpz-cuda installed in it)
#   PYTHON=/path/to/python bash scripts/gpu-check.sh
#   OUT=/some/dir bash scripts/gpu-check.sh   # where the report goes (default: ./gpu-check-report.json)
# Prints one line per check (CHECK <name>: PASS|FAIL|SKIP <detail>) and writes them as JSON. Without a CUDA device
# every check skips, naming why, and the script says so and exits 0. Exit status: pytest's (0 when nothing failed).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REPORT=${OUT:-.}/gpu-check-report.json
mkdir -p "$(dirname "$REPORT")"
why=$("$PY" -c 'import sys; sys.path.insert(0, "plugins/ezpz-cuda/tests"); import gpu_kit; print(gpu_kit.no_device_reason() or "")') || {
  echo "gpu-check: cannot import torch/ezpz with $PY (install the core and plugins/ezpz-cuda)" >&2; exit 2; }
[ -n "$why" ] && echo "gpu-check: $why: every gpu check skips here"
"$PY" -m pytest -m gpu plugins/ezpz-cuda/tests -q -p no:cacheprovider --gpu-report "$REPORT"
rc=$?
[ -n "$why" ] && [ "$rc" -eq 0 ] && echo "gpu-check: nothing ran (no CUDA device); report: $REPORT"
exit $rc
