#!/usr/bin/env bash
# Issue 43's whole-KernelBench bench on a 4-GPU machine, across several device calls of one warm machine: `start`
# launches the bench in its own process session (it outlives the call), `wait S` lets it run S seconds and reports,
# `stop` interrupts it (Ctrl-C: finished problems kept, running ones resumable), makes the table and packs the bench
# directory into $OUT. Carry .whl-core and .scratch (.scratch/kb: KernelBench's levels 1-3) in the first call only:
# the bench runs from a copy of the tree in /tmp/kb_all, its bench directory is /tmp/kb_all/bench.
#   run(kind=nvidia-h100-x4, carry=[.whl-core, .scratch], command="bash experiments/scale/kernelbench_all.sh start 120")
#   run(command="bash experiments/scale/kernelbench_all.sh wait 540")      # within 30 s of the last call's end
#   run(command="bash experiments/scale/kernelbench_all.sh stop [S]")     # S: seconds to wait for it (240)
# Order: experiments/scale/kernelbench_order.py (each level shuffled, interleaved by size), so a bench cut short has
# done a random sample of every level; LIST=FILE (a path in the tree) takes that list instead (e.g. the problems a first
# part left). Settings (SEARCH_S, PER_GPU, PARALLEL, TIMEOUT_S) are the command's overrides; the first part ran
# PER_GPU=3 PARALLEL=5 TIMEOUT_S=300, and three problems per GPU ran out of memory and stalled level 3
# (experiments/results/kernelbench_h100x4/): two per GPU and 900 s now, PER_GPU=1 for level 3.
# `start` and `wait` return early when the bench has ended (finished, or refused its settings: a call that did not
# carry .scratch). Two benches side by side: W=DIR (default /tmp/kb_all) for each and GPUS=a,b (CUDA_VISIBLE_DEVICES)
# to split the GPUs; give the second its share of the cores (OMP_NUM_THREADS), as the bench does its own; stop the
# second first: a bench still stopping after S seconds has every process on the GPUs killed. EXTRA="a=b c=d": more
# overrides of the bench's command (e.g. fitness.baseline_compile_timeout_s=480), written into machine.txt.
set -uo pipefail
SEARCH_S=${SEARCH_S:-15}; PER_GPU=${PER_GPU:-2}; PARALLEL=${PARALLEL:-7}; TIMEOUT_S=${TIMEOUT_S:-900}
W=${W:-/tmp/kb_all}; TAG=${W##*/}  # what comes back to $OUT is named after it
[ -n "${GPUS:-}" ] && export CUDA_VISIBLE_DEVICES=$GPUS
report() {  # progress: rows by status, the bench log's tail
  python3 - "$W/bench" <<'PY'
import collections, json, pathlib, sys
rows = [json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1], "rows").glob("*.json"))]
print(len(rows), "rows:", dict(collections.Counter(r.get("status") for r in rows)))
for r in rows:
    if r.get("status") != "ok":
        print(" ", r.get("name"), r.get("status"), str(r.get("reason") or r.get("note") or "")[:160])
PY
  tail -5 $W/log.txt
}
await_bench() {  # up to $1 seconds while the bench runs: one that ended (done, or refused its settings) ends the wait
  for _ in $(seq $1); do kill -0 "$(cat $W/pid)" 2>/dev/null || { echo "the bench has ended"; tail -3 $W/log.txt; \
    return; }; sleep 1; done
}
pack() {  # the bench directory (run stores without their pages) in parts of at most 15 MB, and the logs
  tar czf $OUT/$TAG-bench.tgz -C $W --exclude='*.html' --exclude='*-shm' --exclude='*-wal' bench order.txt log.txt \
    machine.txt smi.csv 2>/dev/null
  [ "$(stat -c %s $OUT/$TAG-bench.tgz)" -gt 15000000 ] && \
    (cd $OUT && split -b 15000000 -d $TAG-bench.tgz $TAG-bench.tgz. && rm $TAG-bench.tgz)
  ls -la $OUT
}
case ${1:?start, wait or stop} in
  start)
    rm -rf $W && mkdir -p $W && cp -a . $W/tree && cd $W/tree || exit 1
    source experiments/scale/device_env.sh .whl-core || exit 1
    if [ -n "${LIST:-}" ]; then cp "$LIST" $W/order.txt; else
      python3 experiments/scale/kernelbench_order.py .scratch/kb > $W/order.txt; fi
    { nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nproc
      python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
      echo "GPUS=${GPUS:-all} SEARCH_S=$SEARCH_S PER_GPU=$PER_GPU PARALLEL=$PARALLEL TIMEOUT_S=$TIMEOUT_S" \
        "OMP_NUM_THREADS=${OMP_NUM_THREADS:-} EXTRA=${EXTRA:-} started $(date -u +%FT%TZ)"; } \
      > $W/machine.txt
    # every stream away from the call's: a sampler holding its stdout keeps a `... start | tail` waiting for EOF (the
    # likely cause of a call that ran to its 570 s limit in kernelbench_part9/)
    setsid nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 2000 \
      -f $W/smi.csv > /dev/null 2>&1 < /dev/null &
    setsid python3 -m kernelevo.cli bench bench.root=.scratch/kb bench.problems=$W/order.txt bench.dir=$W/bench \
      bench.title=kernelbench-all search.wall_time_s=$SEARCH_S search.generations=1000 search.patience=null \
      parallel=$PARALLEL bench.backend.per_gpu=$PER_GPU bench.backend.timeout_s=$TIMEOUT_S ${EXTRA:-} \
      > $W/log.txt 2>&1 < /dev/null &
    echo $! > $W/pid
    cat $W/machine.txt; await_bench ${2:-120}; report; cp $W/machine.txt $OUT/$TAG-machine.txt ;;
  wait)  # the rows so far come back with each call: a call cut short by the session's device time loses nothing
    await_bench ${2:?seconds}; report; tar czf $OUT/$TAG-rows.tgz -C $W/bench rows 2>/dev/null ;;
  stop)
    pid=$(cat $W/pid); kill -INT $pid
    for _ in $(seq ${2:-240}); do kill -0 $pid 2>/dev/null || break; sleep 1; done  # searches stop, rows written
    if kill -0 $pid 2>/dev/null; then  # what is still running goes, so that what follows has quiet GPUs
      echo "the bench was still stopping after ${2:-240} s: killed; problems without a row are resumable"
      pkill -KILL -s $pid; sleep 2
      nvidia-smi --query-compute-apps=pid --format=csv,noheader | xargs -r kill -KILL; sleep 2
    fi
    pkill -f "nvidia-smi --query-gpu.*$W" ; cd $W/tree && source experiments/scale/device_env.sh .whl-core
    echo "stopped $(date -u +%FT%TZ)" >> $W/machine.txt
    python3 -m kernelevo.cli table bench_dirs=[$W/bench] out=$W/bench/table > $W/table.log 2>&1; tail -3 $W/table.log
    report; pack ;;
esac
