#!/usr/bin/env bash
# The same kernels launched two ways, judged on a GPU: for each NAME, .scratch/sites/NAME_jit.py (a kernel as it was
# kept, launching through Triton's JIT) and .scratch/sites/NAME_sites.py (the same file through LaunchSites:
# experiments/diagnostics/through_sites.py) are judged by `kernelevo evaluate` against PROBLEM, one problem per GPU,
# in the background (the baselines' compiles outlast a device call): `start` runs them, `collect` waits for them and
# prints each judgement's figures. Carry .whl-core and .scratch (.scratch/kb: KernelBench) in the call that starts.
#   run(kind=nvidia-h200-x4, carry=[.whl-core, .scratch], command="bash experiments/diagnostics/launch_sites_pairs.sh \
#       start 0:l3_20:level3/20_MobileNetV2.py 1:...")
#   run(command="bash experiments/diagnostics/launch_sites_pairs.sh collect 500")   # within 30 s of the last call
# EXTRA="a=b": more overrides of evaluate (e.g. fitness.baseline_compile_timeout_s=240).
set -uo pipefail
W=${W:-/tmp/pairs}
case ${1:?start or collect} in
  start)
    shift
    rm -rf $W && mkdir -p $W && cp -a . $W/tree && cd $W/tree || exit 1
    source experiments/scale/device_env.sh .whl-core || exit 1
    for job in "$@"; do
      IFS=: read -r gpu name problem <<< "$job"
      # its own session (setsid), so that it outlives the call: the first use, without it, lost two judgements
      setsid bash -c "for way in jit sites; do CUDA_VISIBLE_DEVICES=$gpu python3 -m kernelevo.cli evaluate \
        problem=.scratch/kb/$problem candidate=.scratch/sites/${name}_\$way.py hydra.run.dir=$W/$name/\$way \
        ${EXTRA:-} > $W/${name}_\$way.log 2>&1; echo rc=\$? >> $W/${name}_\$way.log; done" \
        < /dev/null > /dev/null 2>&1 &
      echo $! >> $W/pids
    done
    nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $W/machine.txt
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $W/machine.txt
    cat $W/machine.txt ;;
  collect)
    for _ in $(seq ${2:-500}); do
      alive=0; for pid in $(cat $W/pids); do kill -0 $pid 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break; sleep 1
    done
    mkdir -p $OUT/pairs && cp $W/*.log $W/machine.txt $OUT/pairs/
    for d in $W/*/; do for way in jit sites; do [ -f $d$way/result.json ] && cp $d$way/result.json \
      $OUT/pairs/$(basename $d)_${way}_result.json; done; done
    grep -H "^status\|^time\|^speedup\|^correctness\|^rc=\|baselines measured" $W/*.log | cut -c1-260 ;;
esac
