#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite on the CPU, kernels through Triton's interpreter, on four
# pytest-xdist workers (on two cores: many tests wait on the processes they start, or on a timeout; `-n 0`: in this
# one), writing no .pytest_cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TRITON_INTERPRET=1
exec .venv/bin/python -m pytest -q -n 4 --dist worksteal -p no:cacheprovider "$@"
