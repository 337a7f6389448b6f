#!/usr/bin/env bash
# The gpu checks of ezpz-cuda on this machine: everything that ran live on the NVIDIA H200 (docs/hardware-validation.md).
#   bash scripts/gpu-check.sh                 # with the Python on PATH (ezpz and ezpz-cuda installed in it)
#   PYTHON=/path/to/python bash scripts/gpu-check.sh
#   OUT=/some/dir bash scripts/gpu-check.sh   # where the report goes (default: $TMPDIR or /tmp)
# Prints one line per check (CHECK <name>: PASS|FAIL|SKIP <detail>) and writes them as JSON. Without a CUDA device
# every check skips, naming why, and the script says so and exits 0. Exit status: pytest's (0 when nothing failed).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REPORT=${OUT:-${TMPDIR:-/tmp}}/gpu-check-report.json
mkdir -p "$(dirname "$REPORT")"
errs=$(mktemp)
trap 'rm -f "$errs"' EXIT
if ! why=$("$PY" -c 'import sys; sys.path.insert(0, "plugins/ezpz-cuda/tests"); import gpu_kit; print(gpu_kit.no_device_reason() or "")' 2>"$errs"); then
  echo "gpu-check: $PY cannot run the checks: $(tail -n 1 "$errs")" >&2
  echo "gpu-check: fix: pip install -c constraints.txt -e . -e plugins/ezpz-cuda pytest (or set PYTHON=...)" >&2
  exit 2
fi
[ -n "$why" ] && echo "gpu-check: $why: every gpu check skips here"
"$PY" -m pytest -m gpu plugins/ezpz-cuda/tests -q -p no:cacheprovider --gpu-report "$REPORT"
rc=$?
[ -n "$why" ] && [ "$rc" -eq 0 ] && echo "gpu-check: nothing ran (no CUDA device); report: $REPORT"
exit $rc
