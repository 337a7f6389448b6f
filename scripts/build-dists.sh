#!/usr/bin/env bash
# Build wheels and sdists of all six distributions (ezpz and its five plugins) into dist/.
#   bash scripts/build-dists.sh [OUTDIR]        # default: dist/
# Standard tooling only: `python -m build`, which builds each sdist and then the wheel FROM that sdist,
# so a file missing from an sdist breaks the build here rather than on a user's machine.
# No build isolation: the only build requirement is setuptools (no torch), installed below under
# constraints.txt, so nothing is fetched per build and no unpinned torch can ever be pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
PY=${PYTHON:-python3}
OUT=${1:-dist}

$PY -m pip install -q -c constraints.txt "setuptools>=68" build
rm -rf "$OUT" && mkdir -p "$OUT"
for d in . plugins/ezpz-cuda plugins/ezpz-rocm plugins/ezpz-xpu plugins/ezpz-tpu plugins/ezpz-example-hpu plugins/ezpz-example-emu; do
  log=$(mktemp)
  $PY -m build --no-isolation --outdir "$OUT" "$d" >"$log" 2>&1 || { cat "$log"; echo "build failed: $d" >&2; exit 1; }
  # setuptools leaves build/ and *.egg-info in the source tree; remove them so an editable install stays clean.
  rm -rf "$d/build"
done
ls -1 "$OUT"
