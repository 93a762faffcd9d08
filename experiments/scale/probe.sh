#!/usr/bin/env bash
# On a GPU machine (device tool): install the carried wheels, run `kernelevo bench` over a list of KernelBench
# problems at full size with a 60 s search each, and put the bench's table, rows and per-run timelines under $OUT.
#   bash experiments/scale/probe.sh LIST_FILE TITLE [extra overrides...]
set -uo pipefail
list=$1; title=$2; shift 2
source experiments/scale/device_env.sh .whl || exit 1
bench=/tmp/bench-$title
[ -f .scratch/bench-$title.tgz ] && tar -xzf .scratch/bench-$title.tgz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout ${BENCH_TIMEOUT:-540} python3 -m kernelevo.cli bench bench.root=.scratch/kb bench.problems=$list \
  bench.dir=$bench bench.title=$title search.wall_time_s=60 search.generations=1000 search.patience=null "$@" \
  2>&1 | tee $OUT/bench.log | grep -v "^\[kernelevo\] gen " | tail -60
for run in $bench/runs/*/; do echo "== $run"; python3 experiments/timeline.py "$run"; done > $OUT/timelines.txt 2>&1
tar -czf $OUT/bench-$title.tgz -C /tmp bench-$title/rows bench-$title/bench.md bench-$title/bench.json 2>/dev/null
cp $bench/bench.md $OUT/ 2>/dev/null; ls $OUT
