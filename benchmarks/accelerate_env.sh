#!/usr/bin/env bash
# Install accelerate (and what `from accelerate import PartialState` imports) into a private directory for
# bench_cold_start.py only: never into the project's environment, never pulling another torch (--no-deps).
set -euo pipefail
dir=${1:-"${TMPDIR:-/tmp}/ezpz-bench-accelerate"}
cd "$(dirname "$0")/.."
python -m pip install -q --target "$dir" -c constraints.txt --no-deps \
  accelerate huggingface_hub safetensors psutil tqdm requests urllib3 idna charset_normalizer certifi
echo "export EZPZ_BENCH_ACCELERATE=$dir"
