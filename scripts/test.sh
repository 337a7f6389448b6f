#!/usr/bin/env bash
# Install ezpz, every plugin and the test tools, then run every test suite.
#   bash scripts/test.sh            # all suites, all plugins installed together, then each plugin alone
#   EZPZ_SKIP_ISOLATED=1 bash scripts/test.sh   # skip the per-plugin isolated venvs (faster locally)
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PY=${PYTHON:-python3}

if ! command -v mpiexec >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin >/dev/null
fi

PLUGINS=(plugins/ezpz-cuda plugins/ezpz-rocm plugins/ezpz-xpu plugins/ezpz-example-hpu)
present=()
for p in "${PLUGINS[@]}"; do [ -d "$p" ] && present+=("$p"); done

# torch is pinned by constraints.txt (an unpinned torch would pull GB of CUDA wheels).
$PY -m pip install -q -c constraints.txt "torch==2.13.0" setuptools pytest hypothesis pytest-timeout mkdocs
$PY -m pip install -q -c constraints.txt --no-build-isolation -e . "${present[@]/#/-e}"
# DeepSpeed for tests/test_deepspeed.py: an sdist, so no build isolation (an isolated build would pull an unpinned
# torch) and no ops prebuilt (DS_BUILD_OPS=0; the CPU path JIT-builds what it needs).
DS_BUILD_OPS=0 $PY -m pip install -q -c constraints.txt --no-build-isolation "deepspeed==0.19.8"

status=0
run() { echo; echo "=== $* ==="; "$@" || status=1; }

run $PY -m pytest tests -q -ra
for p in "${present[@]}"; do
  run $PY -m pytest "$p/tests" -q -ra
done
if [ -f mkdocs.yml ]; then
  run $PY -m mkdocs build --strict --site-dir "$(mktemp -d)"
fi

if [ "${EZPZ_SKIP_ISOLATED:-0}" != 1 ]; then
  # Each plugin's suite with only the core and that plugin installed.
  for p in "${present[@]}"; do
    venv=$(mktemp -d)/venv
    $PY -m venv "$venv"
    "$venv/bin/python" -m pip install -q -c constraints.txt "torch==2.13.0" setuptools pytest hypothesis pytest-timeout
    "$venv/bin/python" -m pip install -q -c constraints.txt --no-build-isolation -e . -e "$p"
    run "$venv/bin/python" -m pytest "$p/tests" -q -ra -p no:cacheprovider
  done
fi
exit $status
