#!/usr/bin/env bash
# An LLM run on this machine's GPU against a scripted OpenAI-compatible server on 127.0.0.1 (issue 42): THE REPLIES
# ARE SCRIPTED, NOT A MODEL'S (experiments/llm_scripted/row_softmax.py); experiments/llm_scripted_gpu.py says what is
# real. Writes $OUT/llm_scripted_gpu/ (README.md, run/ with summary.json, report.html, report.md). About 3 minutes
# on one H100. The GPU machine lacks deap, optuna, hydra, litellm: build the wheels here first and carry .whl/:
#   bash ../shared/device/wheels.sh --with-llm && bash experiments/device_llm_wheels.sh   # here, once
#   run(command="bash experiments/llm_scripted_gpu.sh", carry=[".whl"])                   # the device tool
# Extra arguments are Hydra overrides of the run (e.g. search.wall_time_s=100).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import deap, optuna, hydra, litellm, diskcache, filelock" 2>/dev/null; then
  [ -d .whl ] || { echo "no .whl/ here: run ../shared/device/wheels.sh --with-llm and experiments/device_llm_wheels.sh, then carry .whl" >&2; exit 2; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  for packed in .whl/*.tar.xz; do [ -e "$packed" ] && tar -xJf "$packed" -C /tmp/site; done  # litellm, repacked
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
python3 experiments/llm_scripted_gpu.py --out "${OUT:-outputs}/llm_scripted_gpu" -- "$@"
