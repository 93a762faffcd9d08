#!/usr/bin/env bash
# Installs kernelevo into ./.venv with its test dependencies. Idempotent: a second run only checks.
# On a machine without an NVIDIA GPU it pins the CPU build of torch (scripts/constraints-cpu.txt) before anything
# else can ask for torch: an unpinned torch pulls several GB of CUDA packages.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
constraints=()
if ! command -v nvidia-smi >/dev/null 2>&1; then
  constraints=(-c scripts/constraints-cpu.txt)
  "${pip[@]}" "${constraints[@]}" --no-compile torch  # no .pyc for its ~2,300 modules (20 s): what runs compiles
fi
"${pip[@]}" "${constraints[@]}" -e ".[test]"
