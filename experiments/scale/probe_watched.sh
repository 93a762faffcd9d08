#!/usr/bin/env bash
# One device call: probe.sh over a list with a watcher that stops the bench after a finished row when the call's
# time left (T seconds from the start, minus the time spent) is under MARGIN, so no device time goes to a run that
# the call's limit would kill. Finished rows carried in as .scratch/bench-TITLE.tgz are skipped by the bench.
#   T=560 MARGIN=150 bash experiments/scale/probe_watched.sh LIST_FILE TITLE [extra overrides...]
# Writes $OUT/probe.txt (GPU, versions, the bench's lines) and $OUT/watch.txt (when each row came, when it stopped),
# besides what probe.sh writes. It stops only its own bench (by its bench.dir), so two probes side by side on a
# two-GPU machine (CUDA_VISIBLE_DEVICES, other TITLEs) each watch their own.
set -uo pipefail
list=$1; title=$2; shift 2
T=${T:-560}; MARGIN=${MARGIN:-150}; start=$(date +%s); bench=/tmp/bench-$title
(BENCH_TIMEOUT=$T bash experiments/scale/probe.sh "$list" "$title" "$@" > $OUT/probe.txt 2>&1) &
probe=$!
sleep 20; n=$(ls $bench/rows 2>/dev/null | wc -l)
while kill -0 $probe 2>/dev/null; do
  sleep 2; m=$(ls $bench/rows 2>/dev/null | wc -l)
  if [ "$m" != "$n" ]; then
    n=$m; now=$(( $(date +%s) - start )); left=$(( T - now ))
    echo "row $n at $now s, $left s left" >> $OUT/watch.txt
    if [ $left -lt $MARGIN ]; then
      echo "stopping: $left s < $MARGIN s" >> $OUT/watch.txt; pkill -TERM -f "kernelevo.cli bench .*bench.dir=$bench "
    fi
  fi
done
wait; cat $OUT/watch.txt; tail -25 $OUT/probe.txt
