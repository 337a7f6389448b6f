#!/usr/bin/env bash
# The core suite on a stand-in for a one-GPU host (issue 31): the suite must not depend on the host's accelerators.
#   bash scripts/standin-suite.sh [pytest args]     # default: tests/ as scripts/test.sh runs it (-n 2, then netns)
#
# Installs tests/plugins/one-gpu-standin (the test-only plugin ezpz-standin-gpu: the emu example device at a
# discrete accelerator's priority, one per host, never shared by two ranks) into the tests' venv, runs the core
# suite, and removes the plugin again, whatever the suite gave (a trap), so no other suite ever sees it.
# Called by scripts/compat.sh on the newest torch, and by scripts/test.sh on the pinned one when the compatibility
# stage is skipped (docs/ci.md), with that venv's python as PY (default: .venv-test's).
#   EZPZ_TEST_HOST_ONLY=DIR bash scripts/standin-suite.sh [pytest args]   # only the tests that can depend on the host
# With EZPZ_TEST_HOST_ONLY, DIR holds the record the core pass made (EZPZ_TEST_HOST_RECORD=DIR, tests/host_touch.py):
# the tests that passed there without touching the host (no plugin host, no hook, no process started, no listing of
# the installed distributions) are deselected, since the stand-in cannot change their outcome; every other test
# runs. scripts/test.sh does this (docs/ci.md); without the variable, or with an empty record, every test runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-${EZPZ_TEST_VENV:-$(pwd)/.venv-test}/bin/python}
[ -x "$PY" ] || { echo "no python at $PY: run bash scripts/test.sh first (it makes the tests' venv)" >&2; exit 2; }
PLUGIN=tests/plugins/one-gpu-standin
remove() { "$PY" -m pip uninstall -q -y ezpz-standin-gpu >/dev/null 2>&1 || true; }
trap remove EXIT
"$PY" -m pip install -q --no-deps --no-build-isolation "$PLUGIN"
# The plugin must really be there and win: otherwise a green suite would prove nothing.
"$PY" - <<'PYEOF'
import os, sys
os.environ.pop("EZPZ_DEVICE", None); os.environ.pop("TORCH_DEVICE", None)
import ezpz
plan, _ = ezpz.hooks.plan()
c = plan.device.candidate
if (c.plugin, c.device_type, c.count, c.shared) != ("standin-gpu", "emu", 1, False):
    sys.exit(f"the one-GPU stand-in is not what setup() would choose here: {c.label}, count {c.count}, shared {c.shared}")
print(f"stand-in active: setup() here would choose {c.label}: {plan.device.reason}")
PYEOF
if [ -n "${EZPZ_TEST_HOST_ONLY:-}" ]; then
  if ls "$EZPZ_TEST_HOST_ONLY"/host-touch-*.tsv >/dev/null 2>&1; then
    cat "$EZPZ_TEST_HOST_ONLY"/host-touch-*.tsv | awk -F'\t' '
      { seen[$1] = (seen[$1] == "" || seen[$1] == "-") ? $2 : seen[$1]; secs[$1] += $3 }
      END { for (t in seen) { n++; if (seen[t] == "-") { u++; s += secs[t] } }
            printf "the core pass recorded %d tests: %d passed without touching the host (%.0f s of test time), not rerun here\n", n, u, s }'
  else
    echo "EZPZ_TEST_HOST_ONLY=$EZPZ_TEST_HOST_ONLY holds no record of a core pass: every test runs"
    unset EZPZ_TEST_HOST_ONLY
  fi
fi
if [ $# -gt 0 ]; then
  "$PY" -m pytest "$@"
else  # as scripts/test.sh runs the core suite: two workers, then the network-namespace nodes one at a time
  rc=0
  "$PY" -m pytest tests -q -ra -n 2 --dist loadgroup -m "not netns" || rc=$?
  "$PY" -m pytest tests -q -ra -m netns || rc=$((rc ? rc : $?))
  exit $rc
fi
