#!/usr/bin/env bash
# The ezpz-tpu plugin's suite for real, on XLA's CPU runtime, in a venv of its own:
# torch 2.9.0 + torch-xla 2.9.0 (torch-xla pins that torch exactly; the registry's torch 2.9.0 is the CUDA
# build, about 7 GB with its dependencies), then this project's wheels (the core and ezpz-tpu) and pytest.
#   bash scripts/xla-suite.sh [pytest args]      # venv: $EZPZ_XLA_VENV, default .venv-xla/ (made once, kept)
#   bash scripts/xla-suite.sh --prepare          # only make that venv (the ~7 GB download), run nothing; scripts/test.sh
#                                                # runs this in the background while the core suite runs (docs/ci.md)
# The torch install happens once per venv (a marker file records it); each run rebuilds and reinstalls the
# two wheels only. pip's global config (which caps torch for the main venvs) is bypassed for the torch step
# alone; the certificate bundle is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
VENV=${EZPZ_XLA_VENV:-$(pwd)/.venv-xla}
TORCH=2.9.0
TORCH_XLA=2.9.0
CERT=${EZPZ_XLA_CERT:-/etc/ssl/certs/ca-certificates.crt}
CERT_ARGS=()
[ -f "$CERT" ] && CERT_ARGS=(--cert "$CERT")

if [ ! -x "$VENV/bin/python" ]; then
  echo "=== creating the xla venv: ${PYTHON:-python3} -m venv $VENV ==="
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY="$VENV/bin/python"
MARK="$VENV/.ezpz-torch-xla-$TORCH-$TORCH_XLA"
if [ ! -f "$MARK" ]; then
  echo "=== installing torch==$TORCH torch-xla==$TORCH_XLA (once per venv) ==="
  start=$(date +%s)
  # Byte-compiled at install (pip's default): with PYTHONDONTWRITEBYTECODE=1, as on CI's machines, a module without
  # its .pyc is compiled again in every process that imports it (docs/ci.md).
  PIP_CONFIG_FILE=/dev/null "$PY" -m pip install -q "${CERT_ARGS[@]}" "torch==$TORCH" "torch-xla==$TORCH_XLA"
  echo "=== torch + torch-xla installed in $(( $(date +%s) - start ))s; venv $(du -sh "$VENV" | cut -f1) ==="
  touch "$MARK"
fi
if [ "${1:-}" = --prepare ]; then exit 0; fi

DIST=$(mktemp -d)
trap 'rm -rf "$DIST"' EXIT
"$PY" -m pip install -q "${CERT_ARGS[@]}" -c constraints.txt "setuptools>=68" build "pytest==9.1.1"
if [ -n "${EZPZ_XLA_DIST:-}" ] && ls "$EZPZ_XLA_DIST"/ezpz-[0-9]*.whl "$EZPZ_XLA_DIST"/ezpz_tpu-*.whl >/dev/null 2>&1; then
  echo "=== the core and ezpz-tpu wheels from $EZPZ_XLA_DIST ==="  # scripts/test.sh's wheel stage built them
  cp "$EZPZ_XLA_DIST"/ezpz-[0-9]*.whl "$EZPZ_XLA_DIST"/ezpz_tpu-*.whl "$DIST/"
else
  echo "=== building the core and ezpz-tpu wheels ==="
  for d in . plugins/ezpz-tpu; do
    log=$(mktemp)
    "$PY" -m build --no-isolation --wheel --outdir "$DIST" "$d" >"$log" 2>&1 || { cat "$log"; echo "build failed: $d" >&2; exit 1; }
    rm -rf "$d/build" "$log"
  done
fi
# The wheels, not editable installs: the suite runs against what a user would install. --force-reinstall
# --no-deps replaces any earlier ezpz (never torch: a forced reinstall with dependencies would fetch torch
# again); the second install adds the core's small dependencies where missing, and keeps torch 2.9.0.
"$PY" -m pip install -q "${CERT_ARGS[@]}" --force-reinstall --no-deps "$DIST"/ezpz-*.whl "$DIST"/ezpz_tpu-*.whl
"$PY" -m pip install -q "${CERT_ARGS[@]}" "$DIST"/ezpz-*.whl "$DIST"/ezpz_tpu-*.whl
"$PY" -c "import torch, torch_xla; print('torch', torch.__version__, 'torch_xla', torch_xla.__version__)"

echo "=== plugins/ezpz-tpu/tests on XLA's CPU runtime ==="
cd plugins/ezpz-tpu
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} exec "$PY" -m pytest tests -p no:cacheprovider -q "$@"
