#!/usr/bin/env bash
# One device call: the convolution table for the problems the second kernel change touches, then a 4-problem bench.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/machine.txt
cat .kb/commit.txt | tee -a $OUT/machine.txt
timeout 110 python3 experiments/heavy_ops.py --kernelbench .kb --out $OUT/heavy_ops2.json --problems \
  'level1/50_*,level1/66_*,level1/87_*,level1/63_*,level1/82_*,level1/57_*' \
  > $OUT/heavy_ops2.log 2>&1
tail -c 3000 $OUT/heavy_ops2.log | cut -c1-300
source experiments/scale/device_env.sh .whl || exit 1
W=/tmp/cb; rm -rf $W; mkdir -p $W
timeout 200 python3 -m kernelevo.cli bench bench.root=.kb bench.problems=.kb/conv_bench.txt bench.dir=$W/bench \
  bench.title=conv-check search.wall_time_s=15 search.generations=1000 search.patience=null parallel=2 \
  bench.backend.per_gpu=2 bench.backend.timeout_s=300 > $W/log.txt 2>&1
echo "bench rc $?"
tail -20 $W/log.txt | cut -c1-300
cp $W/log.txt $OUT/bench_log.txt
python3 -m kernelevo.cli table bench_dirs=[$W/bench] out=$W/table > $W/table.log 2>&1
tar czf $OUT/bench.tgz -C $W --exclude='*.html' --exclude='*.db' --exclude='*-shm' --exclude='*-wal' . 2>/dev/null
ls $OUT
