#!/usr/bin/env bash
# Run every benchmark (or those named) and write their output, labelled with the machine, into
# docs/performance.md's generated figures section. Each prints its figure against a baseline measured in the
# same run. The comparisons with accelerate need it installed in this environment:
#   pip install -c constraints.txt accelerate ; apt-get install -y strace
set -euo pipefail
cd "$(dirname "$0")"
exec python write_figures.py "$@"
