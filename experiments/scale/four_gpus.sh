#!/usr/bin/env bash
# Issue 45 on a four-GPU machine, in ONE device call of at most 9 minutes (device tool, kind nvidia-h100-x4 or
# nvidia-h200-x4; carry .whl .ray .scratch, 23_Softmax in .scratch/kb/level1/): one search of level1/23_Softmax on
# 1 GPU (local backend) and through fitness/backend=ray on 4 GPUs (one evaluator actor per GPU), then, time allowing,
# through Ray on 1 GPU (like for like with the 4-GPU Ray run). Each phase samples nvidia-smi every 0.5 s (GPU busy
# and memory per GPU) and times itself; experiments/scale/four_gpus_table.py makes the table (evaluations/hour, GPU
# busy per GPU, where each actor ran, the search's overrun past its budget and the evaluations cut there).
#   mkdir -p .scratch/kb/level1 && cp /work/shared/kernelbench/level1/23_Softmax.py .scratch/kb/level1/
#   bash ../shared/device/wheels.sh && bash ../shared/device/ray-slim.sh     # fill .whl and .ray (git-ignored)
#   run(kind=nvidia-h100-x4, carry=[.whl, .ray, .scratch], timeout_s=560,
#       command="T=540 bash experiments/scale/four_gpus.sh warmup search1 searchray4 searchray1")
#   python3 experiments/scale/four_gpus_table.py <files_at>     # the table, from what came back under $OUT
# On two GPUs (kind nvidia-h100-x2 / nvidia-h200-x2): "T=540 bash experiments/scale/four_gpus.sh warmup search1
# searchray2 searchray1".
# PHASE: warmup | searchN (local backend on GPUs 0..N-1) | searchrayN (fitness/backend=ray, N actors on GPUs
# 0..N-1), N = 1..8: search1, searchray4, searchray2, search2, ...; a trailing w (searchray2w) runs it with a
# staleness window of two generations (search.staleness = 2 x N x LAMBDA; experiments/results/supply_cpu/supply_cpu.md).
# The phases' folders come back in $OUT/four_gpus.tgz (the device returns at most 8 files), with $OUT/table.md.
# All phases share one cache (XDG_CACHE_HOME):
# `warmup` runs the problem once (a 5 s search) so that Inductor's seed (kernelevo/seeds/inductor cache) and the baselines
# (fitness/measure/baseline_cache.py) are on disk, and no measured phase pays for them; skipped when already warm (a machine
# kept warm between calls). A phase whose estimate (EST) does not fit in the time left (T seconds from the start) is
# skipped and named in $OUT/phases.txt, so the next call can run it.
# Settings: SEARCH_S (each search's budget, default 60 s), PROBLEM (level1/23_Softmax.py), PARALLEL (evaluations in
# flight per GPU, 14: auto on 16 cores), LAMBDA (search.lambda_, per GPU: 8; the issue's 2026-11-27 figures used 32),
# OVERRIDES (more key=value for every search, e.g. "search.staleness=64").
set -uo pipefail
T=${T:-540}; start=$(date +%s)
SEARCH_S=${SEARCH_S:-60}; PROBLEM=${PROBLEM:-level1/23_Softmax.py}; PARALLEL=${PARALLEL:-14}; LAMBDA=${LAMBDA:-8}
OVERRIDES=${OVERRIDES:-}
estimate() {  # seconds a phase may take: a search's budget plus start-up (Ray's more, and more with more actors)
  case $1 in
    warmup) echo 110 ;;
    search[1-8]|search[1-8]w) echo $(( SEARCH_S + 35 )) ;;
    searchray[1-8]|searchray[1-8]w) n=${1#searchray}; echo $(( SEARCH_S + 50 + 5 * ${n%w} )) ;;
  esac
}
devices() { seq -s, 0 $(( $1 - 1 )); }  # 0,1,...,N-1
window() { [ "${1: -1}" = w ] && echo search.staleness=$(( 2 * $2 * LAMBDA )); }  # PHASE N: a w phase's window
source experiments/scale/device_env.sh .whl ray || exit 1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $OUT/gpus.txt
python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__)" \
  | tee -a $OUT/gpus.txt
nproc >> $OUT/gpus.txt
git log -1 --format='commit %h %s' >> $OUT/gpus.txt 2>/dev/null
echo "SEARCH_S=$SEARCH_S PROBLEM=$PROBLEM PARALLEL=$PARALLEL LAMBDA=$LAMBDA" >> $OUT/gpus.txt
common=(search.generations=1000 search.patience=null search.lambda_=$LAMBDA $OVERRIDES)
search() {  # search PHASE GPUS BUDGET [overrides...]
  local phase=$1 gpus=$2 budget=$3; shift 3
  CUDA_VISIBLE_DEVICES=$gpus python3 -m kernelevo.cli run problem=$PWD/.scratch/kb/$PROBLEM \
    search.wall_time_s=$budget "${common[@]}" hydra.run.dir=/tmp/four-$phase "$@"
}
ray=(fitness/backend=ray fitness.backend.address=null fitness.backend.per_gpu=$PARALLEL)
for phase in "$@"; do
  left=$(( T - ($(date +%s) - start) ))
  if [ "$phase" = warmup ] && [ -f $HOME/warm ]; then echo "$phase: cache already warm" >> $OUT/phases.txt; continue; fi
  est=$(estimate $phase)
  if [ -z "$est" ]; then echo "unknown phase $phase" >> $OUT/phases.txt; continue; fi
  if [ $left -lt $est ]; then echo "$phase: skipped, $left s left < $est s" >> $OUT/phases.txt; continue; fi
  mkdir -p $OUT/$phase
  rm -rf /tmp/four-$phase
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
    > $OUT/$phase/smi.csv & smi=$!
  t0=$(date +%s.%N)
  case $phase in
    warmup)     search warmup 0 5 && touch $HOME/warm ;;
    searchray*) n=${phase#searchray}; wide=$(window $phase ${n%w})
                search $phase $(devices ${n%w}) $SEARCH_S "${ray[@]}" fitness.backend.gpus=${n%w} $wide ;;
    search*)    n=${phase#search}; n=${n%w}; wide=$(window $phase $n)
                search $phase $(devices $n) $SEARCH_S parallel=$(( PARALLEL * n )) gpus=$n $wide ;;
  esac > $OUT/$phase/log.txt 2>&1
  rc=$?; t1=$(date +%s.%N); kill $smi
  echo "$t0 $t1 $rc" > $OUT/$phase/wall.txt
  echo "$phase: rc $rc, $(python3 -c "print(round($t1-$t0,1))") s" >> $OUT/phases.txt
  cp /tmp/four-$phase/summary.json $OUT/$phase/ 2>/dev/null
  grep -v "^\[kernelevo\] gen " $OUT/$phase/log.txt | tail -8
done
cat $OUT/phases.txt
python3 experiments/scale/four_gpus_table.py $OUT > $OUT/table.md; cat $OUT/table.md
phases=$(cd $OUT && ls -d warmup search* 2>/dev/null)
[ -n "$phases" ] && tar czf $OUT/four_gpus.tgz -C $OUT $phases && (cd $OUT && rm -rf $phases)
