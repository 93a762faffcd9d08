#!/usr/bin/env bash
# One device call on a 4-GPU machine doing up to four independent jobs side by side, one GPU (or a pair) each, so
# a call of the 30-minute lease does four times the work of a one-GPU call. Each job is a line "GPUS<TAB>NAME<TAB>
# COMMAND" of a job file; COMMAND runs from the repository root with CUDA_VISIBLE_DEVICES=GPUS, its output in
# $OUT/NAME.log, its exit status and seconds in $OUT/jobs.txt. Jobs may write under $OUT/NAME/.
#   T=560 bash experiments/scale/four_jobs.sh JOB_FILE
# The carried wheels (WHEELS, default .whl: deap, optuna, hydra, and litellm for the LLM jobs) are installed once, first. Each job
# is stopped (SIGTERM, then SIGKILL) when T seconds have passed since the call began; nvidia-smi is sampled every 2 s.
set -uo pipefail
jobs_file=$1
T=${T:-560}; WHEELS=${WHEELS:-.whl}; start=$(date +%s)
source experiments/scale/device_env.sh $WHEELS || exit 1
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git log --oneline -1 2>/dev/null || true; } > $OUT/machine.txt 2>&1
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader -lms 2000 > $OUT/smi.csv &
smi=$!
pids=()
while IFS=$'\t' read -r gpus name command; do
  [ -z "$gpus" ] || [ "${gpus:0:1}" = "#" ] && continue
  mkdir -p $OUT/$name
  ( job_start=$(date +%s)
    CUDA_VISIBLE_DEVICES=$gpus timeout -k 10 $(( T - (job_start - start) )) bash -c "$command" > $OUT/$name.log 2>&1
    echo "$name gpus=$gpus exit=$? seconds=$(( $(date +%s) - job_start ))" >> $OUT/jobs.txt ) &
  pids+=($!)
done < "$jobs_file"
wait "${pids[@]}"
kill $smi 2>/dev/null
cat $OUT/machine.txt $OUT/jobs.txt
