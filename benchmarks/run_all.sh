#!/usr/bin/env bash
# Run every benchmark; each prints its figure against a baseline measured in the same run.
set -euo pipefail
cd "$(dirname "$0")"
for b in bench_import.py bench_cold_start.py bench_setup.py bench_hook_deadline.py bench_discovery.py bench_train_step.py bench_torchrun_setup.py bench_threads.py bench_scale.py; do
  echo "== $b"; python "$b"; echo
done
echo "== bench_compile.py"; python bench_compile.py; echo
