P=.scratch/kb/level2/66_Matmul_Dropout_Softmax.py
mkdir -p $OUT/eval66 $OUT/judge
( CUDA_VISIBLE_DEVICES=1,2 timeout -k 5 -s INT 175 python3 -m kernelevo.cli bench bench.root=.scratch/kb bench.problems=.scratch/kb/conv10.txt bench.dir=$OUT/conv bench.title=conv10 search.generations=0 bench.backend.per_gpu=5 bench.backend.prestart=false > $OUT/conv.log 2>&1 ) &
( for i in 1 2 3 4; do CUDA_VISIBLE_DEVICES=3 timeout 50 python3 -m kernelevo.cli evaluate problem=$P candidate=$PWD/.scratch/seed66.py out=$OUT/eval66/eval66_$i.json > $OUT/eval66/log_$i.txt 2>&1; done ) &
( CUDA_VISIBLE_DEVICES=3 timeout 175 python3 experiments/judge_honest.py $OUT/judge --kernelbench .scratch/kb > $OUT/judge.log 2>&1 ) &
wait
