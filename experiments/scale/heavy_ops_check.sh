#!/usr/bin/env bash
# One device call (issue 62), sequential timings, about 8 minutes of one H100: the convolution kernels on the GPU
# (experiments/heavy_ops.py: level1/63, level1/81 with W_PHASES both ways), fused against unfused level-2
# convolution seeds (experiments/conv_epilogue_timing.py: level2/1), a 3-problem bench through the product (the
# split-K matmul level1/6, the batched K-major level1/3, the fused level2/1; 15 s searches, 3 at once), then
# Inductor's GEMM templates on level1/2 (experiments/gemm_templates.py: plain, persistent TMA, split-K). Each step's
# JSON and log in $OUT; a step cut by its timeout keeps what it wrote.
#   run(carry=[.whl, .scratch], command="KB=.scratch/kb bash experiments/scale/heavy_ops_check.sh")
set -u
KB=${KB:-.scratch/kb}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/machine.txt
git log -1 --format='%h %s' 2>/dev/null | tee -a $OUT/machine.txt
timeout 60 python3 experiments/heavy_ops.py --kernelbench $KB --out $OUT/heavy_ops.json --rep 20 \
  --problems 'level1/63_*,level1/81_*' > $OUT/heavy_ops.log 2>&1
echo "heavy_ops rc $?"; tail -c 1200 $OUT/heavy_ops.log | cut -c1-250
timeout 110 python3 experiments/conv_epilogue_timing.py --root $KB/level2 --out $OUT/conv_epilogue_timing.json \
  --reps 50 1 > $OUT/conv_epilogue.log 2>&1
echo "conv_epilogue rc $?"; tail -c 1500 $OUT/conv_epilogue.log | cut -c1-250
source experiments/scale/device_env.sh .whl || exit 1
W=/tmp/heavy; rm -rf $W; mkdir -p $W
printf '%s\n' level1/6_Matmul_with_large_K_dimension_.py level1/3_Batched_matrix_multiplication.py \
  level2/1_Conv2D_ReLU_BiasAdd.py > $W/problems.txt
timeout 240 python3 -m kernelevo.cli bench bench.root=$KB bench.problems=$W/problems.txt bench.dir=$W/bench \
  bench.title=heavy-check search.wall_time_s=15 search.generations=1000 search.patience=null parallel=3 \
  bench.backend.per_gpu=3 bench.backend.timeout_s=230 > $W/log.txt 2>&1
echo "bench rc $?"; tail -12 $W/log.txt | cut -c1-300; cp $W/log.txt $OUT/bench_log.txt
python3 -m kernelevo.cli table bench_dirs=[$W/bench] out=$W/table > $W/table.log 2>&1
cp $W/table/*.md $W/table/table.json $OUT/ 2>/dev/null
timeout 110 python3 experiments/gemm_templates.py --kernelbench $KB --out $OUT/gemm_templates.json --rep 20 \
  --problems 'level1/2_*' > $OUT/gemm_templates.log 2>&1
echo "gemm_templates rc $?"; grep -v -i warn $OUT/gemm_templates.log | tail -c 1500 | cut -c1-300
