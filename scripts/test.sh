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
#   EZPZ_NO_PREPARE=1 bash scripts/test.sh      # the compat/XLA venvs made when their suites run, not in the background
#   EZPZ_INSTALL_ONLY=1 bash scripts/test.sh    # the venv and its installs only, no test run
#   EZPZ_TEST_NO_RAY=1 bash scripts/test.sh     # without Ray Train (its one test, launcher-marked, then skips)
#
# Everything is installed into .venv-test/ (git-ignored; created on the first run with ${PYTHON:-python3} -m venv,
# reused after), never into the Python or venv you run this from: your `pip list` stays as it was.
# System packages are not installed here (the README names them; .ci/run installs them): Open MPI (openmpi-bin),
# MPICH (mpich, libmpich-dev: mpi4py is built against it), iproute2 (network-namespace tests) and a live Slurm
# (bash scripts/slurm.sh start). Tests that need a missing one skip, saying why (outside CI).
#
# 1. editable installs of the core and all plugins into .venv-test/: the core suite (the docs build among its tests);
# 2. wheels of all six distributions built once (scripts/build-dists.sh), installed NOT editable into one
#    fresh venv: `ezpz doctor` and `ezpz plugins` on the core alone, then each plugin in turn installed
#    beside the core only (its wheel added, checked, its suite run, removed again), so a file missing from
#    a wheel or a wrong packages.find shows up here and not on a user's machine;
# 3. the compatibility suite (scripts/compat.sh): the core's wheel from step 2 on the oldest torch the core declares
#    and on the newest, each in a venv of its own made and deleted there (tests/test_torch_compat.py); then the core
#    suite on the newest torch (a CUDA build) with a stand-in for a one-GPU host (scripts/standin-suite.sh);
# 4. ezpz-tpu's suite on XLA's CPU runtime (scripts/xla-suite.sh), in the background beside new-plugin-check.sh
#    (each takes one core; neither times anything), before the network-namespace tests.
# The venvs of 3 and 4 (GBs of downloads) are made in the background while 1 and 2 run, where the disk has room
# (EZPZ_NO_PREPARE=1: not); the network-namespace tests, whose failover bounds are timed, run once that is done.
# At its end it prints the wall time of each stage (docs/ci.md says where CI's time goes).
# A suite that collects no tests fails (pytest exit code 5).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# The wall time of each stage, printed at the end (and on an early exit): one row per stage.
T0=$SECONDS
ROWS=()
row() { ROWS+=("$(printf '%6d s  %-6s  %s' "$1" "$2" "$3")"); }
summary() {
  echo; echo "=== wall time per stage (scripts/test.sh; docs/ci.md) ==="
  if [ -n "${EZPZ_CI_TIMES:-}" ]; then printf '%s\n' "$EZPZ_CI_TIMES"; fi  # .ci/run's own stages, before this script
  if [ ${#ROWS[@]} -gt 0 ]; then printf '%s\n' "${ROWS[@]}"; fi
  printf '%6d s          scripts/test.sh in all\n' $((SECONDS - T0))
}
prep="" prep_pid=""
finish() {
  if [ -n "$prep_pid" ]; then kill -- "-$prep_pid" 2>/dev/null || true; wait "$prep_pid" 2>/dev/null || true; fi
  if [ -n "${xla_pid:-}" ]; then kill -- "-$xla_pid" 2>/dev/null || true; wait "$xla_pid" 2>/dev/null || true; fi
  if [ -n "$prep" ]; then rm -rf "$prep"; fi
  summary
}
trap finish EXIT

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
# pytest 9.1.1: with 9.2, pytest-xdist 3.8.0's xdist_group marks do nothing (9.2 keeps a node's id where xdist no
# longer writes the group into it), so `--dist loadgroup` would spread a group over both workers (docs/ci.md).
TOOLS=("pytest==9.1.1" hypothesis pytest-timeout "pytest-xdist==3.8.0" "import-linter==2.16" "mypy==2.4.1")
# The docs site (mkdocs.yml): the material theme, and mkdocstrings for the API reference (docs/api.md).
DOCS=("mkdocs==1.6.1" "mkdocs-material==9.8.1" "mkdocstrings[python]==1.0.8" "mkdocstrings-python==2.0.11")

# torch is pinned by constraints.txt (an unpinned torch would pull GB of CUDA wheels), or by EZPZ_TEST_PINS
# (scripts/compat.sh: the core suite in its venv of the newest torch).
PINS=${EZPZ_TEST_PINS:-constraints.txt}
TORCH_PIN=$(grep -m1 '^torch==' "$PINS") || { echo "$PINS pins no torch (a line torch==VERSION)" >&2; exit 2; }
t=$SECONDS
# Byte-compiled at install, as pip does for users: machines of CI's kind set PYTHONDONTWRITEBYTECODE=1, so a module
# without its .pyc is compiled again by every process that imports it (docs/ci.md: `--no-compile` here cost CI
# about 1,000 s; `import torch` 1.8 s of CPU with its bytecode, about 4 s without).
$PY -m pip install -q -c "$PINS" "$TORCH_PIN" setuptools build "${TOOLS[@]}" "${DOCS[@]}"
$PY -m pip install -q -c "$PINS" --no-build-isolation -e ".[port,kit]" "${present[@]/#/-e}"
# The editable sources' bytecode, written once here (pip compiles only what it installs; the same reason as above).
$PY -m compileall -q -j 2 ezpz_core/ezpz "${present[@]}" >/dev/null
# DeepSpeed for tests/test_deepspeed.py: an sdist, so no build isolation (an isolated build would pull an unpinned
# torch) and no ops prebuilt (DS_BUILD_OPS=0; the CPU path JIT-builds what it needs).
DS_BUILD_OPS=0 $PY -m pip install -q -c "$PINS" --no-build-isolation "deepspeed==0.19.8"
# Lightning Fabric (the ezpz[lightning] extra), accelerate and Ray Train, for the Fabric bridge, adopt-a-group and
# live Ray tests (ray[train] adds pyarrow and pandas, about 500 MB; torch stays pinned). EZPZ_TEST_NO_RAY=1 leaves
# Ray out: scripts/compat.sh's venv of the newest torch, whose pass leaves the launcher tests (Ray's among them) out.
RAY=("ray[train]==2.60.0"); [ "${EZPZ_TEST_NO_RAY:-0}" = 1 ] && RAY=()
$PY -m pip install -q -c "$PINS" --no-build-isolation -e ".[lightning]" "accelerate==1.15.0" "${RAY[@]}"
$PY -c "import torch, sys; sys.exit(0 if torch.__version__.startswith(sys.argv[1]) else 'pip replaced torch: ' + torch.__version__)" "${TORCH_PIN#torch==}"
# mpi4py built against MPICH (not the wheel's bundled MPI), for the test that MPI_Init from mpi4py still works after
# ezpz used Hydra's PMI connection (tests/test_rendezvous_reliability.py). Built once into .test-cache/ (about 2 min).
if command -v mpicc.mpich >/dev/null 2>&1; then
  export EZPZ_TEST_MPI4PY_MPICH=${EZPZ_TEST_MPI4PY_MPICH:-$(pwd)/.test-cache/mpi4py-mpich}
  if [ ! -d "$EZPZ_TEST_MPI4PY_MPICH/mpi4py" ]; then
    MPICC=mpicc.mpich $PY -m pip install -q --no-binary mpi4py --target "$EZPZ_TEST_MPI4PY_MPICH" "mpi4py==4.1.2"
  fi
fi
row $((SECONDS - t)) ok "installs into $VENV (torch, tools, docs, ezpz and plugins editable, DeepSpeed, Ray, mpi4py)"

status=0
# run [--as LABEL] CMD...: one stage; its wall time and result go into the summary (the label, else the command).
run() {
  local label="" t=$SECONDS rc=0
  if [ "$1" = --as ]; then label=$2; shift 2; fi
  label=${label:-$*}
  echo; echo "=== $label ==="
  "$@" || rc=$?
  ended $rc $((SECONDS - t)) "${label//$VENV\/bin\//}"
}
# ended RC SECONDS LABEL: a stage's result: a failure is said and fails the script; the row goes into the summary.
ended() {
  if [ "$1" != 0 ]; then echo "=== FAILED (exit $1): $3 ==="; status=1; fi
  row "$2" "$([ "$1" = 0 ] && echo ok || echo FAILED)" "$3"
}
ROOT=$(pwd)

if [ "${EZPZ_INSTALL_ONLY:-0}" = 1 ]; then trap - EXIT; exit 0; fi  # the installs only (scripts/compat.sh's prepare)
if [ $# -gt 0 ]; then  # a subset: the same venv and installs, then only the pytest run asked for
  trap - EXIT
  exec $PY -m pytest "$@"
fi

# The venvs of the compatibility and XLA suites, made in the background (network-bound: about 2.7 GB for each of
# the two CUDA builds of torch, 7 GB for torch 2.9.0 + torch-xla) while the core suite runs, where the disk has room
# for all three at once (about 20 GB: 30 GB free is asked; else each suite makes its own later, as before). Niced: the tests
# come first. A failed prepare is not a failure: its log is printed, and the suite makes what is missing itself.
prep=$(mktemp -d)
want_compat=$([ "${EZPZ_SKIP_COMPAT:-0}" != 1 ] && echo 1 || echo 0)
want_xla=$([ "${EZPZ_SKIP_XLA:-0}" != 1 ] && echo 1 || echo 0)
COMPAT_VENVS=""
XLA_VENV=${EZPZ_XLA_VENV:-}
if [ "${CI:-}" = true ] && [ -z "$XLA_VENV" ]; then XLA_VENV="$prep/venv-xla"; fi  # under CI: temporary, deleted after
free_gb=$(df -Pk "$prep" | awk 'NR==2 {print int($4 / 1048576)}')
if [ "${EZPZ_NO_PREPARE:-0}" != 1 ] && [ $((want_compat + want_xla)) -gt 0 ]; then
  if [ "$free_gb" -ge "${EZPZ_PREPARE_MIN_GB:-30}" ]; then
    [ "$want_compat" = 1 ] && COMPAT_VENVS="$prep/compat"
    echo "=== preparing the compatibility and XLA venvs in the background ($free_gb GB free; log $prep/prepare.log) ==="
    # A process group of its own (setsid), so an early exit of this script can stop it and everything it started.
    # Niced, and in the idle I/O class where ionice exists: its unpacking (GBs) must not evict or slow the tests'.
    IONICE=$(command -v ionice >/dev/null 2>&1 && echo "ionice -c 3" || true)
    EZPZ_COMPAT_VENVS="$COMPAT_VENVS" EZPZ_XLA_VENV="${XLA_VENV:-$ROOT/.venv-xla}" WANT_COMPAT=$want_compat \
      WANT_XLA=$want_xla nice -n 10 $IONICE setsid bash -c '
        t=$SECONDS rc=0
        if [ "$WANT_COMPAT" = 1 ]; then bash scripts/compat.sh --prepare || rc=1; fi
        if [ "$WANT_XLA" = 1 ]; then bash scripts/xla-suite.sh --prepare || rc=1; fi
        echo "=== prepare exit $rc in $((SECONDS - t)) s ==="
        exit $rc' >"$prep/prepare.log" 2>&1 </dev/null &
    prep_pid=$!
  else
    echo "=== not preparing the compatibility and XLA venvs in the background: $free_gb GB free, under ${EZPZ_PREPARE_MIN_GB:-30} GB ==="
  fi
fi
# prepared: wait for the background prepare (if any), printing its log when it failed.
prepared() {
  [ -n "$prep_pid" ] || return 0
  local t=$SECONDS rc=0
  echo; echo "=== waiting for the background prepare of the compatibility and XLA venvs ==="
  wait "$prep_pid" || rc=$?
  prep_pid=""
  tail -n 1 "$prep/prepare.log"
  if [ $rc != 0 ]; then
    echo "=== the background prepare failed (exit $rc; the suites make what is missing themselves): its log ==="
    cat "$prep/prepare.log"
  fi
  row $((SECONDS - t)) "$([ $rc = 0 ] && echo ok || echo failed)" "waited for the background prepare ($(sed -n 's/^=== prepare exit .* in \(.*\) ===$/\1/p' "$prep/prepare.log") in all)"
}
# ezpz-tpu for real on XLA's CPU runtime: torch 2.9.0 + torch-xla 2.9.0 in a venv of its own (about 7 GB, once;
# under CI the venv is a temporary one, deleted after). In the background (start_xla), its output in a log that
# wait_xla prints when it ended, with its row in the summary.
xla_pid="" xla_done="" xla_start=0
XLA_LABEL="scripts/xla-suite.sh: ezpz-tpu on XLA's CPU runtime"
start_xla() {
  echo; echo "=== $XLA_LABEL: started in the background (log $prep/xla.log) ==="
  xla_start=$SECONDS
  # A process group of its own (setsid), so an early exit of this script stops it and its tests (finish).
  env EZPZ_XLA_VENV="${XLA_VENV:-$ROOT/.venv-xla}" EZPZ_XLA_DIST="${dist:-}" \
    setsid bash scripts/xla-suite.sh -q -ra -p no:cacheprovider >"$prep/xla.log" 2>&1 </dev/null &
  xla_pid=$!
}
wait_xla() {
  local rc=0
  wait "$xla_pid" || rc=$?
  xla_pid="" xla_done=1
  echo; echo "=== $XLA_LABEL (ran in the background) ==="
  cat "$prep/xla.log"
  ended $rc $((SECONDS - xla_start)) "$XLA_LABEL (beside the next stage)"
}
# The one-GPU stand-in pass: in scripts/compat.sh on the newest torch; here (on the pinned torch, the tests the core
# pass records as touching the host: tests/host_touch.py) only when the compatibility suite does not run.
HOST_RECORD="$prep/host-touch"
standin_here=$([ "$want_compat" = 1 ] || echo 1)

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
  # Two workers (pytest-xdist); the tests that make network-namespace nodes run later (below), one at a time: their
  # failover bounds are timed against an uninterrupted run, which a test on the other worker or a download would slow.
  # The one-GPU stand-in pass runs in scripts/compat.sh, on the newest torch (docs/ci.md); without it (EZPZ_SKIP_COMPAT=1)
  # it runs here, after this pass, on the tests this pass records as touching the host (tests/host_touch.py).
  run --as "core suite (not netns)" \
    env ${standin_here:+EZPZ_TEST_HOST_RECORD="$HOST_RECORD"} $PY -m pytest tests -q -ra -n 2 --dist loadgroup -m "not netns"
  if [ -n "$standin_here" ]; then
    run --as "stand-in for a one-GPU host (not netns): the tests that touched the host" \
      env PY="$PY" EZPZ_TEST_HOST_ONLY="$HOST_RECORD" \
      bash scripts/standin-suite.sh tests -q -ra -n 2 --dist loadgroup -m "not netns"
  fi
  # Each plugin's suite runs once: from its wheel beside the core's (below), what a user installs; here, editable,
  # only when that stage is skipped. The plugins side by side: this venv's core suite, and the wheels all together.
  if [ "${EZPZ_SKIP_ISOLATED:-0}" = 1 ]; then
    for p in "${present[@]}"; do
      run --as "$(basename "$p") suite (editable, all plugins installed together)" $PY -m pytest "$p/tests" -q -ra
    done
  fi
  # The docs build (mkdocs build --strict) is a test of the core suite: tests/test_docs.py::test_site_builds_strict.
fi

if [ "${EZPZ_SKIP_ISOLATED:-0}" != 1 ]; then
  work=$(mktemp -d)
  dist="$work/dist" venv="$work/venv"
  echo; echo "=== wheels: scripts/build-dists.sh -> $dist ==="
  t=$SECONDS
  PYTHON=$PY bash scripts/build-dists.sh "$dist"
  $PY -m venv "$venv"
  vpy="$venv/bin/python"
  "$vpy" -m pip install -q -c constraints.txt "torch==2.13.0" "${TOOLS[@]}"
  # The core from its wheel file (never an index's unrelated "ezpz"); its dependencies from the index.
  "$vpy" -m pip install -q -c constraints.txt --find-links "$dist" "$dist"/ezpz-[0-9]*.whl
  row $((SECONDS - t)) ok "wheels built, and a fresh venv with the core's wheel"
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
    run --as "$dist_name suite from its wheel, beside the core wheel only" \
      "$venv/bin/pytest" "$p/tests" -q -ra -n 2 --dist loadgroup -p no:cacheprovider --rootdir "$p"
    "$vpy" -m pip uninstall -q -y "$dist_name"
  done
  # Every plugin's wheel at once, as a user of several vendors installs them: each found, loaded and conformant
  # beside the others, and `ezpz doctor` on them all.
  echo; echo "=== every plugin from its wheel, all installed together ==="
  all_plugins=() all_wheels=()
  for p in "${present[@]}"; do
    dist_name=$(basename "$p"); all_plugins+=("${dist_name#ezpz-}"); all_wheels+=("$dist/${dist_name//-/_}"-[0-9]*.whl)
  done
  "$vpy" -m pip install -q -c constraints.txt --find-links "$dist" "${all_wheels[@]}"
  run --as "ezpz doctor, every plugin's wheel installed together" in_work quiet "$venv/bin/ezpz" doctor
  run --as "scripts/check_installed.py, every plugin's wheel installed together" \
    in_work "$vpy" "$ROOT/scripts/check_installed.py" "${all_plugins[@]}"
  rm -rf "$venv"
  prepared  # the XLA venv is ready (or the suite makes it itself)
  # The XLA suite (one process, one core) beside new-plugin-check.sh (one core: pip, builds, two small suites):
  # neither times anything, and the network-namespace tests that do run only after both ended.
  if [ "$want_xla" = 1 ]; then start_xla; fi
  run --as "scripts/new-plugin-check.sh: ezpz new-plugin, both shapes, from wheels" \
    env PYTHON="$PY" EZPZ_NEW_PLUGIN_DIST="$dist" bash scripts/new-plugin-check.sh
  if [ "$want_xla" = 1 ]; then wait_xla; fi
fi

prepared  # nothing in the background from here on
if [ "${EZPZ_WHEELS_ONLY:-0}" != 1 ]; then
  # The network-namespace nodes, one at a time, on an otherwise idle machine (then on the stand-in, when it runs here).
  run --as "core suite (netns)" \
    env ${standin_here:+EZPZ_TEST_HOST_RECORD="$HOST_RECORD"} $PY -m pytest tests -q -ra -m netns
  if [ -n "$standin_here" ]; then
    run --as "stand-in for a one-GPU host (netns): the tests that touched the host" \
      env PY="$PY" EZPZ_TEST_HOST_ONLY="$HOST_RECORD" bash scripts/standin-suite.sh tests -q -ra -m netns
  fi
fi

if [ "$want_compat" = 1 ]; then
  # The wheels step 2 built, if it ran; compat.sh builds its own otherwise. The venvs prepared above, if any
  # (deleted after); else compat.sh makes and deletes its own.
  run --as "scripts/compat.sh: torch 2.4.1 (the core's wheel), 2.15.0 (the core suite with the one-GPU stand-in)" \
    env EZPZ_COMPAT_DIST="${dist:-}" EZPZ_COMPAT_VENVS="$COMPAT_VENVS" bash scripts/compat.sh
  if [ -n "$COMPAT_VENVS" ]; then rm -rf "$COMPAT_VENVS"; fi
fi
if [ "$want_xla" = 1 ] && [ -z "$xla_done" ]; then  # not run beside new-plugin-check.sh above (no wheel stage)
  start_xla; wait_xla
fi
rm -rf "${work:-}"
exit $status
