#!/usr/bin/env bash
# Install ezpz, every plugin and the test tools into a venv of the tests' own, then run every test suite.
#   bash scripts/test.sh            # all suites, all plugins installed together, then the wheel checks
#   EZPZ_SKIP_ISOLATED=1 bash scripts/test.sh   # skip the wheel-install checks (faster locally)
#   EZPZ_WHEELS_ONLY=1 bash scripts/test.sh     # only the wheel-install checks (and the compatibility suite)
#   EZPZ_SKIP_COMPAT=1 bash scripts/test.sh     # skip the compatibility suite (two torch downloads, ~2.7 GB each)
#   EZPZ_SKIP_XLA=1 bash scripts/test.sh        # skip ezpz-tpu on XLA's CPU runtime (torch 2.9.0 + torch-xla, ~7 GB)
#   EZPZ_TEST_VENV=/path bash scripts/test.sh   # another venv than .venv-test/ (created if missing)
#   EZPZ_TEST_PINS=pins.txt bash scripts/test.sh # pins (torch==...) for that venv other than constraints.txt
#   bash scripts/test.sh tests/test_setup.py -x  # install as always, then only this pytest run
#
# Everything is installed into .venv-test/ (git-ignored; created on the first run with ${PYTHON:-python3} -m venv,
# reused after), never into the Python or venv you run this from: your `pip list` stays as it was.
# System packages are not installed here (the README names them; .ci/run installs them): Open MPI (openmpi-bin),
# MPICH (mpich, libmpich-dev: mpi4py is built against it), iproute2 (network-namespace tests) and a live Slurm
# (bash scripts/slurm.sh start). Tests that need a missing one skip, saying why (outside CI).
#
# 1. editable installs of the core and all plugins into .venv-test/: the core suite, each plugin's suite, the
#    docs build;
# 2. wheels of all six distributions built once (scripts/build-dists.sh), installed NOT editable into one
#    fresh venv: `ezpz doctor` and `ezpz plugins` on the core alone, then each plugin in turn installed
#    beside the core only (its wheel added, checked, its suite run, removed again), so a file missing from
#    a wheel or a wrong packages.find shows up here and not on a user's machine;
# 3. the compatibility suite (scripts/compat.sh): the core's wheel from step 2 on the oldest torch the core declares
#    and on the newest, each in a venv of its own made and deleted there (tests/test_torch_compat.py).
# A suite that collects no tests fails (pytest exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# The tests' own venv. Its bin/ goes first on PATH, so torchrun, ezpz and the launchers' `python` are this venv's.
VENV=${EZPZ_TEST_VENV:-$(pwd)/.venv-test}
if [ ! -x "$VENV/bin/python" ]; then
  echo "=== creating the tests' venv: ${PYTHON:-python3} -m venv $VENV ==="
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY="$VENV/bin/python"
export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH"
unset PYTHONHOME PYTHONPATH

PLUGINS=(plugins/ezpz-cuda plugins/ezpz-rocm plugins/ezpz-xpu plugins/ezpz-tpu plugins/ezpz-example-hpu plugins/ezpz-example-emu)
present=()
for p in "${PLUGINS[@]}"; do [ -d "$p" ] && present+=("$p"); done
TOOLS=(pytest hypothesis pytest-timeout "pytest-xdist==3.8.0" "import-linter==2.16" "mypy==2.4.1")
# The docs site (mkdocs.yml): the material theme, and mkdocstrings for the API reference (docs/api.md).
DOCS=("mkdocs==1.6.1" "mkdocs-material==9.8.1" "mkdocstrings[python]==1.0.8" "mkdocstrings-python==2.0.11")

# torch is pinned by constraints.txt (an unpinned torch would pull GB of CUDA wheels), or by EZPZ_TEST_PINS
# (scripts/compat.sh: the core suite in its venv of the newest torch).
PINS=${EZPZ_TEST_PINS:-constraints.txt}
TORCH_PIN=$(grep -m1 '^torch==' "$PINS") || { echo "$PINS pins no torch (a line torch==VERSION)" >&2; exit 2; }
$PY -m pip install -q -c "$PINS" "$TORCH_PIN" setuptools build "${TOOLS[@]}" "${DOCS[@]}"
$PY -m pip install -q -c "$PINS" --no-build-isolation -e ".[port]" "${present[@]/#/-e}"
# DeepSpeed for tests/test_deepspeed.py: an sdist, so no build isolation (an isolated build would pull an unpinned
# torch) and no ops prebuilt (DS_BUILD_OPS=0; the CPU path JIT-builds what it needs).
DS_BUILD_OPS=0 $PY -m pip install -q -c "$PINS" --no-build-isolation "deepspeed==0.19.8"
# Lightning Fabric (the ezpz[lightning] extra), accelerate and Ray Train, for the Fabric bridge, adopt-a-group and
# live Ray tests (ray[train] adds pyarrow and pandas, about 500 MB; torch stays pinned).
$PY -m pip install -q -c "$PINS" --no-build-isolation -e ".[lightning]" "accelerate==1.15.0" "ray[train]==2.60.0"
$PY -c "import torch, sys; sys.exit(0 if torch.__version__.startswith(sys.argv[1]) else 'pip replaced torch: ' + torch.__version__)" "${TORCH_PIN#torch==}"
# mpi4py built against MPICH (not the wheel's bundled MPI), for the test that MPI_Init from mpi4py still works after
# ezpz used Hydra's PMI connection (tests/test_rendezvous_reliability.py). Built once into .test-cache/ (about 2 min).
if command -v mpicc.mpich >/dev/null 2>&1; then
  export EZPZ_TEST_MPI4PY_MPICH=${EZPZ_TEST_MPI4PY_MPICH:-$(pwd)/.test-cache/mpi4py-mpich}
  if [ ! -d "$EZPZ_TEST_MPI4PY_MPICH/mpi4py" ]; then
    MPICC=mpicc.mpich $PY -m pip install -q --no-binary mpi4py --target "$EZPZ_TEST_MPI4PY_MPICH" "mpi4py==4.1.2"
  fi
fi

status=0
run() { echo; echo "=== $* ==="; "$@" || { echo "=== FAILED (exit $?): $* ==="; status=1; }; }
ROOT=$(pwd)

if [ $# -gt 0 ]; then  # a subset: the same venv and installs, then only the pytest run asked for
  exec $PY -m pytest "$@"
fi

if [ "${EZPZ_WHEELS_ONLY:-0}" != 1 ]; then
  # The import contracts in pyproject.toml: layers, launch detection apart from launch driving, no core -> original.
  run $PY -c "from importlinter.cli import lint_imports_command; lint_imports_command()"
  # mypy over the core ([tool.mypy] in pyproject.toml): strict on the kernel, the fronts typed at their seams.
  run $PY -m mypy
  # Each plugin's own contracts ([tool.importlinter] in its pyproject.toml): no import circle among its modules, and
  # its layers (entry module on top).
  for p in "${present[@]}"; do
    run $PY -c "from importlinter.cli import lint_imports_command; lint_imports_command()" --config "$p/pyproject.toml"
  done
  # Two workers (pytest-xdist); the tests that make network-namespace nodes run after, one at a time: their
  # failover bounds are timed against an uninterrupted run, which a test on the other worker would slow.
  run $PY -m pytest tests -q -ra -n 2 --dist loadgroup -m "not netns"
  run $PY -m pytest tests -q -ra -m netns
  run env PY="$PY" bash scripts/standin-suite.sh  # the core suite again, on a stand-in for a one-GPU host
  for p in "${present[@]}"; do
    run $PY -m pytest "$p/tests" -q -ra
  done
  if [ -f mkdocs.yml ]; then
    NO_MKDOCS_2_WARNING=1 run $PY -m mkdocs build --strict --site-dir "$(mktemp -d)"
  fi
fi

if [ "${EZPZ_SKIP_ISOLATED:-0}" != 1 ]; then
  work=$(mktemp -d)
  dist="$work/dist" venv="$work/venv"
  echo; echo "=== wheels: scripts/build-dists.sh -> $dist ==="
  PYTHON=$PY bash scripts/build-dists.sh "$dist"
  $PY -m venv "$venv"
  vpy="$venv/bin/python"
  "$vpy" -m pip install -q -c constraints.txt "torch==2.13.0" "${TOOLS[@]}"
  # The core from its wheel file (never an index's unrelated "ezpz"); its dependencies from the index.
  "$vpy" -m pip install -q -c constraints.txt --find-links "$dist" "$dist"/ezpz-[0-9]*.whl
  # Run from a directory without sources, so nothing from this checkout can shadow the installed packages.
  in_work() { (cd "$work" && "$@"); }
  quiet() { "$@" >/dev/null; }
  run in_work "$venv/bin/ezpz" doctor
  run in_work "$venv/bin/ezpz" plugins
  run in_work "$vpy" "$ROOT/scripts/check_installed.py"
  for p in "${present[@]}"; do
    dist_name=$(basename "$p")                  # ezpz-xpu
    wheel_name=${dist_name//-/_}                # ezpz_xpu
    plugin=${dist_name#ezpz-}                   # xpu (its entry-point name)
    echo; echo "=== $dist_name from its wheel, beside the core wheel only ==="
    "$vpy" -m pip install -q -c constraints.txt --find-links "$dist" "$dist/$wheel_name"-[0-9]*.whl
    run in_work quiet "$venv/bin/ezpz" doctor
    run in_work "$vpy" "$ROOT/scripts/check_installed.py" "$plugin"
    run "$venv/bin/pytest" "$p/tests" -q -ra -p no:cacheprovider --rootdir "$p"
    "$vpy" -m pip uninstall -q -y "$dist_name"
  done
  rm -rf "$venv"
  run env PYTHON="$PY" EZPZ_NEW_PLUGIN_DIST="$dist" bash scripts/new-plugin-check.sh  # `ezpz new-plugin`, both shapes, from wheels
fi

if [ "${EZPZ_SKIP_COMPAT:-0}" != 1 ]; then
  # The wheels step 2 built, if it ran; compat.sh builds its own otherwise.
  run env EZPZ_COMPAT_DIST="${dist:-}" bash scripts/compat.sh
fi
if [ "${EZPZ_SKIP_XLA:-0}" != 1 ]; then
  # ezpz-tpu for real on XLA's CPU runtime: torch 2.9.0 + torch-xla 2.9.0 in a venv of its own (about 7 GB, once;
  # under CI the venv is a temporary one, deleted after).
  if [ "${CI:-}" = true ] && [ -z "${EZPZ_XLA_VENV:-}" ]; then
    xla_venv=$(mktemp -d)/venv-xla
    run env EZPZ_XLA_VENV="$xla_venv" bash scripts/xla-suite.sh -q -ra -p no:cacheprovider
    rm -rf "$(dirname "$xla_venv")"
  else
    run bash scripts/xla-suite.sh -q -ra -p no:cacheprovider
  fi
fi
rm -rf "${work:-}"
exit $status
