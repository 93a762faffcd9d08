#!/usr/bin/env bash
# Issue 45's bench figure on a machine of N GPUs, in ONE device call: a bench of the problems in LIST (a list file)
# with warm caches on 1 GPU, then on all N, so each problem's wall time can be held against its search budget and
# the N-GPU bench's wall time against the 1-GPU one. Carry .whl (or WHEELS=.whl-core) and .scratch (the problems).
#   run(kind=nvidia-h100-x2, carry=[.whl-core, .scratch], command="WHEELS=.whl-core LIST=.scratch/kb/bench8.txt \
#       bash experiments/scale/bench_gpus.sh warm bench1 benchN")
#   python3 experiments/scale/bench_gpus_table.py <files_at>
# PHASE: warm (a bench with a 5 s search over every GPU, per_gpu=2: Inductor's seeds and the baselines cached on disk,
# XDG_CACHE_HOME shared by the phases) | bench1 (CUDA_VISIBLE_DEVICES=0) | benchN (every GPU). Each measured phase is
# a fresh bench.dir with search.wall_time_s=SEARCH_S (15), one search at a time per GPU. EXTRA_CMD, when set, runs
# in the background during bench1 (it names its own GPUs, other than 0, with CUDA_VISIBLE_DEVICES; they are idle
# then; bound its time with `timeout`), its output in $OUT/extra.log; benchN starts once it has ended.
set -uo pipefail
SEARCH_S=${SEARCH_S:-15}; LIST=${LIST:?a list file of problems}; WHEELS=${WHEELS:-.whl}
source experiments/scale/device_env.sh $WHEELS || exit 1
all=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git log -1 --format='commit %h %s' 2>/dev/null; echo "SEARCH_S=$SEARCH_S LIST=$LIST GPUS=$all"; } > $OUT/machine.txt
common=(bench.root=.scratch/kb bench.problems=$LIST search.generations=1000 search.patience=null)
for phase in "$@"; do
  case $phase in
    warm) gpus=$all; extra=(search.wall_time_s=5 bench.backend.per_gpu=2) ;;
    bench1) gpus=0; extra=(search.wall_time_s=$SEARCH_S) ;;
    benchN) gpus=$all; extra=(search.wall_time_s=$SEARCH_S) ;;
    *) echo "unknown phase $phase" >> $OUT/phases.txt; continue ;;
  esac
  mkdir -p $OUT/$phase
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 1000 \
    > $OUT/$phase/smi.csv & smi=$!
  if [ $phase = bench1 ] && [ -n "${EXTRA_CMD:-}" ]; then
    ( bash -c "$EXTRA_CMD" > $OUT/extra.log 2>&1 ) & extra_pid=$!
  fi
  if [ $phase = benchN ] && [ -n "${extra_pid:-}" ]; then wait $extra_pid; extra_pid=; fi
  t0=$(date +%s.%N)
  CUDA_VISIBLE_DEVICES=$gpus python3 -m kernelevo.cli bench "${common[@]}" "${extra[@]}" bench.dir=$OUT/$phase/bench \
    bench.title=$phase > $OUT/$phase/log.txt 2>&1
  rc=$?; t1=$(date +%s.%N); kill $smi
  echo "$phase gpus=$gpus rc=$rc wall_s=$(python3 -c "print(round($t1-$t0,1))")" >> $OUT/phases.txt
  tail -3 $OUT/$phase/log.txt
done
[ -n "${extra_pid:-}" ] && wait $extra_pid
cat $OUT/phases.txt
