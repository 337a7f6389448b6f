#!/usr/bin/env bash
# The compatibility suite: each torch of the tested span in a venv of its own, running tests/test_torch_compat.py
# (the main job, the portable script under torchrun and mpiexec, a DDP model kept past teardown(), a DeepSpeed ZeRO
# step where DeepSpeed installs, torch.compile) and test_torch_private.py: from the core's WHEEL on each torch but the
# newest, which runs them inside the core suite with the one-GPU stand-in (core_suite below).
#   bash scripts/compat.sh                       # every torch in TORCHES below (the oldest the core declares, the newest)
#   bash scripts/compat.sh 2.4.1                 # only these torch versions
#   EZPZ_COMPAT_DIST=dist bash scripts/compat.sh # wheels already built (scripts/build-dists.sh); else built here
#   EZPZ_COMPAT_VENVS=/path bash scripts/compat.sh  # keep the venvs there (torch-<version>/), reuse them next time
#   EZPZ_COMPAT_CORE_SUITE= bash scripts/compat.sh   # not the core suite on the newest torch (see core_suite below)
#   EZPZ_COMPAT_VENVS=/path bash scripts/compat.sh --prepare [VERSION...]  # only make the venvs there (the downloads:
#                                                # torch, its CUDA wheels, the test tools, DeepSpeed), run nothing;
#                                                # a later run with the same EZPZ_COMPAT_VENVS reuses them. scripts/test.sh
#                                                # runs this in the background while the core suite runs (docs/ci.md)
#
# Without EZPZ_COMPAT_VENVS each venv is made in a temporary directory and deleted after its suite (a CUDA build of
# torch with its nvidia-* wheels is about 6 GB installed). Every pip call here bypasses the machine's pip config
# (PIP_CONFIG_FILE=/dev/null: a global constraints file may cap torch below the one under test) and pins torch with
# a constraints file of the venv's own, so no later install can replace it. Downloads are not cached (--no-cache-dir):
# the wheels are GBs and each is installed once per run.
#
# To add a torch, or one with extras (e.g. a vendor's torch plugin): call `make_venv` with its pins, then
# `install_core` and `run_suite`; see `check_torch` below.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
unset PYTHONHOME PYTHONPATH

# The tested span: the oldest torch the core declares (pyproject.toml: torch>=2.4) and the newest on PyPI when this
# line was last changed. README.md and docs/compat.md state the same (tests/test_torch_compat.py checks it).
TORCHES=(2.4.1 2.15.0)
TESTED_NEWEST=${TORCHES[-1]}
CORE_SUITE_ON=${EZPZ_COMPAT_CORE_SUITE-$TESTED_NEWEST}  # the torch whose venv also runs the core suite; empty: none
DEEPSPEED="deepspeed==0.19.8"  # as in scripts/test.sh
TOOLS=("pytest==9.1.1" pytest-timeout)  # as in scripts/test.sh (its xdist_group note)
PREPARE=0
if [ "${1:-}" = --prepare ]; then
  PREPARE=1; shift
  [ -n "${EZPZ_COMPAT_VENVS:-}" ] || { echo "compat.sh --prepare needs EZPZ_COMPAT_VENVS (where to keep the venvs)" >&2; exit 2; }
fi
if [ $# -gt 0 ]; then TORCHES=("$@"); fi

CERT=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then CERT=(--cert /etc/ssl/certs/ca-certificates.crt); fi

# pip in VENV, with the machine's pip config bypassed and torch held by the venv's own pins (VENV/pins.txt).
vpip() {
  local venv=$1; shift
  PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip "$@" "${CERT[@]}" --no-cache-dir -c "$venv/pins.txt"
}

# make_venv VENV PIN... : a venv with exactly these pins (the first names torch), the pinned packages and the test
# tools. A venv already there with the same pins, whose install finished, is reused.
make_venv() {
  local venv=$1; shift
  if [ -f "$venv/installed" ] && [ "$(cat "$venv/pins.txt")" = "$(printf '%s\n' "$@")" ]; then
    echo "--- reusing $venv ($*)"
    return
  fi
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  printf '%s\n' "$@" >"$venv/pins.txt"
  local start=$SECONDS
  # Byte-compiled at install (pip's default): with PYTHONDONTWRITEBYTECODE=1, as on CI's machines, a module without
  # its .pyc is compiled again in every process that imports it (docs/ci.md).
  vpip "$venv" install -q "$@" "${TOOLS[@]}" setuptools wheel
  touch "$venv/installed"  # only a venv whose install finished is reused (a prepare may have been cut short)
  echo "--- $venv: $* installed in $((SECONDS - start)) s"
}

# install_core VENV: the core from its wheel file (never an index's unrelated "ezpz"), its dependencies from PyPI.
install_core() {
  # Only the core beside torch: a venv prepared for the core suite (a reused EZPZ_COMPAT_VENVS, then run with another
  # EZPZ_COMPAT_CORE_SUITE) also holds the plugins, editable, which the wheel's suite must not see.
  local others
  others=$("$1/bin/python" -m pip list --format=freeze 2>/dev/null | sed -n 's/^\(ezpz-[A-Za-z0-9_.-]*\)==.*/\1/p')
  if [ -n "$others" ]; then PIP_CONFIG_FILE=/dev/null "$1/bin/python" -m pip uninstall -q -y $others; fi
  vpip "$1" install -q --force-reinstall --no-deps "$DIST"/ezpz-[0-9]*.whl
  vpip "$1" install -q "$DIST"/ezpz-[0-9]*.whl
}

# try_deepspeed VENV: DeepSpeed as scripts/test.sh installs it; where it does not install, the reason is recorded in
# VENV/no-deepspeed.txt (the suite skips its DeepSpeed test with that reason) and the suite goes on.
try_deepspeed() {
  local venv=$1 log
  rm -f "$venv/no-deepspeed.txt"
  log=$(mktemp)
  local start=$SECONDS
  if DS_BUILD_OPS=0 vpip "$venv" install -q --no-build-isolation "$DEEPSPEED" >"$log" 2>&1 \
      && "$venv/bin/python" -c "import deepspeed" >>"$log" 2>&1; then
    echo "--- $DEEPSPEED installed in $((SECONDS - start)) s"
  else
    { echo "$DEEPSPEED did not install on this torch:"; grep -v '^ *$' "$log" | tail -n 5; } >"$venv/no-deepspeed.txt"
    vpip "$venv" uninstall -q -y deepspeed >/dev/null 2>&1 || true
    cat "$venv/no-deepspeed.txt"
  fi
  rm -f "$log"
}

# run_suite VENV TORCH: tests/test_torch_compat.py and test_torch_private.py (each private name and its guard on
# this torch) from a checkout directory, importing ezpz from the venv only.
run_suite() {
  local venv=$1 torch=$2 start=$SECONDS rc=0
  local no_ds=""
  if [ -f "$venv/no-deepspeed.txt" ]; then no_ds=$(cat "$venv/no-deepspeed.txt"); fi
  echo; echo "=== compatibility suite on torch $torch ($venv) ==="
  PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" EZPZ_COMPAT_TORCH="$torch" EZPZ_COMPAT_NO_DEEPSPEED="$no_ds" \
    "$venv/bin/pytest" tests/test_torch_compat.py tests/test_torch_private.py -q -ra -p no:cacheprovider || rc=$?
  echo "--- torch $torch: suite exit $rc in $((SECONDS - start)) s"
  return $rc
}

# suite_installs VENV: what scripts/test.sh installs for the core suite (the core and plugins editable, the test
# tools, DeepSpeed, Lightning, accelerate, mpi4py; not Ray, whose one test the pass leaves out with the launcher
# tests), into VENV beside VENV's torch; nothing run. Part of the
# prepare, so the core suite below starts at once (a second call only checks what is there).
suite_installs() {
  # PIP_CONSTRAINT=/dev/null: a machine's global pip constraints file may cap torch below this one; test.sh's
  # installs and the tests' own pip runs (a tutorial's venv that sees this torch) must not trip on it.
  PIP_CONSTRAINT=/dev/null EZPZ_INSTALL_ONLY=1 EZPZ_TEST_NO_RAY=1 EZPZ_TEST_VENV="$1" EZPZ_TEST_PINS="$1/pins.txt" bash scripts/test.sh
}

# core_suite VENV TORCH: the core suite (tests/) on the newest torch, whose PyPI wheel is a CUDA build, with the
# one-GPU stand-in installed (scripts/standin-suite.sh): a host as a GPU workstation's user has it (a CUDA build of
# torch, a discrete accelerator found by a plugin), where CI's first pass is the pinned CPU build with none. One
# pass for both questions (docs/ci.md): a test that does not touch the host (no plugin host, hook, process or
# distribution listing: tests/host_touch.py) cannot see the stand-in, so it runs here as on a plain CUDA build; one
# that does sees both the newest torch and the accelerator. The compatibility modules (test_torch_compat.py,
# test_torch_private.py: the main job, the portable script under torchrun and Open MPI, DDP past teardown, a
# DeepSpeed ZeRO step, torch.compile, torch's private names) run here from the editable install; the core's wheel
# runs them on the oldest torch (run_suite) and the pinned one. Left out, to run on the pinned torch only: the tests
# of launcher and network plumbing (marked launcher, netns or slurm; their ranks are pinned to the cpu device) and
# the modules marked one_torch (ezpz's own logic: launch plumbing, source rewriting, the tutorial's packaging, ezpz's
# output), whose outcome neither torch's version nor the stand-in can change.
core_suite() {
  local venv=$1 torch=$2 start=$SECONDS rc=0
  echo; echo "=== the core suite on torch $torch ($venv) with the one-GPU stand-in ==="
  suite_installs "$venv" || return 1
  # mpi4py built against MPICH by scripts/test.sh's installs (.test-cache/), for the same Python: the test that
  # MPI_Init still works after ezpz used Hydra's PMI connection.
  local mpi4py=${EZPZ_TEST_MPI4PY_MPICH:-$ROOT/.test-cache/mpi4py-mpich}
  PIP_CONSTRAINT=/dev/null PY="$venv/bin/python" PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" \
    EZPZ_TEST_MPI4PY_MPICH="$mpi4py" \
    bash scripts/standin-suite.sh tests -q -ra -n 2 --dist loadgroup \
    -m "not netns and not slurm and not one_torch and (not launcher or torch_compat)" || rc=$?
  echo "--- torch $torch: core suite exit $rc in $((SECONDS - start)) s"
  return $rc
}

# check_torch VERSION: one torch of the span, end to end.
check_torch() {
  local torch=$1 venv
  venv="$VENVS/torch-$torch"
  echo; echo "=== torch $torch: venv $venv ==="
  make_venv "$venv" "torch==$torch"
  local rc=0
  if [ "$torch" = "$CORE_SUITE_ON" ]; then  # DeepSpeed comes with the suite's installs there (scripts/test.sh)
    core_suite "$venv" "$torch" || rc=1  # the compatibility modules among the rest (docs/ci.md)
  else
    install_core "$venv"
    try_deepspeed "$venv"
    run_suite "$venv" "$torch" || rc=$?
  fi
  if [ -z "${EZPZ_COMPAT_VENVS:-}" ]; then rm -rf "$venv"; fi
  return $rc
}

# prepare_torch VERSION: only the venv of one torch of the span (its downloads), for a later run to reuse.
prepare_torch() {
  local torch=$1 venv
  venv="$VENVS/torch-$torch"
  echo "=== torch $torch: preparing venv $venv ==="
  make_venv "$venv" "torch==$torch"
  if [ "$torch" = "$CORE_SUITE_ON" ]; then suite_installs "$venv"; else try_deepspeed "$venv"; fi
}

if [ "$PREPARE" = 1 ]; then
  mkdir -p "$EZPZ_COMPAT_VENVS"
  VENVS=$(cd "$EZPZ_COMPAT_VENVS" && pwd)
  for torch in "${TORCHES[@]}"; do prepare_torch "$torch"; done
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${EZPZ_COMPAT_DIST:-}" ]; then
  DIST=$(cd "$EZPZ_COMPAT_DIST" && pwd)
else
  DIST="$work/dist"  # built with a venv of its own: build-dists.sh installs its build tools into that Python
  "${PYTHON:-python3}" -m venv "$work/build-venv"
  PYTHON="$work/build-venv/bin/python" bash scripts/build-dists.sh "$DIST" >/dev/null
  rm -rf "$work/build-venv"
fi
VENVS=${EZPZ_COMPAT_VENVS:-$work}
mkdir -p "$VENVS"
VENVS=$(cd "$VENVS" && pwd)

# A notice, not a failure, when PyPI has a newer torch than the newest tested: a new release would otherwise change
# what CI checks without a commit saying so. Update TORCHES, README.md and docs/compat.md to test it.
newest=$(PIP_CONFIG_FILE=/dev/null timeout 60 "${PYTHON:-python3}" -m pip index versions torch "${CERT[@]}" 2>/dev/null \
         | sed -n 's/^torch (\(.*\))$/\1/p') || true
echo "=== compatibility suite: torch ${TORCHES[*]} (newest on PyPI now: ${newest:-unknown, the index did not answer}) ==="
if [ -n "$newest" ] && [ "$newest" != "$TESTED_NEWEST" ]; then
  echo "NOTE: PyPI's newest torch is $newest, the newest tested is $TESTED_NEWEST: update TORCHES in scripts/compat.sh"
fi

status=0
for torch in "${TORCHES[@]}"; do
  check_torch "$torch" || { echo "=== FAILED: the compatibility suite on torch $torch ==="; status=1; }
done
exit $status
