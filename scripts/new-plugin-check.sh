#!/usr/bin/env bash
# `ezpz new-plugin` as a vendor uses it, from wheels: generate `nimbus` twice (a device torch knows through the
# vendor's extension, and --emulated), build each package's wheel and install it beside the core's wheel in a fresh
# venv, then run what the generated README promises: the conformance kit in live mode (it drives the emulated
# device for real), `python -m mypy --strict PACKAGE` in the package's directory, the package's own tests, and for
# the emulated one the main job (`EZPZ_DEVICE=nimbus python -m ezpz.examples.train`).
#   bash scripts/new-plugin-check.sh                  # with python3, or PYTHON=/path/to/python
#   EZPZ_NEW_PLUGIN_DIST=dir bash scripts/...         # a directory that already holds the core's wheel
# Called by scripts/test.sh (its wheel stage). Exit status: 0 when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ROOT=$(pwd)
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dist="$work/dist"
mkdir -p "$dist"
if [ -n "${EZPZ_NEW_PLUGIN_DIST:-}" ] && ls "$EZPZ_NEW_PLUGIN_DIST"/ezpz-[0-9]*.whl >/dev/null 2>&1; then
  cp "$EZPZ_NEW_PLUGIN_DIST"/ezpz-[0-9]*.whl "$dist/"
else
  $PY -m build --no-isolation --wheel --outdir "$dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
  rm -rf build
fi

venv="$work/venv"
$PY -m venv "$venv"
vpy="$venv/bin/python"
"$vpy" -m pip install -q -c constraints.txt "$(grep -m1 '^torch==' constraints.txt)" setuptools build "pytest==9.1.1" "mypy==2.4.1"
"$vpy" -m pip install -q -c constraints.txt --find-links "$dist" "$dist"/ezpz-[0-9]*.whl

status=0
check() { echo "--- $*"; "$@" || { echo "=== FAILED (exit $?): $* ==="; status=1; }; }
in_dir() { local d=$1; shift; (cd "$d" && "$@"); }
clean() { env -u EZPZ_DEVICE -u EZPZ_DISABLE_PLUGINS -u EZPZ_PLUGINS -u RANK -u WORLD_SIZE -u LOCAL_RANK "$@"; }

for variant in extension emulated; do
  flags=(); [ "$variant" = emulated ] && flags=(--emulated)
  pkg="$work/$variant/ezpz-nimbus"
  echo; echo "=== ezpz new-plugin nimbus ${flags[*]} -> wheel, beside the core wheel ==="
  mkdir -p "$work/$variant"
  (cd "$work/$variant" && "$venv/bin/ezpz" new-plugin nimbus "${flags[@]}")
  "$vpy" -m build --no-isolation --wheel --outdir "$work/$variant/dist" "$pkg" >"$work/$variant/build.log" 2>&1 \
    || { cat "$work/$variant/build.log"; exit 1; }
  rm -rf "$pkg/build" "$pkg"/*.egg-info
  "$vpy" -m pip install -q -c constraints.txt --find-links "$dist" "$work/$variant/dist"/ezpz_nimbus-*.whl
  # From a directory without sources: only the installed wheels can be imported.
  check in_dir "$work" clean "$vpy" -c "
from ezpz.testing import check_plugin
report = check_plugin('nimbus', live=True)
print(report)
live = [r for r in report.results if r.name.startswith('live')]
assert report.passed, 'not conformant'
ran = [r.name for r in live if not r.skipped]
# the extension's device is absent here (its live checks skip, saying so); the emulated one runs every check
assert bool(ran) == ('$variant' == 'emulated'), f'live checks run: {ran}'
"
  check in_dir "$pkg" clean "$vpy" -m mypy --strict --cache-dir "$work/mypy-cache" ezpz_nimbus  # one cache: torch's stubs read once for both
  check in_dir "$work" clean "$venv/bin/pytest" "$pkg/tests" -q -ra -p no:cacheprovider --rootdir "$pkg"
  if [ "$variant" = emulated ]; then
    check in_dir "$work" clean env EZPZ_DEVICE=nimbus "$vpy" -m ezpz.examples.train --steps 20 --explain
  fi
  "$vpy" -m pip uninstall -q -y ezpz-nimbus
done
exit $status
