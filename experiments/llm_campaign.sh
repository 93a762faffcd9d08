#!/usr/bin/env bash
# The LLM team at campaign scale on this machine's GPU (issue 66): three KernelBench problems searched at once, each
# with 100 LLM calls answered after 20 s by a scripted OpenAI-compatible server on 127.0.0.1 -- THE REPLIES ARE
# SCRIPTED, NOT A MODEL'S (experiments/llm_campaign.py says what is real). Writes $OUT/llm_campaign/ (README.md,
# table.md, campaign.json, runs/NAME/). About 8 minutes on one H100. The GPU machine lacks deap, optuna, hydra,
# litellm: build the wheels here first and carry .whl/:
#   bash ../shared/device/wheels.sh --with-llm && bash experiments/device_llm_wheels.sh        # here, once
#   run(command="bash experiments/llm_campaign.sh /path/to/KernelBench", carry=[".whl"])       # the device tool
# Extra arguments after the KernelBench folder go to experiments/llm_campaign.py (e.g. --wall-s 300 -- overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
KB=${1:?usage: llm_campaign.sh KERNELBENCH_DIR [llm_campaign.py arguments]}
shift
if ! python3 -c "import deap, optuna, hydra, litellm, diskcache, filelock" 2>/dev/null; then
  [ -d .whl ] || { echo "no .whl/ here: run ../shared/device/wheels.sh --with-llm and experiments/device_llm_wheels.sh, then carry .whl" >&2; exit 2; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  for packed in .whl/*.tar.xz; do [ -e "$packed" ] && tar -xJf "$packed" -C /tmp/site; done  # litellm, repacked
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
python3 experiments/llm_campaign.py --kernelbench "$KB" --out "${OUT:-outputs}/llm_campaign" --calls 100 \
  --latency-s 20 --in-flight 16 --wall-s 270 --timeout-s 480 "$@"
