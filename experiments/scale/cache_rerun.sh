#!/usr/bin/env bash
# Issue 65: the machine's caches at work on a GPU. One bench of a few problems on a cold cache (fitness.cache_dir a
# new folder), then the same bench again on the warm cache (a new bench dir): baselines, torch.compile's seeds and
# generation 0's verdicts read back (each problem's line and summary.json say what came from a cache). With G0=S a
# third pass on the warm cache caps generation 0 at S seconds (search.generation0_s). Per pass in $OUT: the bench's
# log and bench.md, its stages table (kernelbench_stages.py) and rows.md (per problem: wall, evaluations,
# generation 0, the seeds' check, baselines, capture, what was cached).
#   run(carry=[.whl, .scratch], command="bash experiments/scale/cache_rerun.sh")    # about 4 min of one H100
# PROBLEMS (ids under .scratch/kb, comma-separated), SEARCH_S (15), PER_GPU (2), WHEELS (.whl), EXTRA (more
# overrides of every pass), TIMEOUT_S (one problem's cap, 240).
set -uo pipefail
PROBLEMS=${PROBLEMS:-level1/19,level1/23,level1/36}; SEARCH_S=${SEARCH_S:-15}; PER_GPU=${PER_GPU:-2}
W=${W:-/tmp/cache_rerun}; OUT=${OUT:-$W/out}
source experiments/scale/device_env.sh ${WHEELS:-.whl} || exit 1
rm -rf $W && mkdir -p $W $OUT
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "cores $(nproc)"; git log --oneline -1; } > $OUT/machine.txt 2>/dev/null
passes="first warm${G0:+ warm_g0}"
for pass in $passes; do
  extra=${EXTRA:-}; [ $pass = warm_g0 ] && extra="$extra search.generation0_s=$G0"
  start=$(date +%s)
  python3 -m kernelevo.cli bench bench.root=.scratch/kb "bench.problems=[$PROBLEMS]" bench.dir=$W/$pass \
    fitness.cache_dir=$W/cache search.wall_time_s=$SEARCH_S search.generations=1000 search.patience=null \
    bench.backend.per_gpu=$PER_GPU bench.backend.timeout_s=${TIMEOUT_S:-240} $extra > $OUT/$pass.log 2>&1
  code=$?
  echo "$pass: $(( $(date +%s) - start )) s, exit $code ($extra)" | tee -a $OUT/machine.txt
  cp $W/$pass/bench.md $OUT/$pass-bench.md 2>/dev/null
  python3 experiments/scale/kernelbench_stages.py $W/$pass > $OUT/$pass-stages.md 2>&1
  python3 - $W/$pass > $OUT/$pass-rows.md <<'PY'
import json, pathlib, sys
print("| problem | status | wall (s) | evaluations | generation 0 (s) | seeds' check (s) | baselines (s) | capture (s) "
      "| seed | baselines | verdicts cached |\n" + "|---" * 11 + "|")
for path in sorted(pathlib.Path(sys.argv[1], "rows").glob("*.json")):
    row = json.loads(path.read_text()); s = row.get("summary") or {}
    f = lambda v: "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)
    print(f"| {row['name']} | {row['status']} | {f(row['wall_s'])} | {f(s.get('evaluations'))} | "
          f"{f(s.get('generation0_s'))} | {f(s.get('seed_check_s'))} | {f(s.get('baseline_wall_s'))} | "
          f"{f(s.get('seed_capture_s'))} | {s.get('seed_cache') or '-'} | {s.get('baseline_cache') or '-'} | "
          f"{f(s.get('verdicts_reused'))} |")
PY
  cat $OUT/$pass-rows.md
done
