#!/usr/bin/env bash
# Everything the hardware issue asks of a lent NVIDIA GPU machine, in one run (docs/hardware-validation.md):
#   1. the gpu checks of ezpz-cuda (scripts/gpu-check.sh),
#   2. the main job (python -m ezpz.examples.train), plain and under torchrun,
#   3. the core suite installed as CI installs it: a venv, the wheels installed into it (never PYTHONPATH),
#      `pytest -n` across the machine's cores, then ezpz-cuda's own suite.
# That machine reaches no package index: the wheels travel in KIT (built here: scripts/build-dists.sh KIT/dist,
# plus KIT/wheels/ for what its image lacks: setuptools for the tests' plugin builds, stevedore, structlog, DeepSpeed built with DS_BUILD_OPS=0 and its
# hjson/pydantic). Its image's Python holds torch; the venv sees that site-packages through a .pth file, so the
# venv's own packages come first and torch is the machine's own build.
#   KIT=.devkit OUT=/tmp/out bash scripts/gpu-host-validation.sh
#   STEPS="core-suite" TESTS="tests/test_a.py" KIT=.devkit bash scripts/gpu-host-validation.sh   # rerun a part
# Logs and reports go to $OUT (machine.txt, one log per step, the gpu-check JSON report: 8 files); the exit status is the number of steps that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
KIT=${KIT:-.devkit}
OUT=${OUT:-/tmp/gpu-host-validation}
BASE_PY=${PYTHON:-python3}
VENV=${VENV:-/tmp/ezpz-gpu-venv}
WORKERS=${WORKERS:-$(( $(nproc) > 2 ? $(nproc) - 1 : 2 ))}
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
unset PYTHONPATH
mkdir -p "$OUT"
failed=0
step() {  # step NAME CMD...: runs CMD, its output to $OUT/NAME.log and to the terminal's tail
  local name=$1; shift
  local t0=$SECONDS
  echo "=== $name: $* ==="
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.log"
  echo "=== $name: exit $rc in $(( SECONDS - t0 )) s ==="
  [ "$rc" -eq 0 ] || failed=$(( failed + 1 ))
  return 0
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1
  echo "cores: $(nproc); kernel: $(uname -r)"
  "$BASE_PY" -c 'import sys, torch; print("python", sys.version.split()[0], sys.executable); print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")'
  command -v mpiexec || echo "mpiexec: not installed"
  command -v ip || echo "ip (iproute2): not installed"
} 2>&1 | tee "$OUT/machine.txt"

# The venv: its own pip installs the wheels; the image's site-packages (torch and the rest) come after its own.
"$BASE_PY" -m venv "$VENV" || exit 100
image_site=$("$BASE_PY" -c 'import site; print(site.getsitepackages()[0])')
venv_site=$("$VENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')
# addsitedir, not a bare path: the image's own .pth files must run too (a bare path line would skip them).
echo "import site; site.addsitedir('$image_site')" >"$venv_site/gpu-image-site-packages.pth"
# The core and every plugin, as CI's core suite has them (its doc samples list every plugin's answer).
"$VENV/bin/python" -m pip install -q --no-index --no-deps "$KIT"/wheels/*.whl "$KIT"/dist/*.whl 2>&1 | tail -n 5 || exit 101
# The image's console scripts name the image's Python; the venv's launchers must start the venv's.
for tool in torchrun; do
  printf '#!%s\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n' "$VENV/bin/python" >"$VENV/bin/$tool"
  chmod +x "$VENV/bin/$tool"
done
export PATH="$VENV/bin:$PATH" VIRTUAL_ENV="$VENV"
PY="$VENV/bin/python"
"$PY" -m pip check 2>&1 | tail -n 5 | tee -a "$OUT/machine.txt"
"$PY" -m pip list 2>/dev/null | grep -iE '^(ezpz|torch |deepspeed|pluggy|stevedore|structlog|attrs|pytest)' | tee -a "$OUT/machine.txt"

STEPS=${STEPS:-gpu-check doctor main-job main-job-torchrun core-suite cuda-suite}  # a subset, to rerun one
TESTS=${TESTS:-tests}  # the core suite's selection, to rerun what failed (TESTS="tests/test_a.py tests/test_b.py")
wanted() { [[ " $STEPS " == *" $1 "* ]]; }
wanted gpu-check && step gpu-check env PYTHON="$PY" OUT="$OUT" bash scripts/gpu-check.sh
wanted doctor && step doctor ezpz doctor
wanted main-job && step main-job "$PY" -m ezpz.examples.train
wanted main-job-torchrun && step main-job-torchrun torchrun --standalone --nproc-per-node 1 -m ezpz.examples.train
# shellcheck disable=SC2086  # TESTS is a list of paths
wanted core-suite && step core-suite "$PY" -m pytest $TESTS -q -ra -p no:cacheprovider -n "$WORKERS" --dist loadgroup -m "not netns"
wanted cuda-suite && step cuda-suite "$PY" -m pytest plugins/ezpz-cuda/tests -q -ra -p no:cacheprovider
echo "steps failed: $failed"
exit "$failed"
