#!/usr/bin/env bash
# Issue 29 on a two-GPU machine (device tool, kind nvidia-h100-x2; carry .whl .ray .scratch, KernelBench in
# .scratch/kb): the bench over a list on 1 GPU and on 2 GPUs (local backend and bench/backend=ray), and one search on
# 1 GPU (local; fitness/backend=ray with one actor) and on 2 GPUs (fitness/backend=ray). Each phase samples
# nvidia-smi every 0.5 s (GPU busy per GPU) and times itself; experiments/scale/two_gpus_table.py makes the table.
#   T=580 bash experiments/scale/two_gpus.sh LIST PHASE [PHASE...]
# PHASE: warmup | bench1 | bench2 | benchray | search1 | searchray1 | searchray2. All phases share one cache
# (XDG_CACHE_HOME), so Inductor's seeds and the compiled baselines are warm in every measured phase: `warmup` runs
# each problem once (3 at a time per GPU, a 5 s search) to fill it, and is skipped when the cache is already full
# (a machine kept warm between calls). A phase whose estimate (EST_phase seconds) does not fit in the call's time
# left (T from the start) is skipped and named in $OUT/phases.txt, so the next call can run it.
# Settings: BENCH_S (each bench search's budget, default 15 s), SEARCH_S (the search phases', 30 s), PROBLEM (the
# search phases' problem, level1/23_Softmax.py), PARALLEL (evaluations in flight per GPU, 14: auto on 16 cores).
set -uo pipefail
list=$1; shift
T=${T:-580}; start=$(date +%s)
BENCH_S=${BENCH_S:-15}; SEARCH_S=${SEARCH_S:-30}; PROBLEM=${PROBLEM:-level1/23_Softmax.py}; PARALLEL=${PARALLEL:-14}
declare -A EST=([warmup]=140 [bench1]=330 [bench2]=180 [benchray]=200 [search1]=90 [searchray1]=100 [searchray2]=100)
source experiments/scale/device_env.sh .whl ray || exit 1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $OUT/gpus.txt
python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__)" \
  | tee -a $OUT/gpus.txt
nproc >> $OUT/gpus.txt
common=(search.generations=1000 search.patience=null parallel=$PARALLEL)
bench() {  # bench PHASE GPUS [overrides...]
  local phase=$1 gpus=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpus python3 -m kernelevo.cli bench bench.root=.scratch/kb bench.problems=$list \
    bench.dir=/tmp/two-$phase bench.title=$phase search.wall_time_s=$BENCH_S "${common[@]}" "$@"
}
search() {  # search PHASE GPUS [overrides...]
  local phase=$1 gpus=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpus python3 -m kernelevo.cli run problem=$PWD/.scratch/kb/$PROBLEM \
    search.wall_time_s=$SEARCH_S "${common[@]}" hydra.run.dir=/tmp/two-$phase "$@"
}
ray2=(fitness/backend=ray fitness.backend.address=null fitness.backend.per_gpu=$PARALLEL)
for phase in "$@"; do
  left=$(( T - ($(date +%s) - start) ))
  if [ "$phase" = warmup ] && [ -f $HOME/warm ]; then echo "$phase: cache already warm" >> $OUT/phases.txt; continue; fi
  if [ $left -lt ${EST[$phase]} ]; then echo "$phase: skipped, $left s left < ${EST[$phase]} s" >> $OUT/phases.txt; continue; fi
  mkdir -p $OUT/$phase
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
    > $OUT/$phase/smi.csv & smi=$!
  t0=$(date +%s.%N)
  case $phase in
    warmup)     bench warmup 0,1 search.wall_time_s=5 parallel=4 bench.backend.per_gpu=3 && touch $HOME/warm ;;
    bench1)     bench bench1 0 ;;
    bench2)     bench bench2 0,1 ;;
    benchray)   bench benchray 0,1 bench/backend=ray bench.backend.address=null ;;
    search1)    search search1 0 ;;
    searchray1) search searchray1 0,1 "${ray2[@]}" fitness.backend.gpus=1 ;;
    searchray2) search searchray2 0,1 "${ray2[@]}" fitness.backend.gpus=2 ;;
    *) echo "unknown phase $phase"; kill $smi; exit 2 ;;
  esac > $OUT/$phase/log.txt 2>&1
  rc=$?; t1=$(date +%s.%N); kill $smi
  echo "$t0 $t1 $rc" > $OUT/$phase/wall.txt
  echo "$phase: rc $rc, $(python3 -c "print(round($t1-$t0,1))") s" >> $OUT/phases.txt
  d=/tmp/two-$phase
  cp $d/bench.json $d/bench.md $d/summary.json $OUT/$phase/ 2>/dev/null
  [ -d $d/rows ] && cp -r $d/rows $OUT/$phase/
  grep -v "^\[kernelevo\] gen " $OUT/$phase/log.txt | tail -8
done
cat $OUT/phases.txt
