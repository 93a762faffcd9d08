"""Where the timing spread comes from (issue: throughput): one kernel timed again and again, one condition changed
at a time. Each measurement is the evaluator's timer (``fitness.measure.timing.CudaEventTimer``) on the problem's seed.

    A  in this process, no sandbox: the timer N times back to back; with the L2 flush off; with a long fixed spin
       before each repetition (launch time cannot leak into the start-to-end time); after idle gaps (GPU clocks)
    B  fresh plain processes (no fork server, no confinement), one measurement each
    C  the evaluator: the seed evaluated N times with a warm spare starting meanwhile, and with none
    I  after the GPU idled --idle-s seconds: every repetition's time for ~1.5 s from the first launch, with the
       GPU's clocks and power state sampled meanwhile (nvidia-smi); then the timer after the same idle, once with
       its default warm-up and once with a long one (is the slow first measurement the clocks ramping up?)
    X  the timer in this process while another process keeps making CUDA contexts (forked children that create one,
       launch one tiny kernel and exit), one at a time and four at a time, against quiet; then whole start-ups as a
       spare makes them (context, Triton pre-warm, the judge's warm-up kernels), one and two at a time; decides
       whether a worker may start up while a candidate is timed (``fitness.start_up_under_lock``): its last row
       is the verdict and the line for the GPU's hardware profile (``start_up_disturbs_timing``)
    K  C with start-ups outside the GPU's lock (``start_up_under_lock=false``)

Every row keeps the timer's internals (median launch time, spin, stream-only and device-wide medians), so a
change in the median can be traced to one of them.

    python3 experiments/diagnostics/diagnose_timing_spread.py --out OUT.json [--problem elementwise_chain] [--runs 6]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

KEYS = ("median_s", "stream_median_s", "all_streams_median_s", "launch_s", "spin_s", "redone", "p25_s", "p75_s",
        "n")


def summary(label: str, stats: list[dict], **extra) -> dict:
    medians = [s["median_s"] for s in stats]
    row = {"condition": label, **extra, "medians_us": [round(m * 1e6, 2) for m in medians],
           "cv": statistics.pstdev(medians) / statistics.fmean(medians) if len(medians) > 1 else 0.0,
           "stats": [{k: s.get(k) for k in KEYS} for s in stats]}
    print(f"[spread] {label}: cv={row['cv']:.3%} medians={row['medians_us']} launch_us="
          f"{[round(s.get('launch_s', 0) * 1e6, 1) for s in stats]} spin_us="
          f"{[round(s.get('spin_s', 0) * 1e6, 1) for s in stats]} stream_us="
          f"{[round(s['stream_median_s'] * 1e6, 2) for s in stats]} all_us="
          f"{[round(s['all_streams_median_s'] * 1e6, 2) for s in stats]} redone={[s.get('redone') for s in stats]}"
          f" p75_us={[round(s['p75_s'] * 1e6, 1) for s in stats]}", flush=True)
    return row


def load_seed(problem_name: str):
    """(ModelNew instance, reference Model, input sets) for the problem's seed, on the GPU."""
    import torch

    from fitness.problems.problem import call_get_init_inputs, load_problem, resolve_problem
    from fitness.judge.inputs import make_inputs

    spec = resolve_problem(problem_name)
    problem = load_problem(spec)
    loader = importlib.util.spec_from_file_location("seed_under_test", spec.seed_path)
    seed = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(seed)
    torch.manual_seed(0)
    model = seed.ModelNew(*call_get_init_inputs(problem)).cuda().eval()
    return model, [make_inputs(problem, 1000 + j, "cuda") for j in range(3)]


def make_timer(**overrides):
    from fitness.settings import TimingSettings
    from fitness.measure.timing import make_timer as timer_for
    from hardware_profiles import detect_profile

    return timer_for("cuda", detect_profile().l2_cache_bytes, TimingSettings(**overrides))


def fixed_spin(timer, launch_s: float):
    """The timer with its launch-time estimate pinned, so its spin is the same long one every repetition."""
    warm_up = timer._warm_up

    def pinned(fn, input_sets):
        per_call, _ = warm_up(fn, input_sets)
        return per_call, launch_s
    timer._warm_up = pinned
    return timer


def in_process(problem: str, runs: int) -> list[dict]:
    import torch

    model, input_sets = load_seed(problem)
    rows = []
    with torch.no_grad():
        for label, timer_of, gap_s in (("A1 back to back", make_timer, 0.0),
                                       ("A2 L2 flush off", lambda: make_timer(flush_l2=False), 0.0),
                                       ("A3 fixed 500 us spin", lambda: fixed_spin(make_timer(), 245e-6), 0.0),
                                       ("A4 after 2 s idle", make_timer, 2.0)):
            stats = []
            for _ in range(runs):
                time.sleep(gap_s)
                stats.append(timer_of().measure(model, input_sets).to_dict())
            rows.append(summary(label, stats))
    return rows


def fresh_processes(problem: str, runs: int) -> dict:
    stats = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, __file__, "--one", "--problem", problem], capture_output=True,
                             text=True, timeout=120)
        line = [x for x in out.stdout.splitlines() if x.startswith("{")]
        if not line:
            print(out.stderr[-2000:], flush=True)
            continue
        stats.append(json.loads(line[-1]))
    return summary("B fresh plain process", stats)


def evaluator_runs(problem: str, runs: int, **settings) -> dict:
    from fitness.evaluation.evaluator import EvalSettings, Evaluator
    from fitness.comparison.policy import load_policy
    from fitness.problems.problem import resolve_problem
    from hardware_profiles import detect_profile

    spec = resolve_problem(problem)
    stats, phases = [], []
    with Evaluator(spec, load_policy("triton"), detect_profile(), EvalSettings(baselines=["eager"], **settings),
                   device="cuda") as ev:
        for _ in range(runs):
            result = ev.evaluate(spec.seed_source())
            if result.time_s is None:
                print(f"[spread] evaluation failed: {result.status} {result.reason[:300]}", flush=True)
                continue
            stats.append(result.timing["candidate"])
            phases.append({k: round(v, 3) for k, v in result.phases_s.items()})
    return summary(f"C evaluator {settings or 'defaults'}", stats, settings=settings, phases=phases)


def clock_sampler(period_ms: int = 20):
    """nvidia-smi sampling SM and memory clocks and the power state every `period_ms` (None without nvidia-smi)."""
    try:
        return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw",
                                 "--format=csv,noheader", f"-lms={period_ms}", "-i", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def after_idle(problem: str, idle_s: float) -> list[dict]:
    import torch

    model, input_sets = load_seed(problem)
    rows = []
    with torch.no_grad():
        timer = make_timer()
        sleep_cycles = int(100e-6 * timer._cycles_per_s)
        time.sleep(idle_s)
        sampler, start, trace = clock_sampler(), time.perf_counter(), []
        while time.perf_counter() - start < 1.5:
            stream, _, _ = timer._rep(model, input_sets[len(trace) % 3], sleep_cycles, 100e-6)
            trace.append((round(time.perf_counter() - start, 4), round(stream * 1e6, 2)))
        clocks = []
        if sampler is not None:
            time.sleep(0.1)
            sampler.terminate()
            clocks = sampler.communicate(timeout=10)[0].splitlines()
        print(f"[spread] I trace after {idle_s} s idle: first {trace[:5]} ... at 0.1 s "
              f"{[t for t in trace if t[0] >= 0.1][:3]} last {trace[-3:]}; clocks {clocks[:3]} .. {clocks[-2:]}",
              flush=True)
        rows.append({"condition": f"I trace after {idle_s} s idle", "trace": trace, "clocks": clocks})
        for label, warmup_ms in (("I timer after idle, default warm-up", None), ("I timer after idle, 500 ms warm-up",
                                                                                  500.0)):
            stats = []
            for _ in range(2):
                time.sleep(idle_s)
                timer = make_timer(**({"warmup_ms": warmup_ms} if warmup_ms else {}))
                stats.append(timer.measure(model, input_sets).to_dict())
            rows.append(summary(label, stats, idle_s=idle_s))
    return rows


def churn_contexts(at_once: int, start_ups: bool = False) -> None:
    """Until terminated: fork `at_once` children at a time, each creating a CUDA context on GPU 0, launching one tiny
    kernel (`start_ups`: pre-warming Triton and warming the judge, as a spare does) and exiting (this process never
    touches CUDA, so it can fork); prints a line per round."""
    import torch

    from fitness.workers.warm import prewarm_triton, warm_judge

    made, start = 0, time.time()
    while True:
        children = []
        for _ in range(at_once):
            pid = os.fork()
            if pid == 0:
                torch.zeros(1, device="cuda")
                if start_ups:
                    prewarm_triton("cuda")
                    warm_judge("cuda")
                torch.cuda.synchronize()
                os._exit(0)
            children.append(pid)
        for pid in children:
            os.waitpid(pid, 0)
        made += at_once
        print(f"{made} {time.time() - start:.3f}", flush=True)


def during_contexts(problem: str, runs: int) -> list[dict]:
    import torch

    model, input_sets = load_seed(problem)
    rows = []
    with torch.no_grad():
        for label, at_once in (("X quiet", 0), ("X contexts made one at a time meanwhile", 1),
                               ("X contexts made four at a time meanwhile", 4),
                               ("X start-ups (context, pre-warm, judge warm-up) one at a time meanwhile", -1),
                               ("X start-ups two at a time meanwhile", -2), ("X quiet again", 0)):
            churn = subprocess.Popen([sys.executable, __file__, "--churn", str(at_once)], stdout=subprocess.PIPE,
                                     text=True) if at_once else None
            if churn is not None:
                churn.stdout.readline()  # its first round is done: torch imported, contexts being made
            start = time.time()  # a start-up takes over a second: three times the runs, so several overlap
            stats = [make_timer().measure(model, input_sets).to_dict() for _ in range(runs * (3 if at_once < 0 else 1))]
            wall, rate = time.time() - start, None
            if churn is not None:
                churn.terminate()
                lines = [line.split() for line in churn.communicate(timeout=60)[0].splitlines() if line.strip()]
                if len(lines) > 1:
                    rate = (int(lines[-1][0]) - int(lines[0][0])) / max(float(lines[-1][1]) - float(lines[0][1]), 1e-9)
            rows.append(summary(label, stats, contexts_per_s=rate, wall_s=wall))
            print(f"[spread] {label}: {rate and round(rate, 1)} contexts/s over {wall:.1f} s", flush=True)
    verdict = start_up_verdict(rows)
    print(f"[spread] X verdict: {json.dumps(verdict)}", flush=True)
    return rows + [{"condition": "X verdict", **verdict}]


def start_up_verdict(rows: list[dict], max_shift: float = 0.01, max_cv: float = 0.02) -> dict:
    """Whether part X's rows say start-ups may run during a timing on this GPU: every start-up condition's median
    within `max_shift` of the quiet conditions' and its CV under `max_cv` (the timing-spread target). The line to
    put into the GPU's hardware profile comes with it (``fitness.start_up_under_lock`` follows it)."""
    quiet = [m for r in rows if r["condition"].startswith("X quiet") for m in r["medians_us"]]
    busy = [r for r in rows if r["condition"].startswith("X start-ups")]
    if not quiet or not busy:
        return {"start_up_disturbs_timing": None, "why": "no quiet or no start-up condition measured"}
    reference = statistics.median(quiet)
    shift = max(abs(statistics.median(r["medians_us"]) / reference - 1) for r in busy)
    cv = max(r["cv"] for r in busy)
    disturbs = shift > max_shift or cv > max_cv
    return {"start_up_disturbs_timing": disturbs, "worst_shift": shift, "worst_cv": cv,
            "profile_line": f"start_up_disturbs_timing: {str(disturbs).lower()}  # part X: start-ups moved a timed "
                            f"kernel's median by up to {shift:.2%}, CV up to {cv:.2%}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="")
    parser.add_argument("--problem", default="elementwise_chain")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--one", action="store_true", help="one measurement in this process, printed as JSON")
    parser.add_argument("--parts", default="ABC", help="A, B, C, I, X, K as above; U: C unconfined too")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--churn", type=int, default=0, help=argparse.SUPPRESS)  # part X's maker (< 0: start-ups)
    args = parser.parse_args()
    if args.churn:
        churn_contexts(abs(args.churn), start_ups=args.churn < 0)
        return
    if args.one:
        import torch

        model, input_sets = load_seed(args.problem)
        with torch.no_grad():
            print(json.dumps(make_timer().measure(model, input_sets).to_dict()), flush=True)
        return
    rows = []
    if "I" in args.parts:
        rows += after_idle(args.problem, args.idle_s)
    if "A" in args.parts:
        rows += in_process(args.problem, args.runs)
    if "B" in args.parts:
        rows.append(fresh_processes(args.problem, max(args.runs // 2, 2)))
    if "C" in args.parts:
        rows.append(evaluator_runs(args.problem, args.runs))
        rows.append(evaluator_runs(args.problem, args.runs, prestart_worker=False))
        if "U" in args.parts:  # unconfined as well
            rows.append(evaluator_runs(args.problem, args.runs, confine=False, prestart_worker=False))
    if "K" in args.parts:
        rows.append(evaluator_runs(args.problem, args.runs, start_up_under_lock=False))
    if "X" in args.parts:
        rows += during_contexts(args.problem, args.runs)
    Path(args.out).write_text(json.dumps({"problem": args.problem, "command": " ".join(sys.argv), "rows": rows},
                                         indent=1))


if __name__ == "__main__":
    main()
